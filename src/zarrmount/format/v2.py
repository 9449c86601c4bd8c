"""Zarr v2 metadata documents (``.zarray``, ``.zgroup``, ``.zattrs``)."""

from __future__ import annotations

from typing import Any

from zarrmount.format.dtypes import parse_v2_dtype
from zarrmount.format.fill import decode_v2_fill
from zarrmount.format.jsondoc import load_json
from zarrmount.format.model import ArrayMeta, ChunkKeyEncoding, MetadataError
from zarrmount.format.strings import OBJECT, string_fill, v2_elements

ZARRAY = ".zarray"
ZGROUP = ".zgroup"
ZATTRS = ".zattrs"


def parse_attributes(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {}
    attrs = load_json(raw, ZATTRS)
    if not isinstance(attrs, dict):
        raise MetadataError(f"{ZATTRS} is not a JSON object")
    return attrs


def parse_group(raw: bytes) -> None:
    doc = load_json(raw, ZGROUP)
    if not isinstance(doc, dict) or doc.get("zarr_format") != 2:
        raise MetadataError(f"{ZGROUP} does not say zarr_format 2")


def _int_tuple(doc: dict[str, Any], name: str) -> tuple[int, ...]:
    value = doc.get(name)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise MetadataError(f"{ZARRAY} field {name!r} is not a list of non-negative integers")
    return tuple(value)


def _codec_config(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise MetadataError(f"{ZARRAY} {what} is not a codec configuration with an 'id'")
    return value


def parse_array(raw: bytes, attributes: dict[str, Any]) -> ArrayMeta:
    """Validate a ``.zarray`` document and describe the array it defines."""
    doc = load_json(raw, ZARRAY)
    if not isinstance(doc, dict):
        raise MetadataError(f"{ZARRAY} is not a JSON object")
    if doc.get("zarr_format") != 2:
        raise MetadataError(f"{ZARRAY} does not say zarr_format 2")
    shape = _int_tuple(doc, "shape")
    chunks = _int_tuple(doc, "chunks")
    if len(chunks) != len(shape):
        raise MetadataError(f"{ZARRAY} chunks {list(chunks)} do not match shape {list(shape)}")
    if any(c == 0 for c in chunks):
        raise MetadataError(f"{ZARRAY} chunks {list(chunks)} has a zero length")
    order = doc.get("order", "C")
    if order not in ("C", "F"):
        raise MetadataError(f"{ZARRAY} order {order!r} is neither 'C' nor 'F'")
    separator = doc.get("dimension_separator") or "."
    if separator not in (".", "/"):
        raise MetadataError(f"{ZARRAY} dimension_separator {separator!r} is not '.' or '/'")
    dtype = parse_v2_dtype(doc.get("dtype"))
    fill_json = doc.get("fill_value")
    filters = doc.get("filters")
    if filters is not None and not isinstance(filters, list):
        raise MetadataError(f"{ZARRAY} filters is neither a list nor null")
    codecs = {
        "filters": [_codec_config(f, "filter") for f in filters] if filters else None,
        "compressor": _codec_config(doc.get("compressor"), "compressor"),
    }
    strings = v2_elements(codecs["filters"]) if dtype == OBJECT else None
    return ArrayMeta(
        zarr_format=2,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        order=order,
        fill_value=string_fill(fill_json, strings) if strings else decode_v2_fill(fill_json, dtype),
        fill_json=fill_json,
        codecs=codecs,
        key_encoding=ChunkKeyEncoding(separator=separator),
        attributes=attributes,
        strings=strings,
    )
