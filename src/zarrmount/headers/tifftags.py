"""TIFF field types and one tag as a TIFF header carries it, for the modules that add
tags of their own to the ``.tif`` views (GeoTIFF's, GDAL's)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

# TIFF field types.
BYTE, ASCII, SHORT, LONG, RATIONAL, DOUBLE, IFD, LONG8, IFD8 = 1, 2, 3, 4, 5, 12, 13, 16, 18
FORMATS = {BYTE: "B", ASCII: "B", SHORT: "H", LONG: "I", RATIONAL: "II", DOUBLE: "d"}
FORMATS |= {IFD: "I", LONG8: "Q", IFD8: "Q"}
IMAGE_DESCRIPTION = 270
SIZES = {kind: struct.calcsize("<" + fmt) for kind, fmt in FORMATS.items()}


@dataclass(frozen=True)
class Tag:
    """One IFD entry: ``values`` are numbers (a RATIONAL's as numerator, denominator
    pairs flattened) or, for ASCII, the text's bytes with their closing NUL."""

    code: int
    kind: int
    values: tuple[int | float, ...] | bytes

    @property
    def count(self) -> int:
        n = len(self.values)
        return n // 2 if self.kind == RATIONAL else n

    def packed(self, order: str) -> bytes:
        """The value bytes in byte order ``order`` ("<" or ">")."""
        if isinstance(self.values, bytes):
            return self.values
        return struct.pack(f"{order}{len(self.values)}{FORMATS[self.kind][0]}", *self.values)


def ascii_tag(code: int, text: str) -> Tag:
    """An ASCII tag holding ``text`` (7-bit, as TIFF wants), NUL-terminated."""
    return Tag(code, ASCII, text.encode("ascii", "replace") + b"\0")
