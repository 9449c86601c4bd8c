"""The Zarr v3 editor's drafts: entry point ``zarr.json``, ``meta/...`` documents, ``data/...``.

Two layouts exist: the May 2022 draft (``meta/foo.array.json``, ``data/foo/c0/0``, a
``codecs`` list) and earlier ones written by zarrita and zarr-python 2.12-2.18
(``meta/root/foo.array.json``, ``data/root/foo/c0/0``, a single ``compressor``).
Documents are normalised to the final v3 codec list so one pipeline reads all of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarrmount.format.dtypes import parse_v2_dtype, parse_v3_dtype, with_byte_order
from zarrmount.format.fill import decode_v3_fill
from zarrmount.format.jsondoc import load_json
from zarrmount.format.model import ArrayMeta, ChunkKeyEncoding, GroupNode, MetadataError
from zarrmount.format.v3 import int_list

# zarrita and zarr-python 2.x wrote the first; the May 2022 text says the second.
PROTOCOLS = ("https://purl.org/zarr/spec/protocol/core/3.0", "https://purl.org/zarr/spec/core/3.0")
_ARRAY_FIELDS = {
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_memory_layout",
    "fill_value",
    "extensions",
    "attributes",
    "codecs",
    "compressor",
    "storage_transformers",
}
_GROUP_FIELDS = {"extensions", "attributes"}
# Codec URIs name the codec in their path: .../codecs/gzip/1.0 or .../codec/gzip/1.0.
_BYTES_CODECS = {"gzip": "gzip", "zstd": "zstd", "blosc": "blosc", "crc32c": "crc32c"}


def parse_entry_point(raw: bytes) -> str:
    """Validate the root ``zarr.json`` of a draft hierarchy; returns the metadata key suffix."""
    doc = load_json(raw, "zarr.json")
    if not isinstance(doc, dict) or doc.get("zarr_format") not in PROTOCOLS:
        raise MetadataError("zarr.json is not a v3 draft entry point")
    check_extension_list(doc.get("extensions", []), "zarr.json")
    encoding = doc.get("metadata_encoding")
    nested = encoding.get("metadata_key_suffix") if isinstance(encoding, dict) else None
    suffix = doc.get("metadata_key_suffix", nested or ".json")
    if not isinstance(suffix, str):
        raise MetadataError("zarr.json metadata_key_suffix is not a string")
    return suffix


def is_entry_point(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("zarr_format"), str)


def check_extension_list(extensions: Any, what: str) -> None:
    if not isinstance(extensions, list):
        raise MetadataError(f"{what} extensions is not a list")
    for ext in extensions:
        if isinstance(ext, dict) and ext.get("must_understand") is False:
            continue
        name = ext.get("extension", ext) if isinstance(ext, dict) else ext
        raise MetadataError(f"{what} needs extension {name!r}, which is not supported")


def _document(raw: bytes, what: str, fields: set[str]) -> dict[str, Any]:
    doc = load_json(raw, what)
    if not isinstance(doc, dict):
        raise MetadataError(f"{what} is not a JSON object")
    unknown = set(doc) - fields
    if unknown:
        raise MetadataError(f"{what} has unknown fields {sorted(unknown)}")
    check_extension_list(doc.get("extensions", []), what)
    if not isinstance(doc.get("attributes", {}), dict):
        raise MetadataError(f"{what} attributes is not a JSON object")
    return doc


def parse_group(path: str, raw: bytes | None) -> GroupNode:
    if raw is None:
        return GroupNode(path, 3, {}, implicit=True)
    doc = _document(raw, "group document", _GROUP_FIELDS)
    return GroupNode(path, 3, doc.get("attributes", {}))


def _codec_name(uri: Any) -> str:
    if not isinstance(uri, str):
        raise MetadataError(f"codec {uri!r} is not a URI")
    parts = [p for p in uri.split("/") if p]
    return parts[-2] if len(parts) >= 2 else uri


def _data_type(value: Any) -> np.dtype:
    if isinstance(value, dict):
        fallback = value.get("fallback")
        for candidate in fallback if isinstance(fallback, list) else [fallback]:
            if isinstance(candidate, str):
                return _data_type(candidate)
        raise MetadataError(f"extension data type {value.get('type')!r} is not supported")
    try:
        return parse_v3_dtype(value)
    except MetadataError:
        dtype = parse_v2_dtype(value)  # "<f8", "u1", ... as the drafts write them
        if dtype.kind not in "biufcmM" or dtype.fields is not None:
            raise
        return dtype


def _codecs(doc: dict[str, Any], ndim: int, dtype: np.dtype) -> tuple[list[dict], str | None]:
    """The normalised v3 codec list and the byte order it stores elements in."""
    endian = None
    if dtype.byteorder in "<>":
        endian = "little" if dtype.byteorder == "<" else "big"
    compressors: list[dict[str, Any]] = []
    sources = list(doc.get("codecs") or [])
    if doc.get("compressor"):
        sources.append(doc["compressor"])
    for codec in sources:
        if not isinstance(codec, dict):
            raise MetadataError(f"codec {codec!r} is not an object")
        name = _codec_name(codec.get("type", codec.get("codec")))
        config = dict(codec.get("configuration") or {})
        if name == "endian":
            endian = config.get("endian", endian)
        elif name in _BYTES_CODECS:
            compressors.append({"name": _BYTES_CODECS[name], "configuration": config})
        else:
            compressors.append({"name": f"numcodecs.{name}", "configuration": config})
    layout = doc.get("chunk_memory_layout", "C")
    if layout not in ("C", "F"):
        raise MetadataError(f"chunk_memory_layout {layout!r} is not supported")
    chain: list[dict[str, Any]] = []
    if layout == "F" and ndim > 1:
        chain.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    chain.append({"name": "bytes", "configuration": {"endian": endian or "little"}})
    return chain + compressors, endian


def parse_array(raw: bytes, label: str) -> ArrayMeta:
    """Describe the array an ``.array.json`` draft document defines."""
    doc = _document(raw, "array document", _ARRAY_FIELDS)
    if doc.get("storage_transformers"):
        raise MetadataError("storage transformers are not supported")
    shape = int_list(doc.get("shape"), "shape")
    grid = doc.get("chunk_grid")
    if not isinstance(grid, dict) or grid.get("type") != "regular":
        raise MetadataError(f"unsupported chunk grid {grid!r}")
    chunks = int_list(grid.get("chunk_shape"), "chunk_shape", positive=True)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunk_shape {list(chunks)} does not match shape {list(shape)}")
    separator = grid.get("separator", "/")
    if separator not in ("/", "."):
        raise MetadataError(f"chunk separator {separator!r} is not '/' or '.'")
    base = _data_type(doc.get("data_type"))
    codecs, endian = _codecs(doc, len(shape), base)
    dtype = with_byte_order(base, endian)
    fill_json = doc.get("fill_value")
    return ArrayMeta(
        zarr_format=3,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        order="C",
        fill_value=decode_v3_fill(fill_json, dtype),
        fill_json=fill_json,
        codecs={"codecs": codecs},
        key_encoding=ChunkKeyEncoding(separator=separator, prefix="c", scalar="c"),
        attributes=doc.get("attributes", {}),
        format_label=label,
    )
