"""TIFF headers made from metadata, for files whose pixel data is laid out after them.

Two layouts share one writer:

- **strips** (``tiff_header_range``): the array's own C-order bytes follow the header,
  untouched: one strip per page, so any TIFF reader opens the array without a byte of it
  copied or reordered. A 1-D array is one row, a 2-D array one image, a 3-D array one
  page per leading index (tifffile drops a series' single page: ``(h, w)``).
- **tiles** (``tiled_layout``): tiles as large as the array's chunks, in the order
  image, page, band, tile row, tile column; the last two dimensions are the image, the
  one before them bands (``PlanarConfiguration`` separate), the others pages; further
  images (overviews, ``NewSubfileType`` reduced) follow the first.

Layout of a header (``H``)::

    [16 bytes: byte-order mark, version, offset of IFD 0]
    [image 0's IFDs][image 1's IFDs]...   every IFD of an image the same size
    [values too large for an entry, shared by the IFDs that use them]
    [each image's block byte counts, then its block offsets, where a plane has several]
    [zeros up to a multiple of 16 (strips) or of 64 KiB (tiles, TILES_ALIGN)]

An IFD differs from the others of its image only in its block offsets (or where they
lie) and the next IFD's offset, and the arrays of offsets are arithmetic progressions,
so any byte range of ``H`` is computed without building the rest (``header_range``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrmount.headers.base import NotApplicable
from zarrmount.headers.tifftags import IFD, IFD8, LONG, LONG8, RATIONAL, SHORT, Tag

#: Headers are made on demand; beyond this many bytes we refuse (about 385,000 classic
#: pages of 174 bytes, or 226,000 BigTIFF pages of 296 bytes).
MAX_HEADER_BYTES = 64 << 20

_FIRST_IFD = 16  # 16 bytes before IFD 0 in both kinds: BigTIFF's header, classic's padded
_ALIGN = 16  # a multiple of every element size: the data starts aligned
# Tiles start past the first 64 KiB, on a page: a reader's first read of the header (GDAL
# reads 8 KiB) touches no tile, and a tile of whole pages is read by whole pages, so the
# kernel's requests never take the start of the next tile (and decode its chunk).
TILES_ALIGN = 64 << 10
_MAX_LONG = 2**32 - 1
MAX_BANDS = 65535  # SamplesPerPixel is a SHORT

# SampleFormat by NumPy kind; bool is stored as bytes 0/1, so it is shown as uint8.
_SAMPLE_FORMAT = {"u": 1, "b": 1, "i": 2, "f": 3}
_ITEMSIZES = {"u": (1, 2, 4, 8), "b": (1,), "i": (1, 2, 4, 8), "f": (2, 4, 8)}
_STRIPS, _STRIP_COUNTS, _TILES, _TILE_COUNTS, _SUBIFDS = 273, 279, 324, 325, 330
_PER_IFD = (_STRIPS, _TILES, _SUBIFDS)  # tags whose value differs from page to page


@dataclass(frozen=True)
class Image:
    """One resolution: ``pages`` IFDs alike, each ``bands`` planes of ``length`` x
    ``width`` pixels, stored as tiles of ``tile`` (length, width) or, with None, as one
    strip a plane."""

    pages: int
    bands: int
    length: int
    width: int
    tile: tuple[int, int] | None = None
    reduced: bool = False  # an overview of the image before it

    @property
    def grid(self) -> tuple[int, int]:
        """Tiles down and across."""
        if self.tile is None:
            return 1, 1
        return -(-self.length // self.tile[0]), -(-self.width // self.tile[1])

    @property
    def block_shape(self) -> tuple[int, int]:
        return self.tile or (self.length, self.width)

    @property
    def blocks(self) -> int:
        """Strips or tiles of one IFD, for all its bands."""
        down, across = self.grid
        return self.bands * down * across

    def block(self, image: int, index: int, lo: int, hi: int) -> Block:
        """Bytes ``[lo, hi)`` of its block ``index`` (this is image ``image``)."""
        page, rest = divmod(index, self.blocks)
        down, across = self.grid
        band, rest = divmod(rest, down * across)
        return Block(image, page, band, *divmod(rest, across), lo, hi, index)


@dataclass(frozen=True)
class Block:
    """Bytes ``[lo, hi)`` of one tile (or strip): ``image``'s page ``page``, band
    ``band``, at tile row ``row`` and column ``col``."""

    image: int
    page: int
    band: int
    row: int
    col: int
    lo: int
    hi: int
    index: int = 0  # its number among the image's blocks, in the file's order


@dataclass(frozen=True)
class _Progression:
    """``count`` integers ``first + k * step`` of ``itemsize`` bytes, at ``at``."""

    at: int
    count: int
    first: int
    step: int
    itemsize: int

    @property
    def end(self) -> int:
        return self.at + self.count * self.itemsize

    def part(self, order: str, start: int, stop: int) -> bytes:
        """Its bytes ``[start, stop)`` of the header (both within it)."""
        k0, k1 = (start - self.at) // self.itemsize, -(-(stop - self.at) // self.itemsize)
        ks = np.arange(k0, k1, dtype=np.uint64)
        values = np.uint64(self.first) + ks * np.uint64(self.step)
        raw = values.astype(f"{order}u{self.itemsize}").tobytes()
        return raw[start - self.at - k0 * self.itemsize : stop - self.at - k0 * self.itemsize]


class TiffLayout:
    """A TIFF header for ``images`` of ``dtype``, and where each block's bytes lie after
    it. ``tags`` go into the first image's IFDs (GeoTIFF's, GDAL's). The reduced images
    follow the first in the IFD chain (GDAL's overviews) or, with ``subifds``, are each
    page's SubIFDs (OME-TIFF's pyramids: every image then has the first's pages)."""

    def __init__(
        self,
        images: Sequence[Image],
        dtype: np.dtype,
        tags: Sequence[Tag] = (),
        big: bool = False,
        align: int = _ALIGN,
        subifds: bool = False,
    ) -> None:
        dtype = np.dtype(dtype)
        self.images = tuple(images)
        self.order = ">" if dtype.str[0] == ">" else "<"  # single-byte types ("|") as "II"
        self.itemsize = dtype.itemsize
        self.sample_format = _SAMPLE_FORMAT[dtype.kind]
        self.big = big
        self.tags = tuple(tags)
        self.align = align
        self.subifds = subifds and len(self.images) > 1
        self.block_bytes = [math.prod(i.block_shape) * self.itemsize for i in self.images]
        spans = [i.pages * i.blocks * b for i, b in zip(self.images, self.block_bytes, strict=True)]
        self.bases = [sum(spans[:k]) for k in range(len(spans))]  # of each image's data
        self.data_size = sum(spans)
        self._lay_out()

    # -- where things lie ------------------------------------------------------------

    @property
    def _word(self) -> int:
        return 8 if self.big else 4

    def _lay_out(self) -> None:
        """Places every region of the header: IFDs, count arrays, shared values, offset
        arrays."""
        tags = [self._tags(k) for k in range(len(self.images))]
        self.ifd_sizes = [self._ifd_size(len(t)) for t in tags]
        self.ifd_starts, at = [], _FIRST_IFD
        for image, size in zip(self.images, self.ifd_sizes, strict=True):
            self.ifd_starts.append(at)
            at += image.pages * size
        self.ifds_end = at
        self._counts: list[_Progression | None] = []
        for k, image in enumerate(self.images):
            several = image.blocks > 1
            self._counts.append(
                _Progression(at, image.blocks, self.block_bytes[k], 0, self._word)
                if several
                else None
            )
            at += image.blocks * self._word if several else 0
        self._shared, self._shared_at = bytearray(), at
        self._templates = [self._template(k, t) for k, t in enumerate(tags)]
        at += len(self._shared)
        places = []
        for image in self.images:
            places.append(at)
            at += image.pages * image.blocks * self._word if image.blocks > 1 else 0
        self._sub_at, self._sub_end = at, at
        if self.subifds and len(self.images) > 2:  # else each page's one SubIFD is inline
            self._sub_end = at = at + self.images[0].pages * (len(self.images) - 1) * self._word
        self.size = -(-at // self.align) * self.align
        self._offsets: list[_Progression | None] = [
            _Progression(p, i.pages * i.blocks, self.size + base, step, self._word)
            if i.blocks > 1
            else None
            for i, p, base, step in zip(
                self.images, places, self.bases, self.block_bytes, strict=True
            )
        ]

    def _ifd_size(self, entries: int) -> int:
        return 8 + 20 * entries + 8 if self.big else 2 + 12 * entries + 4

    def _tags(self, k: int) -> list[Tag]:
        """Image ``k``'s tags, ascending by code; block offsets and counts as placeholders
        (their values are per IFD, or arrays of their own)."""
        image = self.images[k]
        offset = LONG8 if self.big else LONG
        n, bands = image.blocks, image.bands
        bits = (self.itemsize * 8,) * bands
        tags = [
            Tag(256, LONG, (image.width,)),  # ImageWidth
            Tag(257, LONG, (image.length,)),  # ImageLength
            Tag(258, SHORT, bits),  # BitsPerSample
            Tag(259, SHORT, (1,)),  # Compression: none
            Tag(262, SHORT, (1,)),  # PhotometricInterpretation: BlackIsZero
            Tag(277, SHORT, (bands,)),  # SamplesPerPixel
            Tag(282, RATIONAL, (1, 1)),  # XResolution (baseline requires it)
            Tag(283, RATIONAL, (1, 1)),  # YResolution
            Tag(284, SHORT, (2 if bands > 1 else 1,)),  # PlanarConfiguration
            Tag(296, SHORT, (1,)),  # ResolutionUnit: none
            Tag(339, SHORT, (self.sample_format,) * bands),  # SampleFormat
        ]
        if image.reduced:
            tags.append(Tag(254, LONG, (1,)))  # NewSubfileType: reduced resolution
        if bands > 1:
            tags.append(Tag(338, SHORT, (0,) * (bands - 1)))  # ExtraSamples: unspecified
        if image.tile is None:
            tags += [Tag(_STRIPS, offset, (0,) * n), Tag(278, LONG, (image.length,))]
            tags.append(Tag(_STRIP_COUNTS, offset, (0,) * n))
        else:
            tags += [Tag(322, LONG, (image.tile[1],)), Tag(323, LONG, (image.tile[0],))]
            tags += [Tag(_TILES, offset, (0,) * n), Tag(_TILE_COUNTS, offset, (0,) * n)]
        if k == 0:
            given = {t.code for t in self.tags}  # these replace the defaults (resolution)
            tags = [t for t in tags if t.code not in given] + list(self.tags)
            if self.subifds:
                tags.append(Tag(_SUBIFDS, IFD8 if self.big else IFD, (0,) * (len(self.images) - 1)))
        return sorted(tags, key=lambda t: t.code)

    def _template(self, k: int, tags: list[Tag]) -> tuple[bytes, dict[int, int]]:
        """Image ``k``'s IFD with zeros where the per-IFD values go, and where those
        fields lie in it (by tag)."""
        count = struct.pack(self.order + ("Q" if self.big else "H"), len(tags))
        parts, fields = [count], {}
        for tag in tags:
            if tag.code in _PER_IFD:
                fields[tag.code] = sum(map(len, parts)) + (12 if self.big else 8)
            parts.append(self._entry(k, tag))
        parts.append(bytes(self._word))
        return b"".join(parts), fields

    def _entry(self, k: int, tag: Tag) -> bytes:
        """One entry of image ``k``'s IFDs, its value inline or among the shared ones."""
        kind = "HHQ" if self.big else "HHI"
        head = struct.pack(self.order + kind, tag.code, tag.kind, tag.count)
        if tag.code in _PER_IFD:  # filled in by _ifds
            return head + bytes(self._word)
        if tag.code in (_STRIP_COUNTS, _TILE_COUNTS):
            counts = self._counts[k]
            value = self.block_bytes[k] if counts is None else counts.at
            return head + self._long(value)
        value = tag.packed(self.order)
        if len(value) <= self._word:
            return head + value.ljust(self._word, b"\0")
        self._shared.extend(bytes(-len(self._shared) % 8))  # values start on a word
        at = self._shared_at + len(self._shared)
        self._shared.extend(value)
        return head + self._long(at)

    def _long(self, value: int) -> bytes:
        return struct.pack(self.order + ("Q" if self.big else "I"), value)

    # -- the header's bytes ----------------------------------------------------------

    def _prefix(self) -> bytes:
        mark = b"MM" if self.order == ">" else b"II"
        if self.big:
            return mark + struct.pack(self.order + "HHHQ", 43, 8, 0, _FIRST_IFD)
        return mark + struct.pack(self.order + "HI", 42, _FIRST_IFD) + bytes(8)

    def _ifds(self, k: int, first: int, stop: int) -> bytes:
        """IFDs ``first`` to ``stop - 1`` of image ``k``: its template, the block offsets
        (or where they lie) and the next IFD's offset filled in per IFD."""
        template, fields = self._templates[k]
        image, size = self.images[k], self.ifd_sizes[k]
        n = stop - first
        if n <= 0:
            return b""
        buf = np.tile(np.frombuffer(template, np.uint8), n)
        kind = np.dtype(self.order + ("u8" if self.big else "u4"))

        def column(pos: int) -> np.ndarray:
            return np.ndarray((n,), kind, buf, pos, (size,))

        pages = np.arange(first, stop, dtype=np.uint64)
        for code, (base, step) in self._per_ifd(k).items():
            column(fields[code])[:] = np.uint64(base) + pages * np.uint64(step)
        nexts = np.uint64(self.ifd_starts[k]) + (pages + np.uint64(1)) * np.uint64(size)
        last = 0 if self.subifds else len(self.images) - 1
        if k > last:
            nexts[:] = 0  # SubIFDs: each is found through its page's list
        elif k == last and stop == image.pages:
            nexts[-1] = 0  # the last IFD ends the chain
        column(size - kind.itemsize)[:] = nexts
        return buf.tobytes()

    def _per_ifd(self, k: int) -> dict[int, tuple[int, int]]:
        """The per-IFD fields of image ``k``: the value in page ``i``'s is base + i * step."""
        image, offsets = self.images[k], self._offsets[k]
        if offsets is None:  # one block: its offset is in the entry
            found = {_STRIPS: (self.size + self.bases[k], self.block_bytes[k])}
        else:
            found = {_STRIPS: (offsets.at, image.blocks * self._word)}
        if image.tile is not None:
            found[_TILES] = found.pop(_STRIPS)
        if k == 0 and self.subifds:
            if len(self.images) == 2:  # the page's one SubIFD, inline
                found[_SUBIFDS] = (self.ifd_starts[1], self.ifd_sizes[1])
            else:
                found[_SUBIFDS] = (self._sub_at, (len(self.images) - 1) * self._word)
        return found

    def _subifd_lists(self, a: int, b: int) -> bytes:
        """Bytes ``[a, b)`` of the pages' SubIFD lists: page i's level l is at
        ``ifd_starts[l] + i * ifd_sizes[l]``."""
        word, levels = self._word, len(self.images) - 1
        k0, k1 = a // word, -(-b // word)
        page, level = np.divmod(np.arange(k0, k1, dtype=np.uint64), np.uint64(levels))
        starts = np.array(self.ifd_starts[1:], np.uint64)[level.astype(np.intp)]
        sizes = np.array(self.ifd_sizes[1:], np.uint64)[level.astype(np.intp)]
        raw = (starts + page * sizes).astype(f"{self.order}u{word}").tobytes()
        return raw[a - k0 * word : b - k0 * word]

    def _regions(self) -> Iterator[tuple[int, int, object]]:
        """(start, stop, maker) of each part of the header, in order."""
        yield 0, _FIRST_IFD, lambda a, b: self._prefix()[a:b]
        for k, image in enumerate(self.images):
            yield self.ifd_starts[k], self.ifd_starts[k] + image.pages * self.ifd_sizes[k], k
        for progression in self._counts:
            if progression is not None:
                yield progression.at, progression.end, progression
        end = self._shared_at + len(self._shared)
        yield self._shared_at, end, lambda a, b: bytes(self._shared[a:b])
        for progression in self._offsets:
            if progression is not None:
                yield progression.at, progression.end, progression
        yield self._sub_at, self._sub_end, self._subifd_lists

    def header_range(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the header, making only the parts they touch (a
        read of a file with 100,000 pages need not make every IFD)."""
        start, stop = max(start, 0), min(stop, self.size)
        parts = []
        at = start
        for lo, hi, maker in self._regions():
            a, b = max(lo, start), min(hi, stop)
            if a >= b:
                continue
            parts.append(bytes(a - at))  # the zeros between regions
            parts.append(self._region(lo, maker, a, b))
            at = b
        parts.append(bytes(max(stop - at, 0)))
        return b"".join(parts)

    def _region(self, lo: int, maker: object, a: int, b: int) -> bytes:
        """Bytes ``[a, b)`` of the region starting at ``lo``."""
        if isinstance(maker, _Progression):
            return maker.part(self.order, a, b)
        if isinstance(maker, int):
            size = self.ifd_sizes[maker]
            first, last = (a - lo) // size, -(-(b - lo) // size)
            made = self._ifds(maker, first, last)
            return made[a - lo - first * size : b - lo - first * size]
        return maker(a - lo, b - lo)

    # -- the data after it -----------------------------------------------------------

    def blocks_in(self, start: int, stop: int) -> Iterator[Block]:
        """The blocks that data bytes ``[start, stop)`` (counted from the data's start)
        touch, and which of their bytes."""
        stop = min(stop, self.data_size)
        k = 0
        while start < stop:
            while k + 1 < len(self.images) and self.bases[k + 1] <= start:
                k += 1
            image, size = self.images[k], self.block_bytes[k]
            index, lo = divmod(start - self.bases[k], size)
            hi = min(size, lo + stop - start)
            yield image.block(k, index, lo, hi)
            start += hi - lo


def _dtype_checked(dtype: np.dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.itemsize not in _ITEMSIZES.get(dtype.kind, ()) or dtype.fields or dtype.subdtype:
        raise NotApplicable(f"TIFF has no sample format for {dtype}")
    return dtype


def _sized(
    images: list[Image], dtype: np.dtype, tags: Sequence[Tag], big: bool, **how: Any
) -> TiffLayout:
    """Classic TIFF while every offset fits in 32 bits (while the whole file does), else
    BigTIFF; refused past MAX_HEADER_BYTES."""
    for image in images:
        if max(image.length, image.width) > _MAX_LONG:
            raise NotApplicable("TIFF images are at most 2**32 - 1 pixels wide and long")
    data = sum(i.pages * i.blocks * math.prod(i.block_shape) for i in images) * dtype.itemsize
    lay = TiffLayout(images, dtype, tags, big or data > _MAX_LONG, **how)
    if not lay.big and lay.size + lay.data_size > _MAX_LONG:
        lay = TiffLayout(images, dtype, tags, True, **how)
    if lay.size > MAX_HEADER_BYTES:
        pages = sum(i.pages for i in images)
        raise NotApplicable(f"a TIFF header for {pages} pages would exceed {MAX_HEADER_BYTES} B")
    return lay


def strip_layout(
    shape: tuple[int, ...], dtype: np.dtype, tags: Sequence[Tag] = (), force_bigtiff: bool = False
) -> TiffLayout:
    """The strips layout of an array: its C-order bytes are the data."""
    dtype = _dtype_checked(dtype)
    if not 1 <= len(shape) <= 3:
        raise NotApplicable(f"TIFF shows 1-D, 2-D and 3-D arrays, not {len(shape)}-D")
    if not math.prod(shape):
        raise NotApplicable("an empty array has no TIFF image")
    pages, length, width = (1, 1, *shape) if len(shape) == 1 else (1, *shape)[-3:]
    return _sized([Image(pages, 1, length, width)], dtype, tags, force_bigtiff)


def tiled_image(
    shape: tuple[int, ...], chunks: tuple[int, ...], reduced: bool = False, planes: bool = False
) -> Image:
    """An array as tiles that are its chunks: NotApplicable where TIFF cannot tile it so.
    The dimension before the last two is bands, or with ``planes`` pages as the others."""
    if len(shape) < 2:
        raise NotApplicable("a tiled TIFF needs two dimensions")
    if not math.prod(shape):
        raise NotApplicable("an empty array has no TIFF image")
    tile = chunks[-2], chunks[-1]
    if tile[0] % 16 or tile[1] % 16:
        raise NotApplicable(f"TIFF tiles are multiples of 16; the chunks' last two are {tile}")
    bands = shape[-3] if len(shape) > 2 and not planes else 1
    if bands > MAX_BANDS:
        raise NotApplicable(f"TIFF holds at most {MAX_BANDS} bands, not {bands}")
    pages = math.prod(shape[:-2]) // bands
    return Image(pages, bands, shape[-2], shape[-1], tile, reduced)


def tiled_layout(
    images: list[Image],
    dtype: np.dtype,
    tags: Sequence[Tag] = (),
    force_bigtiff: bool = False,
    subifds: bool = False,
) -> TiffLayout:
    """The tiled layout of an array (``tiled_image``) and its overviews (reduced images
    in the IFD chain, or each page's SubIFDs)."""
    dtype = _dtype_checked(dtype)
    return _sized(images, dtype, tags, force_bigtiff, align=TILES_ALIGN, subifds=subifds)


def tiff_header_size(
    shape: tuple[int, ...], dtype: np.dtype, *, force_bigtiff: bool = False
) -> int:
    """``len(tiff_header(shape, dtype))``, the data offset, without making the header."""
    return strip_layout(shape, dtype, force_bigtiff=force_bigtiff).size


def tiff_header_range(
    shape: tuple[int, ...], dtype: np.dtype, start: int, stop: int, *, force_bigtiff: bool = False
) -> bytes:
    """Bytes ``[start, stop)`` of ``tiff_header(shape, dtype)``."""
    return strip_layout(shape, dtype, force_bigtiff=force_bigtiff).header_range(start, stop)


def tiff_header(shape: tuple[int, ...], dtype: np.dtype, *, force_bigtiff: bool = False) -> bytes:
    """The TIFF header ``H`` for an array: the file ``H + arr.tobytes()`` is a TIFF of it.

    BigTIFF when the file would reach 4 GiB (or ``force_bigtiff``); ``NotApplicable``
    for other than 1 to 3 dimensions, empty arrays, types TIFF has no sample format for
    (complex, strings, structured...) and headers beyond ``MAX_HEADER_BYTES``.
    """
    return tiff_header_range(shape, dtype, 0, MAX_HEADER_BYTES, force_bigtiff=force_bigtiff)
