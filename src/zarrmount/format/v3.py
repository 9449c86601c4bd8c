"""Zarr v3 (final spec) metadata: ``zarr.json`` in every node."""

from __future__ import annotations

from typing import Any

from zarrmount.format.consolidated import Members, split
from zarrmount.format.dtypes import parse_v3_dtype, with_byte_order
from zarrmount.format.fill import decode_v3_fill
from zarrmount.format.jsondoc import load_json
from zarrmount.format.model import ArrayMeta, ChunkKeyEncoding, GroupNode, MetadataError
from zarrmount.format.strings import V3_TYPES, string_fill
from zarrmount.format.windowed import Stored

ZARR_JSON = "zarr.json"
_ARRAY_FIELDS = {
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
}
_GROUP_FIELDS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}
CONSOLIDATED = ("consolidated_metadata", "metadata")  # where a group's holds the documents


def check_extensions(doc: dict[str, Any], known: set[str]) -> None:
    """Unknown fields are refused unless they say ``"must_understand": false``."""
    for name, value in doc.items():
        if name in known:
            continue
        if isinstance(value, dict) and value.get("must_understand") is False:
            continue
        raise MetadataError(f"unknown metadata field {name!r} that must be understood")


def parse_document(raw: bytes) -> dict[str, Any]:
    return _checked(load_json(raw, ZARR_JSON))


def parse_root(stored: Stored) -> tuple[dict[str, Any], Members | None]:
    """The root's document, and the documents its consolidated metadata holds, apart (as
    their JSON texts by key: see :mod:`zarrmount.format.consolidated`), or None."""
    doc, members = split(stored, ZARR_JSON, CONSOLIDATED)
    return _checked(doc), members


def _checked(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise MetadataError(f"{ZARR_JSON} is not a JSON object")
    if doc.get("zarr_format") != 3:
        raise MetadataError(f"{ZARR_JSON} does not say zarr_format 3")
    if doc.get("node_type") not in ("array", "group"):
        raise MetadataError(f"{ZARR_JSON} node_type {doc.get('node_type')!r} is not array/group")
    attrs = doc.get("attributes", {})
    if not isinstance(attrs, dict):
        raise MetadataError(f"{ZARR_JSON} attributes is not a JSON object")
    return doc


def parse_group(path: str, doc: dict[str, Any]) -> GroupNode:
    check_extensions(doc, _GROUP_FIELDS)
    return GroupNode(path, 3, doc.get("attributes", {}))


def _named(value: Any, what: str) -> tuple[str, dict[str, Any]]:
    """A ``{"name": ..., "configuration": {...}}`` object (or a bare name string)."""
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        config = value.get("configuration") or {}
        if not isinstance(config, dict):
            raise MetadataError(f"{what} configuration is not an object")
        return value["name"], config
    raise MetadataError(f"bad {what} {value!r}")


def int_list(value: Any, what: str, positive: bool = False) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= (1 if positive else 0)
        for v in value
    ):
        least = "positive" if positive else "non-negative"
        raise MetadataError(f"{what} is not a list of {least} integers")
    return tuple(value)


def _key_encoding(value: Any) -> ChunkKeyEncoding:
    name, config = _named(value or "default", "chunk_key_encoding")
    if name == "default":
        sep = config.get("separator", "/")
        encoding = ChunkKeyEncoding(separator=sep, prefix="c" + sep, scalar="c")
    elif name == "v2":
        sep = config.get("separator", ".")
        encoding = ChunkKeyEncoding(separator=sep, prefix="", scalar="0")
    else:
        raise MetadataError(f"unsupported chunk_key_encoding {name!r}")
    if sep not in ("/", "."):
        raise MetadataError(f"chunk_key_encoding separator {sep!r} is not '/' or '.'")
    return encoding


def codec_list(value: Any) -> list[dict[str, Any]]:
    """The codecs as ``[{"name", "configuration"}]``, whatever form each was written in."""
    if not isinstance(value, list) or not value:
        raise MetadataError("codecs is not a non-empty list")
    out = []
    for codec in value:
        name, config = _named(codec, "codec")
        out.append({"name": name, "configuration": config})
    return out


def bytes_endian(codecs: list[dict[str, Any]]) -> str | None:
    """The ``endian`` of the array-to-bytes codec, following sharding to its inner chunks."""
    for codec in codecs:
        name, config = codec["name"], codec["configuration"]
        if name == "bytes":
            return config.get("endian")
        if name == "sharding_indexed":
            return bytes_endian(codec_list(config.get("codecs")))
    return None


def sharding(codecs: list[dict[str, Any]], chunk_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The inner chunk shape when the chain is exactly one ``sharding_indexed`` codec.

    That is the form we read at inner-chunk granularity; any other chain that contains
    sharding is decoded a whole shard at a time.
    """
    if len(codecs) != 1 or codecs[0]["name"] != "sharding_indexed":
        return None
    inner = int_list(codecs[0]["configuration"].get("chunk_shape"), "sharding chunk_shape", True)
    if len(inner) != len(chunk_shape) or any(
        s % i for s, i in zip(chunk_shape, inner, strict=True)
    ):
        raise MetadataError(f"shard shape {list(chunk_shape)} is not a multiple of {list(inner)}")
    return inner


def _strings(data_type: Any) -> str | None:
    """What the elements of an array of variable-length ones are; None for other arrays."""
    name = data_type.get("name") if isinstance(data_type, dict) else data_type
    return V3_TYPES.get(name) if isinstance(name, str) else None


def parse_array(path: str, doc: dict[str, Any]) -> ArrayMeta:
    """Describe the array a v3 ``zarr.json`` defines; raises MetadataError if we cannot."""
    check_extensions(doc, _ARRAY_FIELDS)
    if doc.get("storage_transformers"):
        raise MetadataError("storage transformers are not supported")
    shape = int_list(doc.get("shape"), "shape")
    grid_name, grid = _named(doc.get("chunk_grid"), "chunk_grid")
    if grid_name != "regular":
        raise MetadataError(f"unsupported chunk grid {grid_name!r}")
    chunk_shape = int_list(grid.get("chunk_shape"), "chunk_shape", positive=True)
    if len(chunk_shape) != len(shape):
        raise MetadataError(f"chunk_shape {list(chunk_shape)} does not match shape {list(shape)}")
    codecs = codec_list(doc.get("codecs"))
    dtype = with_byte_order(parse_v3_dtype(doc.get("data_type")), bytes_endian(codecs))
    fill_json = doc.get("fill_value")
    inner = sharding(codecs, chunk_shape)
    names = doc.get("dimension_names")
    strings = _strings(doc.get("data_type"))
    fill = string_fill(fill_json, strings) if strings else decode_v3_fill(fill_json, dtype)
    return ArrayMeta(
        zarr_format=3,
        shape=shape,
        chunks=inner or chunk_shape,
        dtype=dtype,
        order="C",
        fill_value=fill,
        fill_json=fill_json,
        codecs={"codecs": codecs},
        key_encoding=_key_encoding(doc.get("chunk_key_encoding")),
        attributes=doc.get("attributes", {}),
        shards=chunk_shape if inner else None,
        dimension_names=tuple(names) if isinstance(names, list) else None,
        strings=strings,
    )
