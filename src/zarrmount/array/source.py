"""Decoded chunks of one array, from the cache or the store: keys, absent chunks as the
fill value, shards, decoding into pool buffers; every failure an EIO naming the key."""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Iterable

import numpy as np
import trio

from zarrmount.array.failures import failed
from zarrmount.array.grid import Coords, UnitGrid
from zarrmount.array.shards import ShardReader
from zarrmount.array.shared import Shared
from zarrmount.array.stored_units import Listing
from zarrmount.array.units import UnitStates
from zarrmount.array.unloaded import Unloaded
from zarrmount.cache import Loaded
from zarrmount.codecs import ChunkDecodeError, Pipeline
from zarrmount.codecs.base import Unsupported, raw_dtype
from zarrmount.format.model import ArrayNode
from zarrmount.memory import scratch
from zarrmount.store import StoreError

log = logging.getLogger(__name__)


def whole_object(raw: bytes) -> list[tuple[int, int | None, bytes]]:
    """A chunk stored as one object is read whole."""
    return [(0, None, raw)]


# A missing chunk is a zero-stride view of the fill value: it costs the cache only its
# entry (measured: about 340 bytes with 1-D coordinates, 380 with 2-D).
FILL_ENTRY_BYTES = 512
# The worker-thread scratch slot for stored chunk bytes: the kernel copies file data into
# misaligned memory several times slower.
STORED = "stored"
# Chunk buffers made ready for an array's first read: a first request of a streaming
# reader touches one row of chunks, often four to sixteen.
WARM_CHUNKS = 16


class _Landing:
    """Where one chunk's stored bytes land in a worker thread, and their decoding: a
    chunk stored as it is read goes straight into its pool buffer, others into the
    thread's scratch, decoded from there into a pool buffer."""

    def __init__(self, source: ChunkSource) -> None:
        self.source = source
        self.buffer: np.ndarray | None = None

    def buffer_for(self, size: int) -> np.ndarray:
        source = self.source
        if source.pipeline.passthrough and size == source.meta.chunk_nbytes:
            self.buffer = source.pool.take(size)
            return self.buffer
        return scratch(STORED, size)

    def __call__(self, raw: memoryview | bytes) -> Loaded:
        source, buffer, self.buffer = self.source, self.buffer, None
        meta = source.meta
        if buffer is not None:
            if len(raw) == meta.chunk_nbytes:
                return Loaded(buffer.view(source.raw).reshape(meta.chunks), len(raw), buffer)
            source.pool.give(buffer)  # shorter than it was: decoded as any other
        return source.decode_into(raw)


class ChunkSource:
    """The decoded chunks of one array, shared by its reader and writer."""

    def __init__(self, node: ArrayNode, pipeline: Pipeline, shared: Shared) -> None:
        self.path = shared.space + node.path
        self.meta = meta = node.meta
        self.pipeline = pipeline
        self.store, self.cache, self.pool = shared.store, shared.cache, shared.pool
        self.decoders, self.background = shared.decoders, shared.background
        self.raw = raw_dtype(meta.itemsize)
        self.fill_element = meta.fill_value.reshape(()).view(self.raw)
        self.fill = np.broadcast_to(self.fill_element, meta.chunks)
        self.grid = UnitGrid(meta, node.data_prefix, pipeline.sharding)
        self.states = UnitStates()
        self.unloaded = Unloaded()  # chunks written before their stored elements were loaded
        self.shards = ShardReader(
            self.path, self.grid, self.store, self.cache, self.states, self.decoders, self.check
        )
        self.revalidation = shared.revalidation
        self.validity = shared.revalidation.of(self.path)
        self.listing = Listing(
            self.path, self.grid, self.store, self.cache, self.states, self._revalidated_units
        )

    @property
    def expired(self) -> bool:
        """Cached chunks may be stale: revalidate them before a read."""
        return self.revalidation.expired(self.validity)

    def _revalidated_units(self) -> Iterable[Coords] | None:
        """The units the array's last revalidation listed, while they are trusted."""
        validity = self.validity
        return None if self.expired or validity.units is None else validity.units.keys()

    async def revalidate(self) -> None:
        """Drop the cached chunks that other writers changed, once the period has run out
        (the first time: the listing later ones compare with, before anything is loaded)."""
        if self.expired:
            await self.revalidation.revalidate(self.path, self.validity, self.grid)

    def prepare(self) -> None:
        """The array was opened: list it in the background if a first read would have
        to, so that read finds the listing made."""
        if self.expired and not self.validity.lock.locked():
            self.background.start_soon(self._list_first)

    async def _list_first(self) -> None:
        try:
            await self.revalidate()
        except Exception:  # nobody waits for it: the first read tries again
            log.exception("%s: listing its chunks failed", self.path)

    async def stored(self, unit: Coords, key: str, raw: bytes | None) -> None:
        """Our own write of ``unit`` (``raw``, None: deleted) is in the store: the listing's
        entry follows, and the bytes go to the disk cache too (write-through), under a
        validator of our own, so a reread after eviction fetches nothing. A later listing
        (a remount) finds the store's validator instead: those entries are fetched again.
        A first listing under way (begun when the file was opened) is waited for: this
        write then overrides what it found. A file of the unit open for direct reads is
        closed: the object is new."""
        self.revalidation.files.forget(self.file_key(unit))
        await self.revalidate()
        units = self.validity.units
        if units is None:  # never listed: the disk cache is not used for this array
            return
        if raw is None:
            units.pop(unit, None)
            return
        units[unit] = validator = f"written:{secrets.token_hex(8)}"
        cut = whole_object if self.grid.sharding is None else self.shards.pieces
        await self.store.write_through(key, validator, raw, cut)

    def key(self, coords: Coords) -> tuple:
        """The chunk's key in the cache."""
        return (self.path, coords)

    def file_key(self, coords: Coords) -> tuple:
        """The key of the chunk's open file, read directly (array/direct.py)."""
        return (self.path, "file", coords)

    def known(self, coords: Coords) -> bool:
        key = self.key(coords)
        return self.cache.entry(key) is not None or self.cache.loading(key)

    async def complete(self, coords: Iterable[Coords]) -> None:
        """Fill in the elements not written yet of chunks begun unloaded (array/unloaded.py)
        from the stored chunks, before anything reads them whole; EIO where that fails."""
        for c in [c for c in coords if c in self.unloaded]:
            loaded = await self._load(c)  # from the store, not the cache: ours is dirty
            try:
                mask, entry = self.unloaded.mask(c), self.cache.entry(self.key(c))
                if mask is not None and entry is not None:  # none: completed meanwhile
                    old = np.broadcast_to(loaded.value, self.meta.chunks)
                    np.copyto(entry.value, old, where=~mask)
                self.unloaded.forget(c)
            finally:
                if loaded.buffer is not None:
                    self.pool.give(loaded.buffer)

    async def chunk(self, coords: Coords) -> tuple[np.ndarray, object]:
        """The decoded chunk at ``coords`` as raw elements, from the cache when there,
        with its cache entry pinned: pass that to ``cache.unpin`` when done with it."""
        return await self.cache.get_pinned(self.key(coords), lambda: self._load(coords))

    async def _load(self, coords: Coords) -> Loaded:
        """Fetch and decode one read unit: a chunk, or an inner chunk of a shard."""
        key, local = self.grid.locate(coords)
        unit = self.grid.unit(coords)
        validator = self.validity.validator(unit)  # as of the last listing, if any
        self.cache.reserve(self.meta.chunk_nbytes)  # the chunk's buffer from an evicted one
        try:
            if local is None:
                loaded = await self.store.get_with(
                    key, *self._landing(), self.decoders.limiter, validator
                )
                return loaded or await self.absent()
            return await self._load_inner(key, local, unit, validator)
        except (StoreError, ChunkDecodeError) as e:
            raise failed(key, e) from e

    async def _load_inner(
        self, key: str, local: Coords, unit: Coords, validator: str | None
    ) -> Loaded:
        """An inner chunk, by the shard's cached index; one that does not decode (or lies
        past the shard's end) is read once more with the index read again: another writer
        may have replaced the shard since its index was cached."""
        try:
            return await self._inner_once(key, local, unit, validator)
        except ChunkDecodeError:
            self.shards.forget(key)
            return await self._inner_once(key, local, unit, None)

    async def _inner_once(
        self, key: str, local: Coords, unit: Coords, validator: str | None
    ) -> Loaded:
        """Read and decoded in one worker thread (a chunk read again, were its shard
        rewritten meanwhile, gives its buffer back)."""
        loaded = await self.shards.fetch_inner(
            key, local, unit, self.decode_into, lambda old: self.pool.give(old.buffer), validator
        )
        return await self.absent() if loaded is None else loaded

    def _landing(self) -> tuple:
        landing = _Landing(self)
        return landing.buffer_for, landing

    def fill_entry(self) -> Loaded:
        return Loaded(self.fill, FILL_ENTRY_BYTES)

    async def absent(self) -> Loaded:
        """An absent chunk reads as the fill value, but only from a store still there: a
        deleted bucket or an unmounted disk must not read as fill values (StoreError)."""
        await self.store.check_root()
        return self.fill_entry()

    def decode_into(self, raw: bytes | memoryview) -> Loaded:
        """Decode in a worker thread into a pool buffer (the chunk's home while cached)."""
        buffer = self.pool.take(self.meta.chunk_nbytes)
        with self.decoders.timed():
            chunk = self.pipeline.decode(raw, buffer)
        return Loaded(chunk.view(self.raw), chunk.nbytes, buffer)

    def check(self, raws: list[bytes]) -> list[bool]:
        """Which of ``raws`` decode (in a worker thread), each decoded only to know it, in
        turn into one pool buffer."""
        if not raws:
            return []
        buffer = self.pool.take(self.meta.chunk_nbytes)
        try:
            return [self._decodes(raw, buffer) for raw in raws]
        finally:
            self.pool.give(buffer)

    def _decodes(self, raw: bytes, buffer: np.ndarray) -> bool:
        try:
            with self.decoders.timed():
                self.pipeline.decode(raw, buffer)
        except ChunkDecodeError:
            return False
        return True

    async def preload(self, coords: list[Coords]) -> None:
        """Load the uncached chunks among ``coords`` (a piece of a wide request) in one
        worker thread, where the store batches reads and there are no shards: a thread hop
        costs more than reading a tiny chunk. What fails here is left to the normal path,
        which reports it."""
        if self.grid.sharding is not None:
            return
        missing = [c for c in coords if not self.known(c)]
        stores = self.states.stores
        keys = [self.grid.key(c) for c in missing]
        since = time.monotonic()
        found = await self.store.get_batch(keys, *self._landing(), self.decoders.limiter)
        if found is None:
            return
        pairs = list(zip(missing, found, strict=False))  # found stops at a failure
        if any(loaded is None for _, loaded in pairs):
            try:
                await self.store.check_root()
            except StoreError:  # absent chunks are not fill values then
                pairs = [(c, loaded) for c, loaded in pairs if loaded is not None]
        for coords, loaded in pairs:
            if stores == self.states.stores and not self.known(coords):
                self.cache.put(self.key(coords), loaded or self.fill_entry(), since)
            elif loaded is not None:
                self.pool.give(loaded.buffer)

    async def warm_up(self, budget: int) -> int:
        """Put up to ``WARM_CHUNKS`` chunk buffers, within ``budget`` bytes, in the pool,
        and run the codecs once in each decoding thread, its scratch buffer made; returns
        the bytes given. Failures only cost the warm start."""
        nbytes = self.meta.chunk_nbytes
        count = min(budget // nbytes, WARM_CHUNKS)
        if count < 1:
            return 0
        threads = self.decoders.threads
        try:
            async with trio.open_nursery() as nursery:
                for i in range(threads):
                    share = count // threads + (i < count % threads)
                    nursery.start_soon(self.decoders.run, self._warm_up, share)
        except Exception as e:  # never worth more than a line: reads will meet it again
            log.debug("warm-up of %r: %s", self.path, e)
        return count * nbytes

    def _warm_up(self, count: int) -> None:
        nbytes = self.meta.chunk_nbytes
        buffers = [self.pool.take(nbytes) for _ in range(count)]
        try:
            scratch(STORED, nbytes)
            if buffers:  # for shards: their inner chunks' codecs
                stored = self.pipeline.encode(self.fill)
                self.pipeline.decode(stored, buffers[0])
                if self.pipeline.decode_range is not None and self.store.reads_parts:
                    whole = memoryview(stored)
                    with contextlib.suppress(Unsupported):
                        self.pipeline.decode_part(
                            lambda at, n: whole[at : at + n], len(stored), 0, 1, buffers[0]
                        )
        finally:
            for buffer in buffers:
                self.pool.give(buffer)
