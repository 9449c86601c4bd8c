"""Arrays of variable-length strings or bytes (v2 ``|O`` with a vlen filter, v3 ``string``
and ``variable_length_bytes``): no raw form, so they are shown as text (``NAME.txt``)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from zarrmount.format.model import MetadataError

OBJECT = np.dtype(object)
# the codec that turns a chunk of such elements into bytes -> what its elements are
ELEMENT_CODECS = {"vlen-utf8": "utf8", "vlen-bytes": "bytes"}
# v3 data type names of such arrays -> what their elements are
V3_TYPES = {
    "string": "utf8",
    "vlen-utf8": "utf8",
    "variable_length_bytes": "bytes",
    "bytes": "bytes",
    "vlen-bytes": "bytes",
}


def v2_elements(filters: list[dict[str, Any]] | None) -> str:
    """What the elements of a v2 ``|O`` array are, by its object codec (the first filter)."""
    name = filters[0]["id"] if filters else None
    if name not in ELEMENT_CODECS:
        raise MetadataError(
            f"object array with object codec {name!r}: only vlen-utf8 and vlen-bytes are shown"
        )
    return ELEMENT_CODECS[name]


def string_fill(value: Any, elements: str) -> np.ndarray:
    """The fill value of a string array as a 0-d object array (``""`` or ``b""`` if null)."""
    if value is None or value == 0:  # zarr-python 2 wrote 0 for object arrays
        value = "" if elements == "utf8" else b""
    elif not isinstance(value, str):
        raise MetadataError(f"bad fill value {value!r} for an array of {elements} strings")
    elif elements == "bytes":
        try:
            value = base64.b64decode(value, validate=True)
        except binascii.Error as e:
            raise MetadataError(f"bad base64 fill value {value!r}: {e}") from e
    fill = np.empty((), dtype=OBJECT)
    fill[()] = value
    return fill
