"""Zarr v2 data type strings and descr lists to NumPy dtypes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from zarrmount.format.model import MetadataError


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
    """The dtype of a ``.zarray`` ``dtype`` field; object dtypes have no raw form."""
    try:
        dtype = np.dtype(_to_descr(value))
    except (TypeError, ValueError) as e:
        raise MetadataError(f"unsupported dtype {json.dumps(value)}: {e}") from e
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
