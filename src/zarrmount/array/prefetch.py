"""One array's read-ahead: chunks a sequential or strided reader will want are loaded in
the background, chunks read in part follow whole, and a streaming reader's finished chunks
go back to the pool (drop-behind)."""

from __future__ import annotations

import collections
import contextlib
import functools
import math
from typing import TYPE_CHECKING

import trio

from zarrmount.array.background import Background
from zarrmount.array.grid import WIDE, Coords
from zarrmount.cache.prefetch import Pace, ReadAhead
from zarrmount.cache.strides import StrideReadAhead
from zarrmount.errors import FsError
from zarrmount.layout import chunks_touched, count_touched, pieces

if TYPE_CHECKING:
    from zarrmount.array.source import ChunkSource

# At most this many loads of chunks read in part pending per file: a random reader
# touching many chunks queues their decoding (as it would have done in the foreground),
# but not without bound; a chunk skipped is read in part again, and may follow next time.
FOLLOW_LIMIT = 64
# The least read-ahead, in chunks, unless two slabs are more (the most: a quarter of the
# cache); between the two it follows the measured pace of the reader and of the loads
# (cache/prefetch.py).
LEAST_CHUNKS = 4
# A strided reader's least read-ahead, in strides (cache/strides.py); the most is WIDE
# strides, and as many chunks as a quarter of the cache holds, a chunk counted a stride.
LEAST_STRIDES = 8


class Prefetcher:
    """Loads chunks in the background: ahead of a sequential or a strided reader (at most
    WIDE loads of this array under way: a reader faster than the store must not pile up
    tasks), and those read in part.

    Ahead of a sequential reader, the window's last slab waits in a queue, each load that
    ends starting the next. A reader needs a slab's chunks all together, and loads started
    together share the link and end together: were every window started at once, the
    link would idle between windows while the last loads of one trickled in and the next
    made their first round trip. Started as others end, loads are at every stage, and the
    link stays busy.
    """

    def __init__(self, source: ChunkSource, background: Background, ahead: bool = True) -> None:
        meta = source.meta
        most = source.cache.capacity // 4
        # a request crosses every chunk of a slab (one row of chunks along the first axis):
        # a reader entering the next slab needs all of its chunks, so at least a slab ahead
        slab = meta.chunks[0] * math.prod(meta.shape[1:]) * meta.itemsize if meta.shape else 0
        least = max(LEAST_CHUNKS * meta.chunk_nbytes, 2 * slab)  # the next slab while in one
        self.model = ReadAhead(meta.nbytes, most, least)
        self.slab = slab
        self._queue: collections.deque[Coords] = collections.deque()
        self._width = WIDE  # loads of the queue under way at most
        self._reader_at = 0  # the element a sequential reader reached
        strides = min(WIDE, most // max(meta.chunk_nbytes, 1))
        self.strides = StrideReadAhead(meta.nbytes, strides, LEAST_STRIDES)
        self.pace = Pace(self.model, self.strides)
        self.source, self.background = source, background
        self.ahead = ahead  # chunks read directly (array/direct.py) have the page cache
        self._following = 0  # background loads under way

    @property
    def sequential(self) -> bool:
        return self.model.sequential

    def observe(self, offset: int, end: int) -> None:
        """A read of bytes ``[offset, end)``: start read-ahead if a model asks for it."""
        self.pace.consumed(end - offset, trio.current_time())
        ahead = self.model.observe(offset, end)
        if not self.ahead:
            return
        isz = self.source.meta.itemsize
        self._reader_at = offset // isz
        if ahead is not None:
            self.background.start_soon(self._ahead, ahead[0] // isz, -(-ahead[1] // isz))
        self._along(self.strides.observe(offset, end), isz)

    def follow(self, coords: list[Coords]) -> None:
        """Chunks read in part: load them whole in the background (within FOLLOW_LIMIT)."""
        source = self.source
        for c in coords:
            if self._following < FOLLOW_LIMIT and not source.cache.loading(source.key(c)):
                self._start(c)

    def _start(self, coords: Coords, ahead: bool = False) -> None:
        self._following += self.background.start_soon(self._follow, coords, ahead)

    def _along(self, ranges: list[tuple[int, int]], isz: int) -> None:
        """Load the chunks of the byte ranges a strided reader reads next."""
        shape, chunks = self.source.meta.shape, self.source.meta.chunks
        for offset, end in ranges:
            self._load(chunks_touched(shape, chunks, offset // isz, -(-end // isz)), WIDE)

    async def _ahead(self, first: int, last: int) -> None:
        """Load the chunks of elements ``[first, last)`` into the cache, in walk order: at
        most WIDE of them, and at most WIDE background loads of this file under way."""
        meta = self.source.meta
        count = functools.partial(count_touched, meta.shape, meta.chunks)
        last = next(pieces(first, last, count, WIDE), (first, first))[1]
        per_chunk = max(meta.chunk_nbytes, 1)
        width = max(LEAST_CHUNKS, (self.model.window - self.slab) // per_chunk)
        self._load(chunks_touched(meta.shape, meta.chunks, first, last), width)

    def _load(self, chunks: list[Coords], width: int) -> None:
        """Load each of ``chunks`` (its own task, so that round trips overlap): ``width``
        under way at most, the rest queued behind them (WIDE at most)."""
        self._width = width
        self._queue.extend(chunks[: WIDE - len(self._queue)])
        self._next()

    def _next(self) -> None:
        """Start queued loads while fewer than ``width`` are under way, of chunks neither
        cached nor loading nor left behind by the reader."""
        cache, key = self.source.cache, self.source.key
        while self._queue and self._following < self._width:
            coords = self._queue.popleft()
            held = cache.peek(key(coords)) is not None or cache.loading(key(coords))
            if not held and not self._behind(coords):
                self._start(coords, ahead=True)

    def _behind(self, coords: Coords) -> bool:
        """The sequential reader has read past the chunk (and may have let it go)."""
        meta = self.source.meta
        return last_element(meta.shape, meta.chunks, coords) < self._reader_at

    async def _follow(self, coords: Coords, ahead: bool) -> None:
        """Load a chunk into the cache in the background; a failed load was logged, and
        the reader meets the same error if it gets there. Not where the chunk is loading
        already: waiting for that load, this task could wake after the reader had let
        the chunk go, and fetch it again (1 run in 8 of a remote dd beside a busy core);
        nor ahead of a reader that has passed the chunk by the time the task starts."""
        start = trio.current_time()
        try:
            if self.source.cache.loading(self.source.key(coords)):
                return
            if ahead and self._behind(coords):
                return
            with contextlib.suppress(FsError):
                _, entry = await self.source.chunk(coords)
                self.source.cache.unpin(entry)
                self.pace.loaded(trio.current_time() - start)
        finally:
            self._following -= 1
            self._next()

    def drop_behind(self, plan: dict, last: int, steps: list[int]) -> None:
        """A streaming reader never comes back (the page cache serves rereads): give the
        buffers of chunks it has read to the end back to the pool, while they are warm,
        and close the files of those read directly."""
        if not self.model.sequential or not steps:
            return
        # the reader is past what it was served: a load still queued for a chunk it let go
        # here is not made when a load ends before its next read (it was, fetching twice)
        self._reader_at = max(self._reader_at, last)
        source, row, rows_end = self.source, None, 0
        for coords in plan:
            if coords[0] != row:  # no chunk of a row of chunks ends before the row's last
                row = coords[0]  # element along the first axis does
                rows_end = source.grid.row_end(row, steps[0])
            if rows_end < last and source.grid.chunk_end(coords, steps) < last:
                source.cache.release(source.key(coords))
                source.revalidation.files.forget(source.file_key(coords))


def last_element(shape: tuple[int, ...], chunks: tuple[int, ...], coords: Coords) -> int:
    """The C-order index of the chunk's last element in the array."""
    index = 0
    for n, c, i in zip(shape, chunks, coords, strict=True):
        index = index * n + min((i + 1) * c, n) - 1
    return index
