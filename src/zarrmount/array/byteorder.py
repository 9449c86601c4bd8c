"""Arrays shown in another byte order than they are stored in (``-o byteorder``): whole
elements are swapped on the way out, and back on the way in, so a tool that wants one
byte order reads every array in it."""

from __future__ import annotations

import errno

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


class Swapped:
    """An array engine whose elements are shown in the byte order of ``shown``."""

    def __init__(self, engine: ArrayReader, shown: np.dtype) -> None:
        self.engine = engine
        self.stored = engine.meta.dtype
        self.shown = shown
        self.path, self.size, self.writable = engine.path, engine.size, engine.writable

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

    def _elements(self, offset: int, end: int) -> tuple[int, int]:
        isz = self.stored.itemsize
        return offset // isz * isz, -(-end // isz) * isz

    async def read(self, offset: int, size: int, reply: np.ndarray | None = None) -> memoryview:
        """Bytes ``[offset, offset + size)`` in the shown byte order, short at the end."""
        end = min(offset + size, self.size)
        if offset >= end:
            return memoryview(b"")
        first, last = self._elements(offset, end)
        raw = await self.engine.read(first, last - first, reply)
        swapped = np.frombuffer(raw, dtype=self.stored).astype(self.shown)  # a copy: raw
        return memoryview(swapped.view(np.uint8))[offset - first : end - first]  # may be cached

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
