"""The elements of a text file of an array of strings, by the rules the README states
(one element per line; ``\\\\``, ``\\n``, ``\\r`` and ``\\xHH`` escaped): written here from
the README, not from the daemon's code."""

from __future__ import annotations

import re

_ESCAPE = re.compile(rb"\\(\\|n|r|x[0-9A-Fa-f]{2})")
_PLAIN = {b"\\": b"\\", b"n": b"\n", b"r": b"\r"}


def unescape(line: bytes) -> bytes:
    """An element's bytes from its line."""
    return _ESCAPE.sub(lambda m: _PLAIN.get(m.group(1)) or bytes([int(m.group(1)[1:], 16)]), line)


def escape(element: str) -> bytes:
    """The line of a string element (newline included)."""
    line = element.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return line.encode() + b"\n"
