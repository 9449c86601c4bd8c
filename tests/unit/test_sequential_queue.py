"""The sequential read-ahead's queue (array/prefetch.py), with a fake array whose loads
the test ends one at a time: a window's last slab waits behind the loads under way and
starts as they end, so the loads in flight never all end together; chunks the reader has
passed, or that are cached or loading already, are never loaded from the queue."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import trio

from zarrmount.array.background import Background
from zarrmount.array.prefetch import Prefetcher, last_element

SHAPE, CHUNKS = (64, 4096), (16, 512)  # four slabs of eight 32 KiB chunks (float32)


@dataclass
class _Meta:
    shape: tuple[int, ...] = SHAPE
    chunks: tuple[int, ...] = CHUNKS
    itemsize: int = 4

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    @property
    def chunk_nbytes(self) -> int:
        return math.prod(self.chunks) * self.itemsize


@dataclass
class _Cache:
    capacity: int = 2 << 20  # a quarter of it: 512 KiB, two slabs
    held: set = field(default_factory=set)
    loads: set = field(default_factory=set)

    def peek(self, key):
        return True if key in self.held else None

    def loading(self, key) -> bool:
        return key in self.loads

    def unpin(self, _entry) -> None:
        pass


class _Array:
    """Loads that wait until the test ends them (``finish``), recording which began."""

    def __init__(self) -> None:
        self.meta, self.cache = _Meta(), _Cache()
        self.started: list[tuple[int, ...]] = []
        self._ends: dict[tuple[int, ...], trio.Event] = {}

    def key(self, coords):
        return ("a", coords)

    async def chunk(self, coords):
        self.started.append(coords)
        self.cache.loads.add(self.key(coords))
        self._ends[coords] = trio.Event()
        await self._ends[coords].wait()
        self.cache.loads.discard(self.key(coords))
        self.cache.held.add(self.key(coords))
        return None, None

    def finish(self, coords) -> None:
        self._ends[coords].set()


def _slab(row: int) -> list[tuple[int, int]]:
    return [(row, j) for j in range(SHAPE[1] // CHUNKS[1])]


async def _settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


def _streaming(body) -> None:
    """``body(array, prefetch)`` once a reader read the first three rows in order (the
    window asked for); loads still under way after it are cancelled."""

    async def main():
        array, background = _Array(), Background()
        async with trio.open_nursery() as nursery:
            background.nursery = nursery
            prefetch = Prefetcher(array, background)
            row_bytes = SHAPE[1] * 4
            for k in range(3):
                prefetch.observe(k * row_bytes, (k + 1) * row_bytes)
            await _settle()
            await body(array, prefetch)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_the_windows_last_slab_starts_as_the_loads_before_it_end():
    async def body(array, prefetch):
        assert prefetch.model.window == 2 * 8 * array.meta.chunk_nbytes  # two slabs
        assert sorted(array.started) == _slab(0)  # the first slab; the second one waits
        for n, coords in enumerate(_slab(0)):
            array.finish(coords)
            await _settle()
            assert sorted(array.started) == _slab(0) + _slab(1)[: n + 1]  # one for one

    _streaming(body)


def test_queued_chunks_the_reader_passed_or_that_are_held_are_not_loaded():
    async def body(array, prefetch):
        array.cache.held.add(array.key(_slab(1)[0]))  # the reader loaded it itself
        passed = (last_element(SHAPE, CHUNKS, _slab(1)[1]) + 1) * 4
        prefetch.observe(passed, passed + 4)  # the reader is past the next one
        for coords in _slab(0):
            array.finish(coords)
        await _settle()
        # eight under way again: the rest of the window reaches into the third slab
        assert sorted(array.started) == _slab(0) + _slab(1)[2:] + _slab(2)[:2]

    _streaming(body)


def test_a_background_load_that_starts_while_the_chunk_is_loading_leaves_it_to_that_load():
    """Waiting on the reader's load, the task could wake after the reader let the chunk
    go behind it, and fetch it again (a remote dd fetched a chunk twice, 1 run in 8)."""

    async def main():
        array, background = _Array(), Background()
        async with trio.open_nursery() as nursery:
            background.nursery = nursery
            prefetch = Prefetcher(array, background)
            prefetch.follow([(3, 3)])  # its task is started, not yet run
            array.cache.loads.add(array.key((3, 3)))  # the reader's own load begins first
            await _settle()
            assert array.started == []
            nursery.cancel_scope.cancel()

    trio.run(main)
