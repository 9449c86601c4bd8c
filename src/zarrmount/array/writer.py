"""Writes to an array: read-modify-write of chunks in the cache, written back later.

A write patches decoded chunks in the cache and marks them dirty; write-back encodes them
in worker threads and stores them, one object per chunk (or per shard, whose inner chunks
are the unit in the cache). While a chunk or shard is being written back it is *busy*:
writers wait, so an encoder never sees a half-applied write.
"""

from __future__ import annotations

import errno
import functools
import logging
import math
import os
import time
from collections.abc import Hashable

import numpy as np
import trio

from zarrmount.array.grid import WIDE, Coords
from zarrmount.array.reader import ArrayReader
from zarrmount.array.refusals import Refusals, Refused, kind_of
from zarrmount.array.write_behind import WriteBehind
from zarrmount.cache.chunks import WRITE_BACKS
from zarrmount.codecs.base import is_fill
from zarrmount.errors import FsError
from zarrmount.journal import Journal, identity
from zarrmount.layout import Copy, count_touched, pieces

log = logging.getLogger(__name__)

# The share of the cache's budget an array's write-backs may hold in encoded units.
ENCODED_SHARE = 8


def _errno_of(error: BaseException) -> int:
    cause = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return errno.ENOSPC
        cause = cause.__cause__
    return errno.EIO


async def whole_elements(read, itemsize: int, offset: int, data: bytes) -> np.ndarray:
    """``data`` written at ``offset`` widened to whole elements: partial elements at the
    edges are completed with the bytes ``read(offset, size)`` gives (only the edge elements
    are partly overwritten). The result starts at element ``offset // itemsize``."""
    isz, end = itemsize, offset + len(data)
    src = np.frombuffer(data, dtype=np.uint8)
    head = offset % isz
    if not head and not end % isz:
        return src
    first, last = offset // isz, -(-end // isz)
    merged = np.empty((last - first) * isz, dtype=np.uint8)
    partial = {first} if head else set()
    if end % isz:
        partial.add(last - 1)
    for element in partial:
        start = (element - first) * isz
        merged[start : start + isz] = np.frombuffer(await read(element * isz, isz), np.uint8)
    merged[head : head + len(data)] = src
    return merged


class _Waiting:
    """A write-back of one unit waiting for its turn, and then its outcome (an errno);
    ``ended`` is False when its caller was cancelled before it had one."""

    __slots__ = ("done", "ended", "error")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.ended = False
        self.error: int | None = None


class _Held:
    """A chunk a write will patch: the cache's writable copy (no ``buffer``), or a private
    one in a pool ``buffer``, made at the unit's ``generation``, that enters the cache
    only once the write is accepted (``unloaded``: begun without loading, a mask to keep)."""

    __slots__ = ("coords", "chunk", "buffer", "generation", "unloaded")

    def __init__(
        self,
        coords: Coords,
        chunk: np.ndarray,
        buffer: np.ndarray | None = None,
        generation: int = 0,
        unloaded: bool = False,
    ) -> None:
        self.coords = coords
        self.chunk = chunk
        self.buffer = buffer
        self.generation = generation
        self.unloaded = unloaded


class ArrayWriter(ArrayReader):
    """An array read and written; the owner of its dirty chunks in the cache."""

    writable = True

    def __init__(
        self,
        *args,
        write_empty_chunks: bool = False,
        dirty_limit: int,
        refusals: Refusals,
        journal: Journal | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.write_empty_chunks = write_empty_chunks
        self.journal = journal  # where each write goes before it is acknowledged
        self.identity = identity(self.meta.dtype.str, self.meta.shape)
        self.dirty_limit = dirty_limit
        self.refusals = refusals  # the mount's count of refused writes
        self.mtime_ns = time.time_ns()
        self.error: int | None = None  # from a failed write-back, for the next fsync/close
        self.failed_at: float | None = None  # when a write-back last failed (retry pacing)
        self._unsynced: set[str] = set()  # store keys written since the last sync
        self.behind = WriteBehind(self)
        self._waiting: dict[Coords, _Waiting] = {}  # write-backs waiting for a turn, by unit
        self._turns = trio.CapacityLimiter(self._write_back_width())  # of this array's
        self.steps = self._planner.steps  # flat C-order index steps of each axis

    # -- writes ------------------------------------------------------------------

    async def write(self, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset``; the size never changes (EFBIG past it). A piece
        at a time, each applied only once accepted (journaled, within the dirty limit):
        a refusal after the first piece is a short write of the pieces before it."""
        end = offset + len(data)
        if end > self.size:
            raise FsError(errno.EFBIG, f"write of {len(data)} bytes at {offset} past the end")
        if not data:
            return 0
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        src = (await whole_elements(self.read, isz, offset, data)).view(self.source.raw)
        count = functools.partial(count_touched, self.meta.shape, self.meta.chunks)
        view, accepted, touched = memoryview(data), offset, []
        try:
            for lo, hi in pieces(first, last, count, WIDE):  # bounded plans over tiny chunks
                upto = min(end, hi * isz)
                await self._relieve()
                plan = self._planner.plan(lo, hi)
                held = await self._hold(plan)
                self._accept(held, accepted, view[accepted - offset : upto - offset])
                self._apply(held, plan, src[lo - first : hi - first])
                touched += plan
                accepted = upto
        except (Refused, FsError) as e:
            self._refused(e, offset, accepted, end)
        else:
            self.refusals.accepted()
        self.mtime_ns = time.time_ns()
        self.behind.observe(offset, accepted, touched)
        return accepted - offset

    async def _relieve(self) -> None:
        """Back-pressure: above the dirty limit, the oldest dirty chunks are stored first;
        the write is refused when they cannot be."""
        failed = await self.cache.relieve(self.dirty_limit)
        if failed is not None:
            raise Refused("dirty data at its limit cannot be stored", failed, os.strerror(failed))

    def _refused(self, error: Refused | FsError, offset: int, accepted: int, end: int) -> None:
        """Counted and logged; raised again when nothing of the write was accepted."""
        if not isinstance(error, Refused):  # a chunk it patches could not be read
            error = Refused("a chunk it writes could not be read", error.errno, str(error))
        self.refusals.refused(error, self.path, end - accepted, accepted - offset)
        if accepted == offset:
            raise FsError(error.errno, str(error)) from error

    async def _hold(self, plan: dict[Coords, list[Copy]]) -> list[_Held]:
        """Writable copies of the chunks of ``plan``, all still good after the last await
        (none of their units being written back, none replaced): what a write applies
        with no await after its journal entry. Its private copies go back to the pool
        when it is refused or cancelled."""
        while True:
            held: list[_Held] = []
            try:
                for coords, copies in plan.items():
                    held.append(await self._writable(coords, copies))
            except BaseException:
                self._release_held(held)
                raise
            if all(self._still_good(h) for h in held):
                return held
            self._release_held(held)  # the cache moved on while we waited: again

    async def _writable(self, coords: Coords, copies: list[Copy]) -> _Held:
        """The chunk's writable copy in the cache, or a private one made for this write
        (loaded and copied, or fill), waiting out write-backs. A private copy enters the
        cache only when the write is accepted: until then readers and write-backs see the
        chunk as it was."""
        source = self.source
        key, unit = source.key(coords), source.grid.unit(coords)
        written = sum(math.prod(s.stop - s.start for s in c.chunk_sel) for c in copies)
        while True:
            await source.states.idle(unit)
            entry = self.cache.entry(key)
            if entry is not None and entry.mutable:
                return _Held(coords, entry.value)
            inside = source.grid.inside(coords)
            old, pinned = None, None
            unloaded = written < inside and self._begins_unloaded(key, copies)
            if written < inside and not unloaded:  # partly overwritten: patch what is there
                old, pinned = await source.chunk(coords)
            try:
                if source.states.busy(unit):
                    continue  # a write-back started while we loaded: start over
                entry = self.cache.entry(key)
                if entry is not None and entry.mutable:
                    continue  # another writer made its copy first: use that one
                return self._private(coords, old, inside < math.prod(self.meta.chunks), unloaded)
            finally:
                self.cache.unpin(pinned)

    def _private(self, coords: Coords, old: np.ndarray | None, edge: bool, unloaded: bool) -> _Held:
        """A copy of the chunk in a pool buffer: ``old``'s elements, else fill where the
        write leaves any (an edge chunk's padding, or a chunk begun unloaded)."""
        source = self.source
        self.cache.reserve(self.meta.chunk_nbytes)
        buffer = source.pool.take(self.meta.chunk_nbytes)
        chunk = buffer.view(source.raw).reshape(self.meta.chunks)
        if old is not None:
            chunk[...] = old
        elif edge or unloaded:
            chunk[...] = source.fill
        generation = source.states.generation(source.grid.unit(coords))
        return _Held(coords, chunk, buffer, generation, unloaded)

    def _still_good(self, held: _Held) -> bool:
        """``held`` may take the write now: its unit is not being written back, and the
        cache's copy is the one held, or (a private copy) the cache has none and the unit
        was not stored since the copy was made."""
        source = self.source
        unit = source.grid.unit(held.coords)
        if source.states.busy(unit):
            return False
        entry = self.cache.entry(source.key(held.coords))
        if held.buffer is None:
            return entry is not None and entry.value is held.chunk
        mine = entry is None or not entry.mutable
        return mine and source.states.generation(unit) == held.generation

    def _release_held(self, held: list[_Held]) -> None:
        for h in held:
            if h.buffer is not None:
                self.source.pool.give(h.buffer)

    def _begins_unloaded(self, key: Hashable, copies: list[Copy]) -> bool:
        """A write from the chunk's first element on, of a chunk nobody holds: a writer
        going through it in order, whose next writes fill the rest (array/unloaded.py)."""
        if self.cache.entry(key) is not None or self.cache.loading(key):
            return False  # held (clean) or on its way: patched as it is
        return any(all(s.start == 0 for s in c.chunk_sel) for c in copies)

    def _accept(self, held: list[_Held], offset: int, data: memoryview) -> None:
        """Journal a piece of a write before it is applied (no await between the two, so
        entries are in the order writes were applied); refused: its copies go back."""
        if self.journal is None:
            return
        try:
            self.journal.append(self.path, self.identity, offset, data)
        except OSError as e:  # not applied, so a crash loses nothing acknowledged
            self._release_held(held)
            raise Refused(kind_of("the journal refused it", e), _errno_of(e), str(e)) from e

    def _apply(self, held: list[_Held], plan: dict[Coords, list[Copy]], part: np.ndarray) -> None:
        """Copy an accepted piece into its chunks, each then dirty, the writer its owner."""
        source = self.source
        for h, copies in zip(held, plan.values(), strict=True):
            coords, chunk = h.coords, h.chunk
            if h.unloaded:
                source.unloaded.begin(coords, self.meta.chunks, source.grid.extent(coords))
            for c in copies:
                chunk[c.chunk_sel] = part[c.start : c.stop].reshape(c.box)[c.box_sel]
                source.unloaded.written(coords, c.chunk_sel)
            self.cache.put_dirty(source.key(coords), chunk, chunk.nbytes, self, h.buffer)

    def _dirty_chunks(self) -> list[Coords]:
        return [key[1] for key in self.cache.dirty(owner=self)]

    # -- write-back --------------------------------------------------------------

    async def write_back_key(self, key: Hashable) -> int | None:
        return await self.write_back_unit(self.source.grid.unit(key[1]))

    async def flush(self) -> None:
        """Store every dirty chunk; raise the first write-back error."""
        units = {self.source.grid.unit(c) for c in self._dirty_chunks()}
        if len(units) == 1:
            await self.write_back_unit(units.pop())
        elif units:
            async with trio.open_nursery() as nursery:
                for unit in units:
                    nursery.start_soon(self.write_back_unit, unit)
        if self.error is not None:
            err, self.error = self.error, None
            raise FsError(err, f"write-back of {self.path} failed")

    async def sync(self) -> None:
        """fsync: store every dirty chunk, then make durable every object stored since
        the last sync, written back on pressure or by the timer included."""
        await self.flush()
        keys, self._unsynced = self._unsynced, set()
        if not keys:
            return
        try:
            await self.source.store.sync(sorted(keys))
        except Exception as e:
            self._unsynced |= keys  # the next fsync tries them all again
            log.error("fsync of %s failed: %s", self.path, e)
            raise FsError(_errno_of(e), f"fsync of {self.path} failed") from e
        self.source.revalidation.after_sync()

    async def write_back_unit(self, unit: Coords) -> int | None:
        """Store the dirty chunks of ``unit``; the errno when storing failed, else None.

        One write-back of a unit at a time waits for its turn (``WRITE_BACKS``), and not
        holding one: a pressure relief names every dirty chunk of a shard, several writers
        relieve at once, and each holding a turn only to find the unit stored kept other
        units waiting. A caller that finds one waiting takes its outcome: it stores what
        is dirty when it begins; when that caller is cancelled first, it waits its own turn."""
        waiting = self._waiting.get(unit)
        if waiting is not None:
            await waiting.done.wait()
            if waiting.ended:
                return waiting.error
            return await self.write_back_unit(unit)
        waiting = self._waiting[unit] = _Waiting()
        try:
            waiting.error = await self._write_back_in_turn(unit)
            waiting.ended = True
        finally:
            if self._waiting.get(unit) is waiting:
                del self._waiting[unit]
            waiting.done.set()
        return waiting.error

    def _write_back_width(self) -> int:
        """This array's write-backs at once: the cache's, as many as hold their encoded
        units (a shard's old one and its new one) within an ENCODED_SHARE of the cache's
        budget, and never fewer than a local store's."""
        grid = self.source.grid
        unit = self.meta.chunk_nbytes * math.prod(grid.per_unit)
        held = 2 * unit if grid.sharding is not None else unit
        fit = self.cache.capacity // ENCODED_SHARE // max(held, 1)
        return min(int(self.cache.write_backs.total_tokens), max(WRITE_BACKS, fit))

    async def _write_back_in_turn(self, unit: Coords) -> int | None:
        states = self.source.states
        await states.idle(unit)
        async with self._turns, self.cache.write_backs:
            await states.idle(unit)
            del self._waiting[unit]  # chunks dirtied from now on need a write-back of their own
            chunks = self._dirty_of(unit)
            if not chunks:
                return None
            return await self._store_unit(unit, chunks)

    def _dirty_of(self, unit: Coords) -> list[Coords]:
        return [c for c in self._dirty_chunks() if self.source.grid.unit(c) == unit]

    async def _completed(self, unit: Coords, chunks: list[Coords]) -> list[Coords]:
        """``chunks`` with those begun unloaded completed from the store, before the unit
        is busy (a shard's index read waits while it is). Completing awaits, and another
        write-back of the unit may begin meanwhile: once that one ended, the unit's chunks
        still dirty instead (two at once would both mark the unit busy)."""
        states = self.source.states
        while chunks:
            await self.source.complete(chunks)
            if not states.busy(unit):
                return chunks  # no await from here until the unit is busy
            await states.idle(unit)
            chunks = self._dirty_of(unit)
        return chunks

    async def _store_unit(self, unit: Coords, chunks: list[Coords]) -> int | None:
        source = self.source
        store_key = source.grid.key(unit)
        try:
            chunks = await self._completed(unit, chunks)
            if not chunks:
                return None
            with source.states.rewriting(unit):
                values = {c: self.cache.peek(source.key(c)) for c in chunks}
                if source.grid.sharding is None:
                    raw = await source.decoders.run(self._encode, values[unit])
                else:
                    raw = await source.shards.build(unit, values, self._encode)
                await self._store(store_key, raw)
                source.shards.forget(store_key)
                source.listing.note_stored(unit)
                await source.stored(unit, store_key, raw)
                for coords in chunks:
                    self.cache.mark_clean(source.key(coords))
            self.failed_at = None
            return None
        except Exception as e:  # store, codec or OS errors alike: keep the data, report
            self.error = _errno_of(e)
            self.failed_at = time.monotonic()
            log.error("write-back of %s failed (kept in memory, will retry): %s", store_key, e)
            return self.error

    def _encode(self, chunk: np.ndarray) -> bytes | None:
        """The stored form of ``chunk`` (in a decoding thread); ``None`` when it is all fill
        and should not exist."""
        if not self.write_empty_chunks and is_fill(chunk, self.source.fill_element):
            return None
        return self.source.pipeline.encode(chunk)

    async def _store(self, key: str, raw: bytes | None) -> None:
        store = self.source.store
        if raw is None:
            await store.delete(key)
        else:
            await store.set(key, raw)
        self._unsynced.add(key)
