"""What every store layout writes alike: chunk grids, chunk files, JSON documents, and
arrays written by zarr-python (with its warnings silenced)."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

DEFAULT = object()  # "let zarr-python choose" (its default compressor is zstd)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """zarr-python's warnings (unstable specifications, v2 data types, ...) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def prefixed(add: Callable, prefix: str, **common) -> Callable:
    """``add(name, data, **kw)`` for the node ``prefix/name``, ``common`` keywords first (a
    row's own keywords win)."""
    return lambda name, data, **kw: add(f"{prefix}/{name}", data, **{**common, **kw})


# --------------------------------------------------------------------------- files


def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


def write_file(path: Path, content: str | bytes) -> None:
    """``content`` at ``path``, its parent directories made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)


def write_json(path: Path, doc: Any, indent: int | None = None) -> None:
    write_file(path, json.dumps(doc, indent=indent))


def node_dir(root: Path, path: str) -> Path:
    """The directory of node ``path`` ("" is the root)."""
    return root / path if path else root


# --------------------------------------------------------------------------- zarr-python


def zarr_write(root: Path | str, data: np.ndarray | None, region: Any = "all", **create):
    """``zarr.create_array(root, **create)`` (shape and dtype those of ``data`` unless
    given), then ``data[region]`` written (``"all"``: the whole array, ``None``: nothing)."""
    if data is not None:
        create.setdefault("shape", data.shape)
        create.setdefault("dtype", data.dtype)
    with quiet():
        arr = zarr.create_array(str(root), **create)
        if data is not None and region is not None:
            if region == "all":
                arr[...] = data
            else:
                arr[region] = data[region]
    return arr


def zarr_read(root: Path, path: str, zarr_format: int) -> zarr.Array:
    with quiet():
        return zarr.open_array(str(root), path=path, mode="r", zarr_format=zarr_format)


# --------------------------------------------------------------------------- chunk grid


def chunk_grid(shape, chunks) -> list[range]:
    return [range(math.ceil(s / c)) if c else range(0) for s, c in zip(shape, chunks, strict=True)]


def chunk_regions(shape, chunks) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """``(chunk index, the region of the array it holds)`` for every chunk, in C order."""
    for idx in itertools.product(*chunk_grid(shape, chunks)):
        yield (
            idx,
            tuple(
                slice(i * c, min((i + 1) * c, s))
                for i, c, s in zip(idx, chunks, shape, strict=True)
            ),
        )


def padded_chunk(data: np.ndarray, idx, chunks, fill) -> np.ndarray:
    """The full-size chunk ``idx`` of ``data`` (edge chunks padded with ``fill``)."""
    out = np.full(chunks, fill, dtype=data.dtype)
    region = tuple(
        slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, data.shape, strict=True)
    )
    out[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
    return out


def write_chunks(
    directory: Path,
    data: np.ndarray,
    chunks: tuple[int, ...],
    fill: Any,
    key: Callable[[tuple[int, ...]], str],
    encode: Callable[[np.ndarray], bytes],
    present: Callable[[tuple[int, ...]], bool] | None = None,
) -> np.ndarray:
    """Every chunk of ``data`` for which ``present(idx)`` holds, padded with ``fill`` and
    encoded, at ``directory / key(idx)``. Returns the oracle: ``data`` where a chunk is
    stored, ``fill`` where it is absent."""
    expected = np.full(data.shape, fill, dtype=data.dtype)
    for idx, region in chunk_regions(data.shape, chunks):
        if present is not None and not present(idx):
            continue
        write_file(directory / key(idx), bytes(encode(padded_chunk(data, idx, chunks, fill))))
        expected[region] = data[region]
    return expected


def dotted_key(idx: tuple[int, ...], sep: str) -> str:
    """v2 chunk keys (and v3 ``v2`` encoding): ``0.1`` or ``0/1``; a 0-d array's is ``0``."""
    return sep.join(map(str, idx)) if idx else "0"


def default_key(idx: tuple[int, ...], sep: str) -> str:
    """v3 ``default`` chunk keys: ``c/0/1`` or ``c.0.1``; a 0-d array's is ``c``."""
    return sep.join(["c", *map(str, idx)])


def draft_key(idx: tuple[int, ...], sep: str) -> str:
    """May 2022 draft chunk keys: ``c0/1``; a 0-d array's is ``c``."""
    return "c" + sep.join(map(str, idx))
