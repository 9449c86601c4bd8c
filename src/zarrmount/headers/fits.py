"""FITS primary headers (FITS standard 4.0): astropy, DS9 and every cfitsio program read
an array as one header of 80-character cards in 2880-byte blocks, then its elements
big-endian, C order (``NAXIS1`` is the last, fastest axis), zero-padded to a whole block.

FITS has signed integers of 16, 32 and 64 bits and unsigned bytes only: the others are
stored with the standard offset ``BZERO`` (value - BZERO), which is their sign bit flipped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from zarrmount.headers.base import NotApplicable, plain_type

BLOCK = 2880
CARD = 80
_MAX_AXES = 999
# attributes written as COMMENT text: at most this many bytes of them
_COMMENT_BYTES = 64 * 1024

# (NumPy kind, item size) -> (BITPIX, BZERO or None: the sign bit flipped when there is one)
_TYPES: dict[tuple[str, int], tuple[int, int | None]] = {
    ("u", 1): (8, None),
    ("i", 1): (8, -128),
    ("i", 2): (16, None),
    ("u", 2): (16, 1 << 15),
    ("i", 4): (32, None),
    ("u", 4): (32, 1 << 31),
    ("i", 8): (64, None),
    ("u", 8): (64, 1 << 63),
    ("f", 4): (-32, None),
    ("f", 8): (-64, None),
}
# keywords the header sets itself, or that mean something to readers: never from attributes
_RESERVED = re.compile(
    r"SIMPLE|BITPIX|NAXIS\d*|EXTEND|END|BZERO|BSCALE|BUNIT|BLANK|COMMENT|HISTORY|"
    r"CONTINUE|XTENSION|GROUPS|PCOUNT|GCOUNT|CHECKSUM|DATASUM"
)
_KEYWORD = re.compile(r"[A-Z0-9_-]{1,8}")


def fits_type(dtype: np.dtype) -> tuple[int, int | None]:
    """``(BITPIX, BZERO)`` of ``dtype``; BZERO None where the bytes are the values."""
    return plain_type(_TYPES, dtype, "FITS")


def flips_sign(dtype: np.dtype) -> bool:
    """Whether the data's sign bit is flipped (a BZERO offset) on the way out."""
    return fits_type(dtype)[1] is not None


def _value(value: Any) -> str | None:
    """A fixed-format value field (columns 11-30 and on), None where FITS has no form."""
    if isinstance(value, bool):
        return f"{'T' if value else 'F':>20}"
    if isinstance(value, int):
        return f"{value:>20}" if abs(value) < 10**19 else None
    if isinstance(value, float):
        return f"{repr(value).upper():>20}" if math.isfinite(value) else None
    if isinstance(value, str) and value.isascii() and value.isprintable():
        quoted = "'" + f"{value.replace(chr(39), chr(39) * 2):<8}" + "'"
        return quoted if len(quoted) <= CARD - 10 else None
    return None


def _card(keyword: str, value: Any) -> bytes | None:
    field = _value(value)
    if field is None:
        return None
    return f"{keyword:<8}= {field}".ljust(CARD).encode("ascii")


def _comments(text: str) -> list[bytes]:
    """``COMMENT`` cards holding ``text`` (printable ASCII, the rest escaped)."""
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else " " for c in text)
    width = CARD - 8
    return [
        f"COMMENT {text[i : i + width]}".ljust(CARD).encode("ascii")
        for i in range(0, len(text) or 1, width)
    ]


def _attribute_cards(attributes: dict[str, Any]) -> list[bytes]:
    cards: list[bytes] = []
    left = _COMMENT_BYTES
    for name, value in attributes.items():
        keyword = name.upper()
        card = None
        if _KEYWORD.fullmatch(keyword) and not _RESERVED.fullmatch(keyword):
            card = _card(keyword, value)
        if card is not None:
            cards.append(card)
            continue
        text = f"{name} = {json.dumps(value, ensure_ascii=False, default=str)}"
        if len(text) > left:
            cards += _comments("(further attributes left out)")
            break
        left -= len(text)
        cards += _comments(text)
    return cards


def fits_header(shape: tuple[int, ...], dtype: np.dtype, attributes: dict[str, Any]) -> bytes:
    """The primary header of an array of ``shape`` and ``dtype``: the keywords the standard
    requires first, ``BZERO`` where the type needs it, ``BUNIT`` from ``units``, then the
    other attributes as cards where they fit, as ``COMMENT`` text where they do not."""
    bitpix, bzero = fits_type(np.dtype(dtype))
    if not shape:
        raise NotApplicable("FITS has no 0-d (scalar) arrays: NAXIS = 0 means no data")
    if len(shape) > _MAX_AXES:
        raise NotApplicable(f"FITS has at most {_MAX_AXES} axes")
    cards = [_card("SIMPLE", True), _card("BITPIX", bitpix), _card("NAXIS", len(shape))]
    cards += [_card(f"NAXIS{i + 1}", int(n)) for i, n in enumerate(reversed(shape))]
    if bzero is not None:
        cards += [_card("BSCALE", 1), _card("BZERO", bzero)]
    rest = dict(attributes)
    units = rest.pop("units", None)
    unit = _card("BUNIT", units) if isinstance(units, str) else None
    if unit is not None:
        cards.append(unit)
    elif units is not None:
        rest["units"] = units
    cards += _attribute_cards(rest)
    cards.append(b"END".ljust(CARD))
    head = b"".join(c for c in cards if c is not None)
    return head.ljust(-(-len(head) // BLOCK) * BLOCK, b" ")


def data_padding(nbytes: int) -> int:
    """Zero bytes after ``nbytes`` of data to end on a whole block."""
    return -nbytes % BLOCK
