"""A TIFF header whose pixel data is the array's own bytes.

``NAME.tif`` is ``tiff_header(shape, dtype)`` followed by the array's C-order bytes,
untouched: the header alone says where each page's single strip lies, so any TIFF
reader opens the array without a byte of it being copied or reordered.

Layout of the header (``H``)::

    [16 bytes: byte-order mark, version, offset of IFD 0 (+ shared resolution, classic)]
    [IFD 0][IFD 1]...[IFD n-1]   every IFD the same size, all values inline
    [zeros up to a multiple of 16: the data starts aligned for every element size]

Page ``i``'s strip lies at ``len(H) + i * page_bytes``. Since the IFDs differ only in
their strip offset and next-IFD offset, any byte range of ``H`` is computed without
building the rest (``tiff_header_range``).

Shape convention: a 1-D array is one row (ImageLength 1), a 2-D array one image, a
3-D array one page per leading index. So readers see a 1-D array as ``(1, n)`` and
tifffile, which drops a series' single page, a 3-D array with one page as ``(h, w)``.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

import numpy as np

from zarrmount.headers.base import NotApplicable

#: Headers are made on demand; beyond this many bytes we refuse (about 385,000 classic
#: pages of 174 bytes, or 226,000 BigTIFF pages of 296 bytes).
MAX_HEADER_BYTES = 64 << 20

_FIRST_IFD = 16  # both headers are 16 bytes: classic's 8 plus the shared resolution
_ALIGN = 16  # a multiple of every element size: the data starts aligned
_MAX_LONG = 2**32 - 1

# TIFF field types and their struct formats.
_SHORT, _LONG, _RATIONAL, _LONG8 = 3, 4, 5, 16
_FORMATS = {_SHORT: "H", _LONG: "I", _RATIONAL: "II", _LONG8: "Q"}

# SampleFormat by NumPy kind; bool is stored as bytes 0/1, so it is shown as uint8.
_SAMPLE_FORMAT = {"u": 1, "b": 1, "i": 2, "f": 3}
_ITEMSIZES = {"u": (1, 2, 4, 8), "b": (1,), "i": (1, 2, 4, 8), "f": (2, 4, 8)}

_TAGS = 14  # the number of entries _entries makes


@dataclass(frozen=True)
class _Layout:
    """What a header is computed from: its byte order, kind and page geometry."""

    order: str  # "<" or ">"
    big: bool
    pages: int
    length: int
    width: int
    itemsize: int
    sample_format: int

    @property
    def ifd_size(self) -> int:
        return 8 + 20 * _TAGS + 8 if self.big else 2 + 12 * _TAGS + 4

    @property
    def ifds_end(self) -> int:
        return _FIRST_IFD + self.pages * self.ifd_size

    @property
    def size(self) -> int:
        return -(-self.ifds_end // _ALIGN) * _ALIGN

    @property
    def page_bytes(self) -> int:
        return self.length * self.width * self.itemsize


def _pages_and_plane(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(pages, ImageLength, ImageWidth) of ``shape``."""
    if len(shape) == 1:
        return 1, 1, shape[0]
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    if len(shape) == 3:
        return shape
    raise NotApplicable(f"TIFF shows 1-D, 2-D and 3-D arrays, not {len(shape)}-D")


def _layout(shape: tuple[int, ...], dtype: np.dtype, force_bigtiff: bool) -> _Layout:
    """Check that a TIFF can show the array, and choose classic TIFF or BigTIFF."""
    dtype = np.dtype(dtype)
    pages, length, width = _pages_and_plane(tuple(shape))
    if dtype.itemsize not in _ITEMSIZES.get(dtype.kind, ()) or dtype.fields or dtype.subdtype:
        raise NotApplicable(f"TIFF has no sample format for {dtype}")
    if not math.prod(shape):
        raise NotApplicable("an empty array has no TIFF image")
    if max(length, width) > _MAX_LONG:
        raise NotApplicable("TIFF images are at most 2**32 - 1 pixels wide and long")
    order = ">" if dtype.str[0] == ">" else "<"  # single-byte types ("|") as "II"
    sample_format = _SAMPLE_FORMAT[dtype.kind]
    lay = _Layout(order, force_bigtiff, pages, length, width, dtype.itemsize, sample_format)
    # Classic TIFF while every offset fits in 32 bits: while the whole file does.
    if not lay.big and lay.size + pages * lay.page_bytes > _MAX_LONG:
        lay = replace(lay, big=True)
    if lay.size > MAX_HEADER_BYTES:
        raise NotApplicable(f"a TIFF header for {pages} pages would exceed {MAX_HEADER_BYTES} B")
    return lay


def _entry(lay: _Layout, tag: int, kind: int, *values: int) -> bytes:
    """One IFD entry of count 1, its value inline (left-justified in the value field)."""
    field = 8 if lay.big else 4
    value = struct.pack(lay.order + _FORMATS[kind], *values)
    if len(value) > field:
        # Only classic TIFF's RATIONAL resolution does not fit: it is stored once, at 8.
        value = struct.pack(lay.order + "I", 8)
    head = struct.pack(lay.order + ("HHQ" if lay.big else "HHI"), tag, kind, 1)
    return head + value.ljust(field, b"\0")


def _entries(lay: _Layout) -> tuple[bytes, int]:
    """The entries of every IFD, ascending by tag, with StripOffsets 0, and the
    position of StripOffsets' value within them."""
    offset = _LONG8 if lay.big else _LONG
    before = [
        _entry(lay, 256, _LONG, lay.width),  # ImageWidth
        _entry(lay, 257, _LONG, lay.length),  # ImageLength
        _entry(lay, 258, _SHORT, lay.itemsize * 8),  # BitsPerSample
        _entry(lay, 259, _SHORT, 1),  # Compression: none
        _entry(lay, 262, _SHORT, 1),  # PhotometricInterpretation: BlackIsZero
    ]
    after = [
        _entry(lay, 277, _SHORT, 1),  # SamplesPerPixel
        _entry(lay, 278, _LONG, lay.length),  # RowsPerStrip: one strip per page
        _entry(lay, 279, offset, lay.page_bytes),  # StripByteCounts
        _entry(lay, 282, _RATIONAL, 1, 1),  # XResolution (baseline requires it)
        _entry(lay, 283, _RATIONAL, 1, 1),  # YResolution
        _entry(lay, 284, _SHORT, 1),  # PlanarConfiguration: chunky
        _entry(lay, 296, _SHORT, 1),  # ResolutionUnit: none
        _entry(lay, 339, _SHORT, lay.sample_format),  # SampleFormat
    ]
    strip = _entry(lay, 273, offset, 0)  # StripOffsets
    at = sum(map(len, before)) + len(strip) - (8 if lay.big else 4)
    return b"".join([*before, strip, *after]), at


def _prefix(lay: _Layout) -> bytes:
    """The 16 bytes before IFD 0."""
    mark = b"MM" if lay.order == ">" else b"II"
    if lay.big:
        return mark + struct.pack(lay.order + "HHHQ", 43, 8, 0, _FIRST_IFD)
    return mark + struct.pack(lay.order + "HIII", 42, _FIRST_IFD, 1, 1)


def _ifds(lay: _Layout, first: int, stop: int) -> bytes:
    """IFDs ``first`` to ``stop - 1``: one template, its two offsets filled in per page."""
    count = struct.pack(lay.order + ("Q" if lay.big else "H"), _TAGS)
    entries, at = _entries(lay)
    template = count + entries + bytes(8 if lay.big else 4)
    n = stop - first
    if n <= 0:
        return b""
    buf = np.tile(np.frombuffer(template, np.uint8), n)
    kind = np.dtype(lay.order + ("u8" if lay.big else "u4"))

    def column(pos: int) -> np.ndarray:
        return np.ndarray((n,), kind, buf, pos, (lay.ifd_size,))

    pages = np.arange(first, stop, dtype=np.uint64)
    column(len(count) + at)[:] = np.uint64(lay.size) + pages * np.uint64(lay.page_bytes)
    nexts = np.uint64(_FIRST_IFD) + (pages + np.uint64(1)) * np.uint64(lay.ifd_size)
    if stop == lay.pages:
        nexts[-1] = 0  # the last IFD ends the chain
    column(lay.ifd_size - kind.itemsize)[:] = nexts
    return buf.tobytes()


def tiff_header_size(
    shape: tuple[int, ...], dtype: np.dtype, *, force_bigtiff: bool = False
) -> int:
    """``len(tiff_header(shape, dtype))``, the data offset, without making the header."""
    return _layout(shape, dtype, force_bigtiff).size


def tiff_header_range(
    shape: tuple[int, ...], dtype: np.dtype, start: int, stop: int, *, force_bigtiff: bool = False
) -> bytes:
    """Bytes ``[start, stop)`` of ``tiff_header(shape, dtype)``, making only the IFDs
    they touch (a read of a file with 100,000 pages need not make them all)."""
    lay = _layout(shape, dtype, force_bigtiff)
    start, stop = max(start, 0), min(stop, lay.size)
    if start >= stop:
        return b""
    first = min(max(start - _FIRST_IFD, 0) // lay.ifd_size, lay.pages)
    last = min(max(-(-(stop - _FIRST_IFD) // lay.ifd_size), 0), lay.pages)
    base = 0 if start < _FIRST_IFD else _FIRST_IFD + first * lay.ifd_size
    block = [_prefix(lay)] if start < _FIRST_IFD else []
    block.append(_ifds(lay, first, last))
    if last == lay.pages:
        block.append(bytes(lay.size - lay.ifds_end))
    return b"".join(block)[start - base : stop - base]


def tiff_header(shape: tuple[int, ...], dtype: np.dtype, *, force_bigtiff: bool = False) -> bytes:
    """The TIFF header ``H`` for an array: the file ``H + arr.tobytes()`` is a TIFF of it.

    BigTIFF when the file would reach 4 GiB (or ``force_bigtiff``); ``NotApplicable``
    for other than 1 to 3 dimensions, empty arrays, types TIFF has no sample format for
    (complex, strings, structured...) and headers beyond ``MAX_HEADER_BYTES``.
    """
    return tiff_header_range(shape, dtype, 0, MAX_HEADER_BYTES, force_bigtiff=force_bigtiff)
