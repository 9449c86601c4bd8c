"""How the text of an option's value becomes a value, and the error that names it."""

from __future__ import annotations

import json
from typing import Any

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class OptionError(ValueError):
    """An option is unknown or its value is malformed; the message names it."""


def parse_size(text: str) -> int:
    """``512M`` -> bytes; suffixes K, M, G, T (powers of 1024), optional trailing ``B``."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, suffix = (t[:-1], t[-1]) if t and t[-1] in _SUFFIXES else (t, "")
    try:
        value = float(num)
    except ValueError:
        raise OptionError(f"bad size {text!r}") from None
    if value < 0:
        raise OptionError(f"bad size {text!r}")
    return int(value * _SUFFIXES[suffix])


def json_object(text: str, what: str) -> dict[str, Any]:
    """``text``, a JSON object (fsspec storage options with nested values or commas)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise OptionError(f"{what} is not a JSON object")
    return value
