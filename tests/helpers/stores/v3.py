"""Zarr v3 (final spec): ``zarr.json`` documents, chunk and shard files written by hand or by
zarr-python, and zarr-python's reading of them (the oracle)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from helpers.stores.core import (
    default_key,
    dotted_key,
    node_dir,
    quiet,
    write_chunks,
    write_json,
    zarr_read,
    zarr_write,
)

# --------------------------------------------------------------------------- documents


def read_doc(root: Path, path: str) -> dict:
    return json.loads((node_dir(root, path) / "zarr.json").read_text())


def write_doc(root: Path, path: str, doc: dict) -> None:
    write_json(node_dir(root, path) / "zarr.json", doc, indent=2)


def patch_doc(root: Path, path: str, fn: Callable[[dict], None]) -> None:
    doc = read_doc(root, path)
    fn(doc)
    write_doc(root, path, doc)


def array_doc(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    *,
    data_type: Any,
    fill_json: Any,
    codecs: list,
    key_encoding: dict | None = None,
    attrs: dict | None = None,
    extra: dict | None = None,
    omit: tuple[str, ...] = (),
) -> dict:
    """An array's ``zarr.json`` (regular grid); ``extra`` adds fields, ``omit`` drops some."""
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": key_encoding
        or {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_json,
        "codecs": codecs,
        "attributes": attrs or {},
        **(extra or {}),
    }
    for key in omit:
        doc.pop(key, None)
    return doc


def chunk_key_function(key_encoding: dict) -> Callable[[tuple[int, ...]], str]:
    """The store key of a chunk index under a ``chunk_key_encoding`` object."""
    name = key_encoding["name"]
    sep = key_encoding.get("configuration", {}).get("separator", "/" if name == "default" else ".")
    if name == "default":
        return lambda idx: default_key(idx, sep)
    return lambda idx: dotted_key(idx, sep)


# --------------------------------------------------------------------------- arrays by hand


def encode_chunk(chunk: np.ndarray, codecs: list) -> bytes:
    """A chunk through a chain of ``bytes`` (either endian), ``gzip`` and ``crc32c``."""
    raw = b""
    for c in codecs:
        name = c if isinstance(c, str) else c["name"]
        config = {} if isinstance(c, str) else c.get("configuration") or {}
        if name == "bytes":
            order = ">" if config.get("endian") == "big" else "<"
            raw = np.ascontiguousarray(chunk.astype(chunk.dtype.newbyteorder(order))).tobytes()
        elif name == "gzip":
            raw = gzip.compress(raw, compresslevel=config["level"])
        elif name == "crc32c":
            raw += crc32c(raw)
        else:
            raise ValueError(f"no hand-written encoder for codec {name!r}")
    return raw


def write_v3_array(
    root: Path,
    path: str,
    data: np.ndarray,
    doc: dict,
    *,
    fill: Any,
    present: Callable[[tuple], bool] | None = None,
) -> np.ndarray:
    """``doc`` as the array's zarr.json and every chunk where ``present(idx)``, encoded by
    the document's codecs; returns the oracle (``data``, ``fill`` where a chunk is absent)."""
    write_doc(root, path, doc)
    chunks = doc["chunk_grid"]["configuration"]["chunk_shape"]
    key = chunk_key_function(doc["chunk_key_encoding"])

    def encode(chunk: np.ndarray) -> bytes:
        return encode_chunk(chunk, doc["codecs"])

    return write_chunks(root / path, data, tuple(chunks), fill, key, encode, present)


# --------------------------------------------------------------------------- zarr-python


def open_v3_group(root: Path, path: str = "", attrs: dict | None = None) -> None:
    """A new group (``mode="w"``) written by zarr-python."""
    with quiet():
        zarr.open_group(str(root), path=path, mode="w", zarr_format=3, attributes=attrs or {})


def zarr_v3_array(root: Path, path: str, data: np.ndarray | None, region: Any = "all", **create):
    """``zarr.create_array(root, name=path, zarr_format=3, **create)``, then ``data[region]``
    written (see ``zarr_write``)."""
    return zarr_write(root, data, region, name=path, zarr_format=3, **create)


def bytes_codec_endian(codecs: list) -> str | None:
    """The ``endian`` of the array-to-bytes codec (inside sharding: of the inner chunks)."""
    for c in codecs:
        name = c if isinstance(c, str) else c["name"]
        config = {} if isinstance(c, str) else c.get("configuration") or {}
        if name == "bytes":
            return config.get("endian")
        if name == "sharding_indexed":
            return bytes_codec_endian(config["codecs"])
    return None


def file_dtype(np_dtype: np.dtype, codecs: list) -> np.dtype:
    """zarr-python's in-memory dtype in the byte order the stored elements use."""
    np_dtype = np.dtype(np_dtype)
    endian = bytes_codec_endian(codecs)
    if np_dtype.fields is not None or np_dtype.byteorder == "|" or endian is None:
        return np_dtype
    return np_dtype.newbyteorder({"little": "<", "big": ">"}[endian])


def file_bytes(values, dtype: np.dtype) -> bytes:
    """Values as the file of an array shows them: C order, in ``dtype``."""
    return np.ascontiguousarray(np.asarray(values).astype(dtype)).tobytes()


def zarr_oracle(root: Path, path: str) -> tuple[bytes, np.dtype, tuple, tuple | None, dict]:
    """(bytes, file dtype, chunks, shards, document) as zarr-python reads ``path``."""
    with quiet():
        arr = zarr_read(root, path, 3)
        values = arr[...]
        doc = read_doc(root, path)
        dt = file_dtype(arr.dtype, doc["codecs"])
        shards = arr.shards
        return file_bytes(values, dt), dt, tuple(arr.chunks), tuple(shards) if shards else None, doc


# --------------------------------------------------------------------------- shards


def crc32c(raw: bytes) -> bytes:
    """The 4 bytes the ``crc32c`` codec appends."""
    import google_crc32c

    return google_crc32c.value(raw).to_bytes(4, "little")


def shard_index(raw: bytes, n: int, location: str = "end") -> np.ndarray:
    """The ``(n, 2)`` (offset, length) index of a shard (index ``bytes`` little + crc32c)."""
    size = 16 * n + 4
    enc = raw[-size:] if location == "end" else raw[:size]
    return np.frombuffer(enc[:-4], "<u8").reshape(n, 2)


def encode_shard_index(index: np.ndarray) -> bytes:
    enc = index.astype("<u8").tobytes()
    return enc + crc32c(enc)


def relayout_shard(raw: bytes, n: int, location: str, gap: bytes = b"\xa5" * 37) -> bytes:
    """The same shard (``n`` inner chunks, index ``bytes`` little + ``crc32c``) with its
    inner chunks in reverse order, ``gap`` bytes before each, and a matching new index."""
    size = 16 * n + 4
    enc = raw[-size:] if location == "end" else raw[:size]
    assert crc32c(enc[:-4]) == enc[-4:]
    pieces = {
        i: raw[int(o) : int(o) + int(ln)]
        for i, (o, ln) in enumerate(shard_index(raw, n, location))
        if not (o == 2**64 - 1 and ln == 2**64 - 1)
    }
    new_index = np.full((n, 2), 2**64 - 1, dtype="<u8")
    body = b""
    base = size if location == "start" else 0
    for i in sorted(pieces, reverse=True):
        body += gap
        new_index[i] = (base + len(body), len(pieces[i]))
        body += pieces[i]
    body += gap
    idx = encode_shard_index(new_index)
    return idx + body if location == "start" else body + idx
