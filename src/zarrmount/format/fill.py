"""Fill values: from their JSON encodings to a 0-d array of the array's dtype."""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from zarrmount.format.model import MetadataError

_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float(value: Any) -> float:
    if isinstance(value, str):
        if value in _FLOAT_WORDS:
            return _FLOAT_WORDS[value]
        raise MetadataError(f"bad floating point fill value {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetadataError(f"bad floating point fill value {value!r}")
    return float(value)


def _from_bytes(raw: bytes, dtype: np.dtype) -> np.ndarray:
    if len(raw) != dtype.itemsize:
        raise MetadataError(f"fill value has {len(raw)} bytes, dtype needs {dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype).reshape(())


def _legacy_zero(value: Any) -> bool:
    """Old writers stored ``0`` as the fill value of bytes and strings: zeros."""
    return value == 0 and not isinstance(value, str)


def _bytes_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if _legacy_zero(value):
        return np.zeros((), dtype=dtype)
    if not isinstance(value, str):
        raise MetadataError(f"fill value {value!r} is not base64 text")
    raw = base64.b64decode(value, validate=True)
    return np.array(raw, dtype=dtype) if dtype.kind == "S" else _from_bytes(raw, dtype)


def _text_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if _legacy_zero(value):
        return np.zeros((), dtype=dtype)
    if not isinstance(value, str):
        raise MetadataError(f"fill value {value!r} is not text")
    return np.array(value, dtype=dtype)


def _complex_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, list) and len(value) == 2:
        return np.array(complex(_float(value[0]), _float(value[1])), dtype=dtype)
    return np.array(_float(value), dtype=dtype)


def _time_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if value == "NaT":
        return np.array("NaT", dtype=dtype)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(f"bad datetime fill value {value!r}")
    return np.array(value, dtype=np.int64).view(dtype.newbyteorder("=")).astype(dtype)


def _bool_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if not isinstance(value, bool | int):
        raise MetadataError(f"bad boolean fill value {value!r}")
    return np.array(bool(value), dtype=dtype)


def _int_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(f"bad integer fill value {value!r}")
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise MetadataError(f"fill value {value} is out of range for {dtype}")
    return np.array(value, dtype=dtype)


# How each kind of dtype writes its v2 fill value (structured dtypes are kind "V").
_V2_FILLS = {
    "S": _bytes_fill,
    "V": _bytes_fill,
    "U": _text_fill,
    "f": lambda value, dtype: np.array(_float(value), dtype=dtype),
    "c": _complex_fill,
    "m": _time_fill,
    "M": _time_fill,
    "b": _bool_fill,
    "i": _int_fill,
    "u": _int_fill,
}


def decode_v2_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    """Decode a v2 ``fill_value``; ``null`` (and legacy ``0`` for bytes/strings) reads as zeros."""
    if value is None:
        return np.zeros((), dtype=dtype)
    decode = _V2_FILLS.get(dtype.kind)
    if decode is None:
        raise MetadataError(f"no fill value encoding for dtype {dtype}")
    try:
        return decode(value, dtype)
    except (binascii.Error, ValueError, TypeError, OverflowError) as e:
        raise MetadataError(f"bad fill value {value!r} for {dtype}: {e}") from e


def _hex_bits(text: str, dtype: np.dtype) -> np.ndarray:
    """``"0x7fc00000"``: the element's bit pattern, most significant byte first."""
    try:
        raw = int(text, 16 if text.startswith("0x") else 2).to_bytes(dtype.itemsize, "big")
    except (ValueError, OverflowError) as e:
        raise MetadataError(f"bad bit-pattern fill value {text!r} for {dtype}") from e
    return np.frombuffer(raw, dtype=dtype.newbyteorder(">")).astype(dtype).reshape(())


def _v3_float(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, str) and value.startswith(("0x", "0b")):
        return _hex_bits(value, dtype)
    if value == "+Infinity":
        value = "Infinity"
    return np.array(_float(value), dtype=dtype)


def decode_v3_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    """Decode a v3 ``fill_value`` (final spec, drafts and zarr-python's extensions)."""
    if value is None:
        return np.zeros((), dtype=dtype)
    kind = dtype.kind
    try:
        if kind == "f":
            return _v3_float(value, dtype)
        if kind == "c":
            if isinstance(value, str) and value.startswith(("0x", "0b")):
                return _hex_bits(value, dtype)
            if not (isinstance(value, list) and len(value) == 2):
                raise MetadataError(f"complex fill value {value!r} is not a [real, imag] pair")
            part = np.dtype(f"{dtype.byteorder}f{dtype.itemsize // 2}")
            re, im = (_v3_float(v, part).item() for v in value)
            return np.array(complex(re, im), dtype=dtype)
        if kind == "V" and dtype.fields is None and isinstance(value, list):
            if not all(isinstance(b, int) and 0 <= b < 256 for b in value):
                raise MetadataError(f"raw fill value {value!r} is not a list of bytes")
            return _from_bytes(bytes(value), dtype)
        if kind in "iu" and isinstance(value, str) and value.startswith(("0x", "0b")):
            return _hex_bits(value, dtype)
        if (kind in "SV" or dtype.fields is not None) and value == "":
            return np.zeros((), dtype=dtype)
    except (binascii.Error, ValueError, TypeError, OverflowError) as e:
        raise MetadataError(f"bad fill value {value!r} for {dtype}: {e}") from e
    return decode_v2_fill(value, dtype)
