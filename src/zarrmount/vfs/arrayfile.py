"""Reads of an array's raw C-order file: plan, fetch and decode chunks, copy slices."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import math
import weakref
from typing import NamedTuple

import numpy as np
import trio

from zarrmount.cache import BufferPool, ChunkCache, Loaded
from zarrmount.cache.prefetch import ReadAhead
from zarrmount.codecs import ChunkDecodeError, Pipeline
from zarrmount.codecs.base import Reader, Unsupported, raw_dtype
from zarrmount.codecs.v3 import MISSING
from zarrmount.format.model import ArrayNode
from zarrmount.layout import (
    Planner,
    chunks_touched,
    count_touched,
    pieces,
    plan_read,
    touched_ranges,
)
from zarrmount.memory import aligned_empty, scratch
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.vfs.background import Background
from zarrmount.vfs.errors import FsError
from zarrmount.vfs.stored_units import StoredUnits, list_units

log = logging.getLogger(__name__)

# A missing chunk is a zero-stride view of the fill value: it costs the cache only its
# entry (measured: about 340 bytes with 1-D coordinates, 380 with 2-D).
_FILL_ENTRY_BYTES = 512
# The cached "index" of a shard that does not exist: every inner chunk reads as fill.
_NO_SHARD = np.empty(0, dtype=np.uint64)


# The worker-thread scratch slot for stored chunk bytes: the kernel copies file data into
# misaligned memory several times slower.
STORED = "stored"
# Chunk buffers made ready for an array's first read: a first request of a streaming
# reader touches one row of chunks, often four to sixteen.
WARM_CHUNKS = 16
# A read whose part of an uncached chunk costs at most 1/PART_FRACTION of decoding it
# whole gets just that part decoded (local stores, codecs that allow it: stored as is,
# blosc blocks, a zstd frame's first bytes), while the whole chunk follows into the cache
# in the background: a first read, or a random one, costs a block's decoding instead of a
# chunk's.
PART_FRACTION = 8
# Parts one thread reads before a second one helps: handing work to another thread, and
# the two threads' turns at the interpreter lock, cost more than a few parts (a first read
# of four parts: 3.6 ms in one thread, 4.4 ms in two).
PARTS_PER_THREAD = 8
# At most this many such background loads pending per file: a random reader touching
# many chunks queues their decoding (as it would have done in the foreground), but not
# without bound; a chunk skipped is read in part again, and may follow next time.
FOLLOW_LIMIT = 64
# A request touching more chunks than this is served a piece of at most this many at a
# time (its plan, tasks and pins stay small, and other requests get their turns); over
# an array whose stored chunks are listed, every absent chunk takes the fill value at once.
WIDE = 256
# How long a listing of an array's stored chunks is trusted: writers other than this
# mount are noticed within this time.
LISTING_TTL_S = 30.0


class _Part(NamedTuple):
    """A read of bytes ``[lo, hi)`` of a chunk from part of its stored value: all of the
    value under ``key``, or for an inner chunk ``length`` bytes from ``offset`` in its
    shard (``shard`` at ``generation``)."""

    key: str
    lo: int
    hi: int
    offset: int = 0
    length: int | None = None
    shard: tuple[int, ...] | None = None
    generation: int = 0


def _read_within(read: Reader, base: int, size: int, at: int, n: int) -> bytes:
    """Read from an inner chunk's own bytes, ``size`` of them from ``base``."""
    return read(base + at, max(0, min(n, size - at)))


class _Counted:
    """A reader that counts the bytes it returns (the store statistics' get bytes)."""

    def __init__(self, read: Reader) -> None:
        self.read, self.nbytes = read, 0

    def __call__(self, at: int, n: int) -> bytes:
        got = self.read(at, n)
        self.nbytes += len(got)
        return got


class ArrayFile:
    """One array shown as a file; shared by every handle open on it."""

    def __init__(
        self,
        node: ArrayNode,
        pipeline: Pipeline,
        store: AsyncStore,
        cache: ChunkCache,
        decode_limiter: trio.CapacityLimiter,
        background: Background,
        pool: BufferPool,
    ) -> None:
        self.path = node.path
        self.meta = meta = node.meta
        self.pipeline = pipeline
        self.store = store
        self.cache = cache
        self.decode_limiter = decode_limiter
        self.size = meta.nbytes
        self._raw = raw_dtype(meta.itemsize)
        self._fill_element = meta.fill_value.reshape(()).view(self._raw)
        self._fill = np.broadcast_to(self._fill_element, meta.chunks)
        self._prefix = node.data_prefix
        self._sharding = pipeline.sharding
        self._per_unit = (
            (1,) * len(meta.shape) if self._sharding is None else self._sharding.chunks_per_shard
        )
        self._read_ahead = ReadAhead(self.size, cache.capacity // 4)
        self._planner = Planner(meta.shape, meta.chunks)
        self._by_parts = pipeline.decode_range is not None and store.store.reads_parts
        self._chunk_steps = [math.prod(meta.chunks[i + 1 :]) for i in range(len(meta.chunks))]
        self._following = 0  # background loads under way
        self.background = background
        self.pool = pool
        # Units (chunks, or shards) being written back, and how often each was rewritten:
        # only writable files fill these, but readers of shards must respect them.
        self._busy: dict[tuple[int, ...], trio.Event] = {}
        self._generation: dict[tuple[int, ...], int] = {}
        self._stores = 0  # write-backs begun: a listing they overlapped may miss a key
        # listings still in use (cached, or held by a read): each learns what is stored
        self._listings: weakref.WeakSet[StoredUnits] = weakref.WeakSet()

    async def warm_up(self, budget: int) -> int:
        """Put up to ``WARM_CHUNKS`` chunk buffers, within ``budget`` bytes, in the pool,
        and run the codecs once in each decoding thread, its scratch buffer made; returns
        the bytes given. Failures only cost the warm start."""
        nbytes = self.meta.chunk_nbytes
        count = min(budget // nbytes, WARM_CHUNKS)
        if count < 1:
            return 0
        threads = int(self.decode_limiter.total_tokens)
        try:
            async with trio.open_nursery() as nursery:
                for i in range(threads):
                    share = count // threads + (i < count % threads)
                    nursery.start_soon(
                        functools.partial(
                            trio.to_thread.run_sync,
                            self._warm_up,
                            share,
                            limiter=self.decode_limiter,
                        )
                    )
        except Exception as e:  # never worth more than a line: reads will meet it again
            log.debug("warm-up of %r: %s", self.path, e)
        return count * nbytes

    def _warm_up(self, count: int) -> None:
        nbytes = self.meta.chunk_nbytes
        buffers = [self.pool.take(nbytes) for _ in range(count)]
        try:
            scratch(STORED, nbytes)
            if buffers:  # for shards: their inner chunks' codecs
                stored = self.pipeline.encode(self._fill)
                self.pipeline.decode(stored, buffers[0])
                if self._by_parts:
                    whole = memoryview(stored)
                    with contextlib.suppress(Unsupported):
                        self.pipeline.decode_part(
                            lambda at, n: whole[at : at + n], len(stored), 0, 1, buffers[0]
                        )
        finally:
            for buffer in buffers:
                self.pool.give(buffer)

    async def _idle(self, unit: tuple[int, ...]) -> None:
        while (event := self._busy.get(unit)) is not None:
            await event.wait()

    def _key(self, coords: tuple[int, ...]) -> str:
        return self._prefix + self.meta.key_encoding.key(coords)

    def _decode_into(self, raw: bytes | memoryview) -> Loaded:
        """Decode in a worker thread into a pool buffer (the chunk's home while cached)."""
        buffer = self.pool.take(self.meta.chunk_nbytes)
        chunk = self.pipeline.decode(raw, buffer)
        return Loaded(chunk.view(self._raw), chunk.nbytes, buffer)

    def _read_decode(self, key: str) -> tuple[Loaded | None, int | None]:
        """Local stores, in one worker thread: read into this thread's scratch, decode;
        chunks stored as they are read go straight into their pool buffer instead."""
        nbytes = self.meta.chunk_nbytes
        buffer = self.pool.take(nbytes) if self.pipeline.passthrough else None
        direct: list[bool] = []

        def target(size: int) -> np.ndarray:
            if buffer is not None and size == nbytes:
                direct.append(True)
                return buffer
            return scratch(STORED, size)

        raw = self.store.store.read_into(key, target)
        if direct and raw is not None and len(raw) == nbytes:
            return Loaded(buffer.view(self._raw).reshape(self.meta.chunks), nbytes, buffer), nbytes
        if buffer is not None:
            self.pool.give(buffer)
        if raw is None:
            return None, None
        return self._decode_into(raw), len(raw)

    async def _decode(self, raw: bytes) -> Loaded:
        return await trio.to_thread.run_sync(self._decode_into, raw, limiter=self.decode_limiter)

    def _locate(self, coords: tuple[int, ...]) -> tuple[str, tuple[int, ...] | None]:
        """The store key holding ``coords`` and, for shards, its place inside the shard."""
        if self._sharding is None:
            return self._key(coords), None
        per_shard = self._sharding.chunks_per_shard
        return self._key(self._shard_of(coords)), tuple(
            c % n for c, n in zip(coords, per_shard, strict=True)
        )

    def _shard_of(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        per_shard = self._sharding.chunks_per_shard
        return tuple(c // n for c, n in zip(coords, per_shard, strict=True))

    def _unit(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The grid coordinates of the stored object holding ``coords`` (chunk or shard)."""
        return coords if self._sharding is None else self._shard_of(coords)

    async def _load(self, coords: tuple[int, ...]) -> Loaded:
        """Fetch and decode one read unit: a chunk, or an inner chunk of a shard."""
        key, local = self._locate(coords)
        try:
            if local is None and not self.store.store.remote:
                loaded, nbytes = await trio.to_thread.run_sync(
                    self._read_decode, key, limiter=self.decode_limiter
                )
                self.store.count_get(nbytes)
                return loaded or await self._absent()
            if local is None:
                raw = await self.store.get(key)
            else:
                raw = await self._fetch_inner(key, local, self._shard_of(coords))
            if raw is None:
                return await self._absent()
            return await self._decode(raw)
        except (StoreError, ChunkDecodeError) as e:
            log.error("chunk %s: %s", key, e)
            raise FsError(errno.EIO, f"chunk {key}: {e}") from e

    async def _absent(self) -> Loaded:
        """An absent chunk reads as the fill value, but only from a store still there: a
        deleted bucket or an unmounted disk must not read as fill values (StoreError)."""
        await self.store.check_root()
        return Loaded(self._fill, _FILL_ENTRY_BYTES)

    async def _fetch_inner(
        self, key: str, local: tuple[int, ...], shard: tuple[int, ...]
    ) -> bytes | None:
        """The bytes of one inner chunk: a range request located by the (cached) shard index.

        Index and range must come from the same version of the shard: a fetch that
        overlapped a rewrite of the shard starts over.
        """
        while True:
            await self._idle(shard)
            generation = self._generation.get(shard, 0)
            raw = await self._fetch_inner_once(key, local)
            if shard not in self._busy and self._generation.get(shard, 0) == generation:
                return raw

    async def _fetch_inner_once(self, key: str, local: tuple[int, ...]) -> bytes | None:
        index = await self.cache.get((self.path, "index", key), lambda: self._load_index(key))
        if index.size == 0:
            return None
        found = self._inner_range(index, local)
        if found is None:
            return None
        offset, length = found
        raw = await self.store.get_range(key, offset, length)
        if raw is None or len(raw) != length:
            raise ChunkDecodeError(f"shard ends before inner chunk {list(local)}")
        return raw

    async def _load_index(self, key: str) -> tuple[np.ndarray, int]:
        spec = self._sharding
        n = spec.index_nbytes
        raw = await self.store.get_range(key, -n if spec.at_end else 0, n)
        if raw is None:
            return _NO_SHARD, _FILL_ENTRY_BYTES
        if len(raw) != n:
            raise ChunkDecodeError(f"shard index has {len(raw)} bytes, expected {n}")
        index = await trio.to_thread.run_sync(spec.decode_index, raw, limiter=self.decode_limiter)
        return index, index.nbytes

    async def chunk(self, coords: tuple[int, ...]) -> tuple[np.ndarray, object]:
        """The decoded chunk at ``coords`` as raw elements, from the cache when there,
        with its cache entry pinned: pass that to ``cache.unpin`` when done with it."""
        return await self.cache.get_pinned((self.path, coords), lambda: self._load(coords))

    async def _chunks(self, plan: dict) -> tuple[dict, list, list]:
        """The chunks ``plan`` reads, and what to give back once copied: cache entries
        pinned for them (pins keep a chunk and its buffer in place while other loads are
        awaited), and pool buffers lent to chunks decoded only in part."""
        found: dict[tuple[int, ...], np.ndarray] = {}
        pinned: list = []
        missing = []
        for coords in plan:
            if (entry := self.cache.entry((self.path, coords))) is not None:
                entry.pins += 1
                self.cache.stats.hits += 1
                found[coords] = entry.value
                pinned.append(entry)
            else:
                missing.append(coords)
        lent: list = []
        if not missing:
            return found, pinned, lent
        parts = await self._parts(plan, missing)
        errors: list[FsError] = []

        async def load(coords: tuple[int, ...]) -> None:
            try:
                found[coords], entry = await self.chunk(coords)
                pinned.append(entry)
            except FsError as e:
                errors.append(e)

        async def load_parts(share: dict[tuple[int, ...], _Part]) -> None:
            try:
                got = await trio.to_thread.run_sync(self._read_parts, share, lent)
            except FsError as e:
                errors.append(e)
                return
            for coords, part in share.items():
                if part.shard is not None and self._changed(part.shard, part.generation):
                    got.pop(coords, None)  # the shard was rewritten meanwhile
            self.cache.stats.partial += len(got)
            for coords, (chunk, nread) in got.items():
                self.store.count_get(nread)
                found[coords] = chunk
            for coords in share.keys() - got.keys():  # decoded whole after all
                await load(coords)

        try:
            async with trio.open_nursery() as nursery:
                for coords in missing:
                    if coords not in parts:
                        nursery.start_soon(load, coords)
                # shared among the decoding threads, idle on a first read, when there are
                # enough parts to be worth handing to a second thread
                threads = min(
                    int(self.decode_limiter.total_tokens), -(-len(parts) // PARTS_PER_THREAD)
                )
                shares = [dict(list(parts.items())[i::threads]) for i in range(threads)]
                for share in shares:
                    if share:
                        nursery.start_soon(load_parts, share)
            if errors:
                raise errors[0]
        except BaseException:
            self._give_back(pinned, lent)
            raise
        for coords in parts:
            if self._following < FOLLOW_LIMIT and not self.cache.loading((self.path, coords)):
                self._following += self.background.start_soon(self._follow, coords)
        return found, pinned, lent

    async def _parts(self, plan: dict, missing: list) -> dict[tuple[int, ...], _Part]:
        """Where to read those ``missing`` chunks that cost less read in part than whole
        (none already loading or being written back)."""
        if not self._by_parts:
            return {}
        limit = self.meta.chunk_nbytes // PART_FRACTION
        isz, steps = self.meta.itemsize, self._chunk_steps
        parts = {}
        for coords in missing:
            if self.cache.loading((self.path, coords)) or coords in self._busy:
                continue
            lo, hi = self.meta.chunk_nbytes, 0
            for c in plan[coords]:
                first = sum(s.start * n for s, n in zip(c.chunk_sel, steps, strict=True))
                last = sum((s.stop - 1) * n for s, n in zip(c.chunk_sel, steps, strict=True))
                lo, hi = min(lo, first * isz), max(hi, (last + 1) * isz)
            if self.pipeline.part_cost(lo, hi) > limit:
                continue
            if self._sharding is None:
                parts[coords] = _Part(self._key(coords), lo, hi)
            elif (inner := await self._inner_place(coords)) is not None:
                parts[coords] = inner._replace(lo=lo, hi=hi)
        return parts

    async def _inner_place(self, coords: tuple[int, ...]) -> _Part | None:
        """Where an inner chunk lies in its shard, by the shard's (cached) index; None when
        the normal path had better handle it (no shard, no such chunk, a shard being
        rewritten, an index that fails: that path reports it)."""
        key, local = self._locate(coords)
        shard = self._shard_of(coords)
        if shard in self._busy:
            return None
        generation = self._generation.get(shard, 0)
        try:
            index = await self.cache.get((self.path, "index", key), lambda: self._load_index(key))
        except (StoreError, ChunkDecodeError):
            return None
        if index.size == 0 or self._changed(shard, generation):
            return None
        try:
            found = self._inner_range(index, local)
        except ChunkDecodeError:
            return None
        if found is None:
            return None
        return _Part(key, 0, 0, *found, shard, generation)

    def _inner_range(self, index: np.ndarray, local: tuple[int, ...]) -> tuple[int, int] | None:
        """``(offset, length)`` of an inner chunk in its shard; None when it is absent. An
        entry longer than any encoding of the chunk is damage, not a request to make."""
        offset, length = (int(v) for v in index[local])
        if offset == MISSING and length == MISSING:
            return None
        if length > self._sharding.inner_stored or offset >= 1 << 62:
            raise ChunkDecodeError(
                f"shard index says inner chunk {list(local)} has {length} bytes at {offset}"
            )
        return offset, length

    def _changed(self, shard: tuple[int, ...], generation: int) -> bool:
        return shard in self._busy or self._generation.get(shard, 0) != generation

    def _read_parts(self, parts: dict, lent: list) -> dict[tuple[int, ...], tuple[np.ndarray, int]]:
        """In a worker thread: decode each part into a pool buffer (lent until copied);
        returns each chunk so read, with the stored bytes read for it. Chunks that are
        missing, or whose stored form only decodes whole, are left out."""
        nbytes = self.meta.chunk_nbytes
        got = {}
        for coords, part in parts.items():
            buffer = self.pool.take(nbytes)
            try:
                use = functools.partial(self._decode_part, part, buffer)
                nread = self.store.store.read_ranges(part.key, use)
            except (StoreError, ChunkDecodeError) as e:
                self.pool.give(buffer)
                log.error("chunk %s: %s", part.key, e)
                raise FsError(errno.EIO, f"chunk {part.key}: {e}") from e
            if nread:
                lent.append(buffer)
                got[coords] = buffer.view(self._raw).reshape(self.meta.chunks), nread
            else:
                self.pool.give(buffer)
        return got

    def _decode_part(self, part: _Part, buffer: np.ndarray, size: int, read: Reader) -> int | None:
        """Decode ``part`` from a stored value of ``size`` bytes; the bytes it read, or
        None when it decodes only whole."""
        if part.length is not None:  # an inner chunk: its own bytes within the shard
            if part.offset + part.length > size:
                raise ChunkDecodeError("shard ends before inner chunk")
            base, size = part.offset, part.length
            read = functools.partial(_read_within, read, base, size)
        counted = _Counted(read)
        try:
            self.pipeline.decode_part(counted, size, part.lo, part.hi, buffer)
        except Unsupported:
            return None
        return counted.nbytes

    async def _follow(self, coords: tuple[int, ...]) -> None:
        """Load a chunk into the cache in the background (read in part, or read ahead)."""
        try:
            await self._prefetch_one(coords)
        finally:
            self._following -= 1

    def _give_back(self, pinned: list, lent: list) -> None:
        for entry in pinned:
            self.cache.unpin(entry)
        for buffer in lent:
            self.pool.give(buffer)

    async def _prefetch(self, first: int, last: int) -> None:
        """Load the chunks of elements ``[first, last)`` into the cache, in walk order: at
        most WIDE of them, and at most WIDE background loads of this file under way (a
        reader faster than the store must not pile up tasks)."""
        count = functools.partial(count_touched, self.meta.shape, self.meta.chunks)
        last = next(pieces(first, last, count, WIDE), (first, first))[1]
        for coords in chunks_touched(self.meta.shape, self.meta.chunks, first, last):
            if self._following >= WIDE:
                return
            key = (self.path, coords)
            if self.cache.peek(key) is None and not self.cache.loading(key):
                self._following += self.background.start_soon(self._follow, coords)

    async def _prefetch_one(self, coords: tuple[int, ...]) -> None:
        # A failed load was logged; the reader meets the same error if it gets there.
        with contextlib.suppress(FsError):
            _, entry = await self.chunk(coords)
            self.cache.unpin(entry)

    def _drop_behind(self, plan: dict, last: int) -> None:
        """A streaming reader never comes back (the page cache serves rereads): give the
        buffers of chunks it has read to the end back to the pool, while they are warm."""
        shape, chunks, steps = self.meta.shape, self.meta.chunks, self._planner.steps
        for coords in plan:
            end = 0
            for c, n, s, step in zip(coords, chunks, shape, steps, strict=True):
                end += (min((c + 1) * n, s) - 1) * step
            if end < last:
                self.cache.release((self.path, coords))

    async def read(
        self, offset: int, size: int, reply: np.ndarray | None = None
    ) -> memoryview | bytes:
        """Bytes ``[offset, offset + size)`` of the file, short at the end of file.

        ``reply``, a page-aligned uint8 buffer the caller recycles, receives the bytes
        when it is large enough (fresh memory per request is slow on these machines).
        The result may be a view of a cached chunk: use it before awaiting anything.
        """
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        ahead = self._read_ahead.observe(offset, end)
        if ahead is not None:
            self.background.start_soon(self._prefetch, ahead[0] // isz, -(-ahead[1] // isz))
        skip = offset - first * isz
        row = self._planner.one_chunk_row(first, last)
        entry = None if row is None else self.cache.entry((self.path, row[0]))
        if (
            entry is not None
            and not self._read_ahead.sequential
            and (flat := entry.c_bytes()) is not None
        ):
            # Most random reads: one row of a cached chunk, whose bytes are the reply. The
            # caller sends it before any other task runs, and only tasks change cached
            # chunks or give their buffers back (a sequential reader's drop-behind would).
            self.cache.stats.hits += 1
            at = row[2] * isz + skip
            return flat[at : at + end - offset]
        nbytes = (last - first) * isz
        if reply is not None and reply.nbytes >= nbytes:
            out = reply[:nbytes].view(self._raw)
        else:
            out = aligned_empty(nbytes).view(self._raw)
        if row is not None:
            await self._serve(self._planner.row_plan(row, last - first), out, last)
        elif count_touched(self.meta.shape, self.meta.chunks, first, last) <= WIDE:
            await self._serve(self._planner.plan(first, last), out, last)
        else:
            await self._read_wide(first, last, out)
        return memoryview(out.view(np.uint8))[skip : skip + end - offset]

    async def _serve(self, plan: dict, out: np.ndarray, last: int) -> None:
        """Copy what ``plan`` reads into ``out``, which starts where the plan does."""
        chunks, pinned, lent = await self._chunks(plan)
        try:
            for coords, copies in plan.items():
                src = chunks[coords]
                for c in copies:
                    out[c.start : c.stop].reshape(c.box)[c.box_sel] = src[c.chunk_sel]
        finally:
            self._give_back(pinned, lent)
        if self._read_ahead.sequential:
            self._drop_behind(plan, last)

    async def _read_wide(self, first: int, last: int, out: np.ndarray) -> None:
        """Elements ``[first, last)`` over more than WIDE chunks, a piece at a time. Where
        the array's stored units are listed, ``out`` takes the fill value at once and only
        the chunks of stored (or written) units are read."""
        shape, chunks = self.meta.shape, self.meta.chunks
        stored = await self._stored_units()
        if stored is None:
            count = functools.partial(count_touched, shape, chunks)
            for lo, hi in pieces(first, last, count, WIDE):
                plan = self._planner.plan(lo, hi)
                await self._preload(plan)
                await self._serve(plan, out[lo - first : hi - first], hi)
            return
        try:
            await self.store.check_root()  # fill values only from a store that is there
        except StoreError as e:
            log.error("%s: %s", self.path, e)
            raise FsError(errno.EIO, str(e)) from e
        out[...] = self._fill_element
        select = stored.selector(self._unit(key[1]) for key in self.cache.dirty(owner=self))

        def count(lo: int, hi: int) -> int:
            return sum(map(select.count, touched_ranges(shape, chunks, lo, hi)))

        for lo, hi in pieces(first, last, count, WIDE):
            if plan := plan_read(shape, chunks, lo, hi, select.chunks):
                await self._serve(plan, out[lo - first : hi - first], hi)

    async def _preload(self, plan: dict) -> None:
        """Load the uncached chunks of ``plan`` (a piece of a wide request) in one worker
        thread, where a local store and no shards allow: a thread hop costs more than
        reading a tiny chunk. What fails here is left to the normal path, which reports it."""
        if self._sharding is not None or self.store.store.remote:
            return
        missing = [c for c in plan if not self._known((self.path, c))]
        stores = self._stores
        found = await trio.to_thread.run_sync(
            self._read_many, [self._key(c) for c in missing], limiter=self.decode_limiter
        )
        if any(loaded is None for loaded, _ in found):
            try:
                await self.store.check_root()
            except StoreError:
                found = [(loaded, n) for loaded, n in found if loaded is not None]
        for coords, (loaded, nbytes) in zip(missing, found, strict=False):
            self.store.count_get(nbytes)
            if stores == self._stores and not self._known((self.path, coords)):
                self.cache.put((self.path, coords), loaded or Loaded(self._fill, _FILL_ENTRY_BYTES))
            elif loaded is not None:
                self.pool.give(loaded.buffer)

    def _known(self, key: tuple) -> bool:
        return self.cache.entry(key) is not None or self.cache.loading(key)

    def _read_many(self, keys: list[str]) -> list[tuple[Loaded | None, int | None]]:
        """``_read_decode`` of each key in turn, up to the first that fails."""
        found = []
        for key in keys:
            try:
                found.append(self._read_decode(key))
            except (StoreError, ChunkDecodeError):
                break
        return found

    async def _stored_units(self) -> StoredUnits | None:
        """The listing of this array's stored units, made anew once LISTING_TTL_S old;
        None when unknown (too many to list, or the listing failed)."""
        key = (self.path, "stored")
        listed = self.cache.peek(key)
        if listed is not None and trio.current_time() - listed.listed_at > LISTING_TTL_S:
            self.cache.invalidate(key)
        listed = await self.cache.get(key, self._list_units)
        return listed if listed.units is not None else None

    async def _list_units(self) -> tuple[StoredUnits, int]:
        stores, busy = self._stores, bool(self._busy)
        ndim = len(self.meta.shape)
        try:
            units = await self.store.call(
                list_units, self.store.store, self._prefix, self.meta.key_encoding, ndim
            )
        except StoreError as e:
            log.warning("%s: its chunks are read one by one (no listing: %s)", self.path, e)
            units = None
        if busy or self._busy or self._stores != stores:
            units = None  # a write-back overlapped the listing, which may miss its key
        listed = StoredUnits(units, self._per_unit, trio.current_time())
        self._listings.add(listed)
        return listed, listed.nbytes

    def _note_stored(self, unit: tuple[int, ...]) -> None:
        """This mount stored ``unit``: a listing made before must now include it."""
        for listed in self._listings:
            listed.add(unit)
