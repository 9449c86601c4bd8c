"""Reads of an array's raw C-order bytes: plan, fetch and decode chunks, copy slices."""

from __future__ import annotations

import errno
import functools
import logging

import numpy as np
import trio

from zarrmount.array.direct import DirectReads
from zarrmount.array.grid import WIDE, Coords
from zarrmount.array.partial import Part, PartialReads
from zarrmount.array.prefetch import Prefetcher
from zarrmount.array.shared import Shared
from zarrmount.array.source import ChunkSource
from zarrmount.codecs import Pipeline
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayNode
from zarrmount.layout import Copy, Planner, count_touched, pieces, plan_read, touched_ranges
from zarrmount.memory import aligned_empty
from zarrmount.store import StoreError

log = logging.getLogger(__name__)

# Requests of at least this many bytes read uncompressed chunks directly (array/direct.py)
# whatever came before: the kernel's read-ahead makes a stream's first requests this large.
DIRECT_LEAST = 128 << 10


class _Gathered:
    """The chunks a plan reads, and what to give back once copied: cache entries pinned
    for them (pins keep a chunk and its buffer in place while other loads are awaited),
    and pool buffers lent to chunks decoded only in part."""

    def __init__(self) -> None:
        self.found: dict[Coords, np.ndarray] = {}
        self.pinned: list = []
        self.lent: list = []
        self.errors: list[FsError] = []


class ArrayReader:
    """One array's bytes, read; shared by every handle open on its files."""

    writable = False

    def __init__(self, node: ArrayNode, pipeline: Pipeline, shared: Shared) -> None:
        self.path = node.path
        self.meta = node.meta
        self.size = node.meta.nbytes
        self.source = source = ChunkSource(node, pipeline, shared)
        self.cache = shared.cache
        self.direct = DirectReads(source)
        self.prefetch = Prefetcher(source, shared.background, ahead=not self.direct.enabled)
        self.partial = PartialReads(source)
        self._planner = Planner(node.meta.shape, node.meta.chunks)

    async def warm_up(self, budget: int) -> int:
        return await self.source.warm_up(budget)

    async def revalidate(self) -> None:
        """Drop cached chunks other writers changed, if the array's period has run out."""
        await self.source.revalidate()

    def prepare(self) -> None:
        """Opened: what a first read needs is begun in the background."""
        self.source.prepare()

    async def read(
        self, offset: int, size: int, reply: np.ndarray | None = None
    ) -> memoryview | bytes:
        """Bytes ``[offset, offset + size)`` of the array, short at its end.

        ``reply``, a page-aligned uint8 buffer the caller recycles, receives the bytes
        when it is large enough (fresh memory per request is slow on these machines).
        The result may be a view of a cached chunk: use it before awaiting anything.
        """
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        if self.source.expired:  # checked here: a read must not pay a coroutine for it
            await self.source.revalidate()
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        self.prefetch.observe(offset, end)
        skip = offset - first * isz
        row = self._planner.one_chunk_row(first, last)
        if row is not None and (flat := self._cached_row(row[0])) is not None:
            # Most random reads: one row of a cached chunk, whose bytes are the reply. The
            # caller sends it before any other task runs, and only tasks change cached
            # chunks or give their buffers back (a sequential reader's drop-behind would).
            self.cache.stats.hits += 1
            at = row[2] * isz + skip
            return flat[at : at + end - offset]
        nbytes = (last - first) * isz
        if reply is not None and reply.nbytes >= nbytes:
            out = reply[:nbytes].view(self.source.raw)
        else:
            out = aligned_empty(nbytes).view(self.source.raw)
        if row is not None:
            await self._serve(self._planner.row_plan(row, last - first), out, last)
        elif count_touched(self.meta.shape, self.meta.chunks, first, last) <= WIDE:
            await self._serve(self._planner.plan(first, last), out, last)
        else:
            await self._read_wide(first, last, out)
        return memoryview(out.view(np.uint8))[skip : skip + end - offset]

    def _cached_row(self, coords: Coords) -> memoryview | None:
        """The C-order bytes of a cached chunk, for a random reader."""
        entry = self.cache.entry(self.source.key(coords))
        if entry is None or self.prefetch.sequential or coords in self.source.unloaded:
            return None
        return entry.c_bytes()

    async def _serve(self, plan: dict, out: np.ndarray, last: int) -> None:
        """Copy what ``plan`` reads into ``out``, which starts where the plan does."""
        # a stream's chunks, and those of large requests, are read directly; a random
        # reader's small reads are served from chunks kept decoded in the cache
        direct = self.direct.enabled and (self.prefetch.sequential or out.nbytes >= DIRECT_LEAST)
        rest = await self.direct.serve(plan, out) if direct else plan
        await self._copy(rest, out)
        self.prefetch.drop_behind(plan, last, self._planner.steps)

    async def read_planned(self, plan: dict[Coords, list[Copy]], out: np.ndarray) -> None:
        """Copy what ``plan`` selects of the chunks into ``out`` (raw elements): for views
        that lay the elements out otherwise (a tiled TIFF's tiles, which readers read
        whole: each chunk is decoded whole, never a part first and the rest after)."""
        if self.source.expired:
            await self.source.revalidate()
        await self._copy(plan, out, partial=False)

    def cached(self, coords: Coords) -> memoryview | None:
        """The C-order bytes of chunk ``coords`` if cached whole: use them before
        awaiting anything."""
        entry = self.cache.entry(self.source.key(coords))
        if entry is None or coords in self.source.unloaded:
            return None
        flat = entry.c_bytes()
        if flat is not None and len(flat) == self.meta.chunk_nbytes:
            self.cache.stats.hits += 1
            return flat
        return None

    async def _copy(
        self, plan: dict[Coords, list[Copy]], out: np.ndarray, partial: bool = True
    ) -> None:
        got = await self._gather(plan, partial)
        try:
            for coords, copies in plan.items():
                src = got.found[coords]
                for c in copies:
                    out[c.start : c.stop].reshape(c.box)[c.box_sel] = src[c.chunk_sel]
        finally:
            self._give_back(got)

    async def _gather(self, plan: dict, partial: bool = True) -> _Gathered:
        """The chunks ``plan`` reads: cached ones pinned, missing ones loaded (whole, or
        with ``partial`` in part where that costs less)."""
        if self.source.unloaded:  # chunks written in part, their other elements not loaded
            await self.source.complete(plan)
        got = _Gathered()
        missing = []
        for coords in plan:
            if (entry := self.cache.entry(self.source.key(coords))) is not None:
                entry.pins += 1
                self.cache.stats.hits += 1
                got.found[coords] = entry.value
                got.pinned.append(entry)
            else:
                missing.append(coords)
        if not missing:
            return got
        parts = await self.partial.plan(plan, missing) if partial else {}
        try:
            async with trio.open_nursery() as nursery:
                for coords in missing:
                    if coords not in parts:
                        nursery.start_soon(self._load, got, coords)
                for share in self.partial.shares(parts):
                    if share:
                        nursery.start_soon(self._load_parts, got, share)
            if got.errors:
                raise got.errors[0]
        except BaseException:
            self._give_back(got)
            raise
        self.prefetch.follow(list(parts))
        return got

    async def _load(self, got: _Gathered, coords: Coords) -> None:
        try:
            got.found[coords], entry = await self.source.chunk(coords)
            got.pinned.append(entry)
        except FsError as e:
            got.errors.append(e)

    async def _load_parts(self, got: _Gathered, share: dict[Coords, Part]) -> None:
        try:
            found = await self.partial.read(share, got.lent)
        except FsError as e:
            got.errors.append(e)
            return
        got.found.update(found)
        for coords in share.keys() - found.keys():  # decoded whole after all
            await self._load(got, coords)

    def _give_back(self, got: _Gathered) -> None:
        for entry in got.pinned:
            self.cache.unpin(entry)
        for buffer in got.lent:
            self.source.pool.give(buffer)

    async def _read_wide(self, first: int, last: int, out: np.ndarray) -> None:
        """Elements ``[first, last)`` over more than WIDE chunks, a piece at a time. Where
        the array's stored units are listed, ``out`` takes the fill value at once and only
        the chunks of stored (or written) units are read."""
        shape, chunks = self.meta.shape, self.meta.chunks
        stored = await self.source.listing.units()
        if stored is None:
            count = functools.partial(count_touched, shape, chunks)
            for lo, hi in pieces(first, last, count, WIDE):
                plan = self._planner.plan(lo, hi)
                await self.source.preload(list(plan))
                await self._serve(plan, out[lo - first : hi - first], hi)
            return
        try:
            await self.source.store.check_root()  # fill values only from a store that is there
        except StoreError as e:
            log.error("%s: %s", self.path, e)
            raise FsError(errno.EIO, str(e)) from e
        out[...] = self.source.fill_element
        select = stored.selector(self.source.grid.unit(c) for c in self._dirty_chunks())

        def count(lo: int, hi: int) -> int:
            return sum(map(select.count, touched_ranges(shape, chunks, lo, hi)))

        for lo, hi in pieces(first, last, count, WIDE):
            if plan := plan_read(shape, chunks, lo, hi, select.chunks):
                await self._serve(plan, out[lo - first : hi - first], hi)

    def _dirty_chunks(self) -> list[Coords]:
        """Chunks written but not stored yet (none for a read-only array)."""
        return []
