"""Which node names can become a single, safe path component of the mount."""

from __future__ import annotations

import unicodedata

_MAX_NAME_BYTES = 255


def is_safe_name(name: str) -> bool:
    """True for names usable as one path component: valid UTF-8 (no lone surrogates, which
    is how Python shows undecodable bytes), at most 255 bytes, no ``/``, no control
    characters (C0, DEL and C1, NUL included), not ``.``/``..``."""
    if name in ("", ".", ".."):
        return False
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if len(encoded) > _MAX_NAME_BYTES:
        return False
    return not any(c == "/" or unicodedata.category(c) == "Cc" for c in name)
