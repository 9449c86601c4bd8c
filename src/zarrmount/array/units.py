"""Which stored units (chunks, or shards) of an array are being written back, and how often
each was rewritten: readers of a shard's parts must not mix an old index with new bytes,
and writers must not patch a chunk an encoder is reading."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from zarrmount.array.grid import UnitGrid
    from zarrmount.cache import ChunkCache
    from zarrmount.store.aio import AsyncStore

Coords = tuple[int, ...]


class UnitStates:
    """Busy units and generations of one array (filled only by its write-backs)."""

    def __init__(self) -> None:
        self._busy: dict[Coords, trio.Event] = {}
        self._generation: dict[Coords, int] = {}
        self.stores = 0  # write-backs begun: a listing they overlapped may miss a key

    def busy(self, unit: Coords) -> bool:
        return unit in self._busy

    @property
    def any_busy(self) -> bool:
        return bool(self._busy)

    def generation(self, unit: Coords) -> int:
        return self._generation.get(unit, 0)

    def changed(self, unit: Coords, generation: int) -> bool:
        """True when ``unit`` is being rewritten, or was since ``generation``."""
        return unit in self._busy or self.generation(unit) != generation

    async def idle(self, unit: Coords) -> None:
        """Wait until ``unit`` is not being written back."""
        while (event := self._busy.get(unit)) is not None:
            await event.wait()

    @contextmanager
    def rewriting(self, unit: Coords) -> Iterator[None]:
        """``unit`` is busy (and a new generation) while its write-back runs."""
        done = self._busy[unit] = trio.Event()
        self.stores += 1
        self._generation[unit] = self.generation(unit) + 1
        try:
            yield
        finally:
            del self._busy[unit]
            done.set()


@dataclass(eq=False)
class UnitsPart:
    """The base of the parts of one array's engine that reach its stored units themselves
    (shard indexes, listings of stored units): what they share, named once."""

    path: str  # the array's, as its cache keys begin
    grid: UnitGrid
    store: AsyncStore
    cache: ChunkCache
    states: UnitStates
