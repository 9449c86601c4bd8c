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


def decode_v2_fill(value: Any, dtype: np.dtype) -> np.ndarray:
    """Decode a v2 ``fill_value``; ``null`` (and legacy ``0`` for bytes/strings) reads as zeros."""
    zero = np.zeros((), dtype=dtype)
    if value is None:
        return zero
    kind = dtype.kind
    try:
        if kind in "SV" or dtype.fields is not None:
            if value == 0 and not isinstance(value, str):
                return zero
            if not isinstance(value, str):
                raise MetadataError(f"fill value {value!r} is not base64 text")
            raw = base64.b64decode(value, validate=True)
            if kind == "S":
                return np.array(raw, dtype=dtype)
            return _from_bytes(raw, dtype)
        if kind == "U":
            if value == 0 and not isinstance(value, str):
                return zero
            if not isinstance(value, str):
                raise MetadataError(f"fill value {value!r} is not text")
            return np.array(value, dtype=dtype)
        if kind == "f":
            return np.array(_float(value), dtype=dtype)
        if kind == "c":
            if isinstance(value, list) and len(value) == 2:
                return np.array(complex(_float(value[0]), _float(value[1])), dtype=dtype)
            return np.array(_float(value), dtype=dtype)
        if kind in "mM":
            if value == "NaT":
                return np.array("NaT", dtype=dtype)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MetadataError(f"bad datetime fill value {value!r}")
            native = np.array(value, dtype=np.int64).view(dtype.newbyteorder("="))
            return native.astype(dtype)
        if kind == "b":
            if not isinstance(value, bool | int):
                raise MetadataError(f"bad boolean fill value {value!r}")
            return np.array(bool(value), dtype=dtype)
        if kind in "iu":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MetadataError(f"bad integer fill value {value!r}")
            info = np.iinfo(dtype)
            if not info.min <= value <= info.max:
                raise MetadataError(f"fill value {value} is out of range for {dtype}")
            return np.array(value, dtype=dtype)
    except (binascii.Error, ValueError, TypeError, OverflowError) as e:
        raise MetadataError(f"bad fill value {value!r} for {dtype}: {e}") from e
    raise MetadataError(f"no fill value encoding for dtype {dtype}")
