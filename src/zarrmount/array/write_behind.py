"""A sequential writer's finished chunks are stored at once, in the background.

Without it a stream of writes fills the cache with dirty chunks until the dirty limit,
then stalls while a burst of them is encoded; and every new chunk lands in fresh memory,
as the cache is full of the written ones. Written behind, the encoding of one row of
chunks overlaps the writing of the next, and a chunk once stored gives its buffer back to
the pool for the chunks still to come (drop-behind, as for a streaming reader).
"""

from __future__ import annotations

from typing import Protocol

from zarrmount.array.grid import Coords
from zarrmount.array.source import ChunkSource
from zarrmount.cache import ChunkCache
from zarrmount.format.model import ArrayMeta

# Requests that follow each other before a writer counts as sequential.
STREAK = 2
# Units written behind at once at most per array (the cache's WRITE_BACKS bound the
# encoders): a writer faster than the store leaves the rest to the dirty limit.
PENDING = 16


class Writer(Protocol):
    """What write-behind needs of an array's writer (``array/writer.py``)."""

    source: ChunkSource
    cache: ChunkCache
    meta: ArrayMeta
    steps: list[int]  # flat C-order index steps of each axis

    async def write_back_unit(self, unit: Coords) -> int | None: ...


class WriteBehind:
    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._next = -1  # where the next sequential write would start
        self._streak = 0
        self._pending: set[Coords] = set()

    def observe(self, offset: int, end: int, touched: list[Coords]) -> None:
        """A write of bytes ``[offset, end)`` touched the chunks ``touched``: once the
        writer is sequential, store in the background those it has written to their end."""
        self._streak = self._streak + 1 if offset == self._next else 0
        self._next = end
        if self._streak < STREAK:
            return
        writer = self.writer
        grid, steps = writer.source.grid, writer.steps
        last = -(-end // writer.meta.itemsize) - 1  # the last element written
        for coords in touched:
            unit = grid.unit(coords)
            if len(self._pending) >= PENDING or unit in self._pending:
                continue
            if grid.unit_end(unit, steps) <= last:  # written to its end
                self._pending.add(unit)
                if not writer.source.background.start_soon(self._store, unit):
                    self._pending.discard(unit)

    async def _store(self, unit: Coords) -> None:
        writer = self.writer
        try:
            await writer.write_back_unit(unit)
            for coords in writer.source.grid.chunks_of(unit):
                writer.cache.release(writer.source.key(coords))
        finally:
            self._pending.discard(unit)
