"""Which node names can become a single, safe path component of the mount."""

from __future__ import annotations

_MAX_NAME_BYTES = 255


def is_safe_name(name: str) -> bool:
    """True for names usable as one path component (no ``/``, NUL, control chars, ``.``/``..``)."""
    if name in ("", ".", ".."):
        return False
    if len(name.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES:
        return False
    return not any(c == "/" or ord(c) < 0x20 or c == "\x7f" for c in name)
