"""Zarr v2 data type strings and descr lists to NumPy dtypes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from zarrmount.format.model import MetadataError
from zarrmount.format.strings import OBJECT, V3_TYPES


def _to_descr(value: Any) -> Any:
    """JSON lists of fields become the tuples NumPy expects, recursively."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        fields = []
        for f in value:
            if not isinstance(f, list) or len(f) not in (2, 3) or not isinstance(f[0], str):
                raise MetadataError(f"bad structured dtype field {f!r}")
            name, sub = f[0], _to_descr(f[1])
            fields.append((name, sub, tuple(f[2])) if len(f) == 3 else (name, sub))
        return fields
    raise MetadataError(f"bad dtype {value!r}")


def parse_v2_dtype(value: Any) -> np.dtype:
    """The dtype of a ``.zarray`` ``dtype`` field: ``|O`` is kept (strings, shown as text);
    other dtypes holding objects have no form we can show."""
    try:
        dtype = np.dtype(_to_descr(value))
    except (TypeError, ValueError) as e:
        raise MetadataError(f"unsupported dtype {json.dumps(value)}: {e}") from e
    if dtype == np.dtype(object):
        return dtype  # an array of variable-length elements: its object codec says which
    if dtype.hasobject:
        raise MetadataError(
            f"dtype {json.dumps(value)} holds Python objects (variable-length data) "
            "and has no raw binary form"
        )
    return dtype


def dtype_label(dtype: np.dtype) -> str:
    """The ``user.zarr.dtype`` text: ``dtype.str``, or a JSON descr list when structured."""
    if dtype.fields is not None:
        return json.dumps(dtype.descr)
    return dtype.str


_V3_CORE = {
    "bool": "|b1",
    "int8": "|i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "|u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "complex64": "<c8",
    "complex128": "<c16",
}
_V3_SIZED = {"fixed_length_utf32": "<U", "null_terminated_bytes": "|S", "raw_bytes": "|V"}
_V3_TIME = {"numpy.datetime64": "M8", "numpy.timedelta64": "m8"}


def _raw_bits(name: str) -> np.dtype | None:
    if name.startswith("r") and name[1:].isdigit():
        bits = int(name[1:])
        if bits == 0 or bits % 8:
            raise MetadataError(f"raw data type {name!r} is not a whole number of bytes")
        return np.dtype(f"V{bits // 8}")
    return None


def parse_v3_dtype(value: Any) -> np.dtype:
    """A v3 ``data_type`` (core names, ``r*``, zarr-python's fixed-size extensions)."""
    if isinstance(value, str):
        if value in _V3_CORE:
            return np.dtype(_V3_CORE[value])
        raw = _raw_bits(value)
        if raw is not None:
            return raw
        if value in V3_TYPES:
            return OBJECT
        raise MetadataError(f"unsupported data type {value!r}")
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        name, config = value["name"], value.get("configuration") or {}
        if name in _V3_SIZED:
            length = config.get("length_bytes")
            if not isinstance(length, int) or length <= 0:
                raise MetadataError(f"data type {name!r} needs a positive length_bytes")
            code = _V3_SIZED[name]
            return np.dtype(f"{code}{length // 4 if code == '<U' else length}")
        if name in _V3_TIME:
            unit, scale = config.get("unit"), config.get("scale_factor", 1)
            if scale != 1:
                raise MetadataError(f"data type {name!r} with scale_factor {scale} is unsupported")
            try:
                return np.dtype(f"<{_V3_TIME[name]}[{unit}]")
            except TypeError as e:
                raise MetadataError(f"data type {name!r}: bad unit {unit!r}") from e
        if name == "structured":
            fields = config.get("fields")
            if not isinstance(fields, list):
                raise MetadataError("structured data type without a fields list")
            try:
                return np.dtype([(f[0], parse_v3_dtype(f[1])) for f in fields])
            except (TypeError, IndexError) as e:
                raise MetadataError(f"bad structured data type fields {fields!r}") from e
        if name in V3_TYPES:
            return OBJECT
        raise MetadataError(f"unsupported data type {name!r}")
    raise MetadataError(f"bad data type {value!r}")


def with_byte_order(dtype: np.dtype, endian: str | None) -> np.dtype:
    """``dtype`` stored ``little`` or ``big`` endian (structured fields each)."""
    if endian is None or dtype.itemsize == 1 and dtype.fields is None:
        return dtype
    order = {"little": "<", "big": ">"}.get(endian)
    if order is None:
        raise MetadataError(f"bad endian {endian!r}")
    return dtype.newbyteorder(order)
