"""Zarr v2: ``.zarray``/``.zattrs``/``.zgroup`` documents and chunk files, written by hand
(any dtype, legacy spellings, broken metadata) or by zarr-python."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr

from helpers.stores.core import (
    DEFAULT,
    dotted_key,
    node_dir,
    quiet,
    read_json,
    write_chunks,
    write_json,
    zarr_read,
    zarr_write,
)

# --------------------------------------------------------------------------- dtypes, fills


def _convert_descr(descr: list, leaf: Callable[[list], Any], shape: Callable[[Any], Any]):
    out = []
    for item in descr:
        name, inner, *rest = item
        inner = _convert_descr(inner, leaf, shape) if isinstance(inner, list) else inner
        out.append(leaf([name, inner, shape(rest[0])] if rest else [name, inner]))
    return out


def dtype_to_json(dtype: np.dtype):
    """The .zarray ``dtype`` value of a NumPy dtype (descr lists for structured)."""
    dtype = np.dtype(dtype)
    if dtype.fields is None:
        return dtype.str
    return _convert_descr(dtype.descr, list, list)


def dtype_from_json(value) -> np.dtype:
    """The inverse, as the contract says: inner lists become tuples, then ``np.dtype``."""
    if isinstance(value, str):
        return np.dtype(value)
    return np.dtype(_convert_descr(value, tuple, tuple))


def fill_to_json(fill, dtype: np.dtype):
    """A fill value as a v2 ``.zarray`` stores it."""
    if fill is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind in "SV" or dtype.fields is not None:
        return base64.standard_b64encode(np.array(fill, dtype=dtype).tobytes()).decode()
    if dtype.kind == "f":
        f = float(fill)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if dtype.kind in "iu":
        return int(fill)
    if dtype.kind == "b":
        return bool(fill)
    raise ValueError(f"no manual fill encoding for {dtype}")


# --------------------------------------------------------------------------- documents


def zarray_doc(
    data: np.ndarray,
    chunks: tuple[int, ...],
    *,
    compressor: numcodecs.abc.Codec | None,
    fill_json: Any,
    order: str = "C",
    filters: list | None = None,
    sep: str = ".",
) -> dict:
    """The ``.zarray`` document of ``data`` stored in ``chunks``."""
    return {
        "zarr_format": 2,
        "shape": list(data.shape),
        "chunks": list(chunks),
        "dtype": dtype_to_json(data.dtype),
        "compressor": compressor.get_config() if compressor is not None else None,
        "fill_value": fill_json,
        "order": order,
        "filters": [f.get_config() for f in filters] if filters else None,
        "dimension_separator": sep,
    }


def write_zgroup(directory: Path) -> None:
    """A group with only ``.zgroup`` (no .zattrs at all)."""
    write_json(directory / ".zgroup", {"zarr_format": 2})


def write_raw_array(directory: Path, zarray_text: str, chunk: bytes | None = None) -> None:
    """``.zarray`` with the exact text given (it may be broken), and chunk ``0``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".zarray").write_text(zarray_text)
    if chunk is not None:
        (directory / "0").write_bytes(chunk)


# --------------------------------------------------------------------------- arrays by hand


def encode_chunk(chunk: np.ndarray, order: str, filters: list | None, compressor) -> bytes:
    """A v2 chunk: the elements in ``order``, through the filters, then the compressor."""
    raw = chunk.tobytes(order=order)
    for f in filters or []:
        raw = f.encode(raw)
    if compressor is not None:
        raw = compressor.encode(raw)
    return bytes(raw)


def write_v2_array(
    directory: Path,
    data: np.ndarray,
    *,
    chunks: tuple[int, ...],
    fill_value=None,
    order: str = "C",
    sep: str = ".",
    filters: list | None = None,
    compressor: numcodecs.abc.Codec | None = None,
    present: Callable[[tuple[int, ...]], bool] | None = None,
    attrs: dict | None = None,
    fill_json=DEFAULT,
    zarray_overrides: dict | None = None,
    omit_keys: tuple[str, ...] = (),
) -> np.ndarray:
    """.zarray, .zattrs (if ``attrs`` is not None) and the chunks where ``present(idx)``;
    returns the oracle (``data``, ``fill_value`` where a chunk is absent). ``zarray_overrides``
    / ``omit_keys`` write legacy spellings (the chunks are still written as described)."""
    if fill_json is DEFAULT:
        fill_json = fill_to_json(fill_value, data.dtype)
    zarray = zarray_doc(
        data,
        chunks,
        compressor=compressor,
        fill_json=fill_json,
        order=order,
        filters=filters,
        sep=sep,
    )
    zarray.update(zarray_overrides or {})
    for k in omit_keys:
        zarray.pop(k, None)
    write_json(directory / ".zarray", zarray, indent=2)
    if attrs is not None:
        write_json(directory / ".zattrs", attrs)
    fill = np.zeros((), dtype=data.dtype) if fill_value is None else fill_value
    return write_chunks(
        directory,
        data,
        chunks,
        fill,
        key=lambda idx: dotted_key(idx, sep),
        encode=lambda chunk: encode_chunk(chunk, order, filters, compressor),
        present=present,
    )


# --------------------------------------------------------------------------- zarr-python


def open_v2_group(
    root: Path, path: str | None = None, attrs: dict | None = None, mode: str = "a"
) -> None:
    """A group written by zarr-python (``mode="w"`` at the root: a new store)."""
    g = zarr.open_group(str(root), path=path, mode=mode, zarr_format=2)
    if attrs:
        g.attrs.update(attrs)


def zarr_v2_array(
    root: Path,
    path: str,
    data: np.ndarray,
    *,
    chunks: tuple[int, ...],
    region: Any = "all",
    fill_value=DEFAULT,
    order: str = "C",
    sep: str = ".",
    filters: list | None = None,
    compressor=DEFAULT,
    attrs: dict | None = None,
) -> None:
    """Create ``path`` with zarr-python and write ``data[region]`` (``None``: nothing)."""
    kw: dict = dict(
        name=path,
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        zarr_format=2,
        order=order,
        chunk_key_encoding={"name": "v2", "separator": sep},
    )
    if fill_value is not DEFAULT:
        kw["fill_value"] = fill_value
    if filters is not None:
        kw["filters"] = filters
    if compressor is not DEFAULT:
        kw["compressors"] = compressor
    if attrs:
        kw["attributes"] = attrs
    zarr_write(root, data, region, **kw)


def read_v2_meta(root: Path, path: str) -> tuple[dict | None, dict]:
    """(.zarray or None, .zattrs or {}) of node ``path``."""
    d = node_dir(root, path)
    return read_json(d / ".zarray", None), read_json(d / ".zattrs", {})


def v2_oracle(root: Path, path: str, stored: np.dtype | None = None) -> bytes:
    """zarr-python's bytes of array ``path``, in the byte order the file keeps (``stored``):
    zarr-python may hand back native byte order."""
    with quiet():
        values = np.asarray(zarr_read(root, path, 2)[...])
    if stored is not None and values.dtype != stored:
        values = values.astype(stored)
    return np.ascontiguousarray(values).tobytes()
