"""Arrays shown in another byte order than they are stored in (``-o byteorder``): whole
elements are swapped on the way out, and back on the way in, so a tool that wants one
byte order reads every array in it. The views of other formats (FITS, netCDF) convert
whole elements the same way (:func:`read_converted`)."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable

import numpy as np

from zarrmount.array.reader import ArrayReader
from zarrmount.array.writer import whole_elements
from zarrmount.errors import FsError

# NumPy's byte order characters of -o byteorder's values (options.BYTE_ORDERS); "stored"
# has none: the array's own order.
_ORDER_CHARS = {"little": "<", "big": ">", "native": "="}


def shown_dtype(dtype: np.dtype, byteorder: str) -> np.dtype:
    """The dtype of an array file's bytes: ``dtype`` in ``byteorder``. Single-byte types
    and byte strings have no byte order."""
    order = _ORDER_CHARS.get(byteorder)
    return dtype if order is None else dtype.newbyteorder(order)


# Whole elements' bytes (uint8) -> as many bytes as shown (a new array: the input may be
# a cached chunk)
Convert = Callable[[np.ndarray], np.ndarray]
Read = Callable[[int, int, np.ndarray | None], Awaitable[memoryview | bytes]]


def swapping(stored: np.dtype, shown: np.dtype, flip_sign: bool = False) -> Convert:
    """Elements of ``stored`` as ``shown`` (same size, another byte order or signedness);
    ``flip_sign``: with the most significant bit flipped (FITS's BZERO offsets)."""

    def convert(raw: np.ndarray) -> np.ndarray:
        out = np.frombuffer(raw, dtype=stored).astype(shown).view(np.uint8)
        if flip_sign:  # big-endian: the most significant byte comes first
            out.reshape(-1, shown.itemsize)[:, 0] ^= 0x80
        return out

    return convert


def to_big_endian(dtype: np.dtype, flip_sign: bool = False) -> Convert | None:
    """Elements of ``dtype`` big-endian (the sign bit flipped with ``flip_sign``); None
    where their bytes already are (single bytes, big-endian)."""
    if not flip_sign and (dtype.itemsize == 1 or dtype.byteorder == ">"):
        return None
    return swapping(dtype, dtype.newbyteorder(">"), flip_sign)


def utf8_padded(stored: np.dtype) -> Convert:
    """Fixed-size unicode (UCS-4) as UTF-8, null-padded to the same size (4 bytes per
    character hold any encoding of it)."""
    shown = np.dtype(f"S{stored.itemsize}")

    def convert(raw: np.ndarray) -> np.ndarray:
        text = np.frombuffer(raw, dtype=stored)
        return np.char.encode(text, "utf-8").astype(shown).view(np.uint8)

    return convert


async def read_converted(
    read: Read,
    itemsize: int,
    total: int,
    convert: Convert,
    offset: int,
    size: int,
    reply: np.ndarray | None = None,
) -> memoryview:
    """Bytes ``[offset, offset + size)`` of a file of ``total`` bytes whose whole elements
    of ``itemsize`` are bytes ``read`` from another, converted; short at the end."""
    end = min(offset + size, total)
    if offset >= end:
        return memoryview(b"")
    first, last = offset // itemsize * itemsize, -(-end // itemsize) * itemsize
    raw = await read(first, last - first, reply)
    shown = convert(np.frombuffer(raw, dtype=np.uint8))
    return memoryview(shown)[offset - first : end - first]


class Swapped:
    """An array engine whose elements are shown in the byte order of ``shown``."""

    def __init__(self, engine: ArrayReader, shown: np.dtype) -> None:
        self.engine = engine
        self.stored = engine.meta.dtype
        self.shown = shown
        self.path, self.size, self.writable = engine.path, engine.size, engine.writable
        self._convert = swapping(self.stored, shown)

    @property
    def mtime_ns(self) -> int | None:
        return getattr(self.engine, "mtime_ns", None)

    async def revalidate(self) -> None:
        await self.engine.revalidate()

    def prepare(self) -> None:
        self.engine.prepare()

    @mtime_ns.setter
    def mtime_ns(self, value: int) -> None:
        self.engine.mtime_ns = value

    async def read(self, offset: int, size: int, reply: np.ndarray | None = None) -> memoryview:
        """Bytes ``[offset, offset + size)`` in the shown byte order, short at the end."""
        isz, convert = self.stored.itemsize, self._convert
        return await read_converted(self.engine.read, isz, self.size, convert, offset, size, reply)

    async def write(self, offset: int, data: bytes) -> int:
        """Write ``data`` (shown byte order) at ``offset``: partial elements at the edges
        are completed with the bytes there, and the whole elements stored swapped back."""
        end = offset + len(data)
        if end > self.size:
            raise FsError(errno.EFBIG, f"write of {len(data)} bytes at {offset} past the end")
        if not data:
            return 0
        whole = await whole_elements(self.read, self.stored.itemsize, offset, data)
        stored = whole.view(self.shown).astype(self.stored)  # swapped back
        await self.engine.write(
            offset // self.stored.itemsize * self.stored.itemsize, stored.tobytes()
        )
        return len(data)

    async def flush(self) -> None:
        await self.engine.flush()

    async def sync(self) -> None:
        await self.engine.sync()

    async def warm_up(self, budget: int) -> int:
        return await self.engine.warm_up(budget)
