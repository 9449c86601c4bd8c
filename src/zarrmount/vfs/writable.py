"""Writes to an array file: read-modify-write of chunks in the cache, written back later.

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
import time
from collections.abc import Hashable

import numpy as np
import trio

from zarrmount.codecs.base import is_fill
from zarrmount.codecs.v3 import MISSING
from zarrmount.layout import Copy, count_touched, pieces, plan_read
from zarrmount.vfs.arrayfile import WIDE, ArrayFile
from zarrmount.vfs.errors import FsError

log = logging.getLogger(__name__)

Coords = tuple[int, ...]


def _errno_of(error: BaseException) -> int:
    cause = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return errno.ENOSPC
        cause = cause.__cause__
    return errno.EIO


class WritableArrayFile(ArrayFile):
    def __init__(self, *args, write_empty_chunks: bool = False, dirty_limit: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.write_empty_chunks = write_empty_chunks
        self.dirty_limit = dirty_limit
        self.mtime_ns = time.time_ns()
        self.error: int | None = None  # from a failed write-back, for the next fsync/close
        self.failed_at: float | None = None  # when a write-back last failed (retry pacing)
        self._unsynced: set[str] = set()  # store keys written since the last sync

    # -- writes ------------------------------------------------------------------

    def _inside(self, coords: Coords) -> int:
        """How many elements of the chunk at ``coords`` lie inside the array."""
        return math.prod(
            min((c + 1) * n, s) - c * n
            for c, n, s in zip(coords, self.meta.chunks, self.meta.shape, strict=True)
        )

    async def _writable(self, coords: Coords, copies: list[Copy]) -> np.ndarray:
        """A private, writable copy of the chunk in the cache, waiting out write-backs."""
        key = (self.path, coords)
        unit = self._unit(coords)
        written = sum(math.prod(s.stop - s.start for s in c.chunk_sel) for c in copies)
        while True:
            await self._idle(unit)
            entry = self.cache.entry(key)
            if entry is not None and entry.mutable:
                return entry.value
            inside = self._inside(coords)
            old, pinned = None, None
            if written < inside:  # partly overwritten: patch what is there
                old, pinned = await self.chunk(coords)
            try:
                if unit in self._busy:
                    continue  # a write-back started while we loaded: start over
                entry = self.cache.entry(key)
                if entry is not None and entry.mutable:
                    continue  # another writer made its copy first: use that one
                buffer = self.pool.take(self.meta.chunk_nbytes)
                chunk = buffer.view(self._raw).reshape(self.meta.chunks)
                if old is not None:
                    chunk[...] = old
                elif inside < chunk.size:
                    chunk[...] = self._fill  # edge chunk: keep fill in the padding
            finally:
                self.cache.unpin(pinned)
            self.cache.put_dirty(key, chunk, chunk.nbytes, self, buffer)
            return chunk

    async def write(self, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset``; the file's size never changes (EFBIG past it)."""
        end = offset + len(data)
        if end > self.size:
            raise FsError(errno.EFBIG, f"write of {len(data)} bytes at {offset} past the end")
        if not data:
            return 0
        failed = await self.cache.relieve(self.dirty_limit)  # backpressure first
        if failed is not None:
            raise FsError(failed, "dirty data cannot be stored")
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        head = offset - first * isz
        src = np.frombuffer(data, dtype=np.uint8)
        if head or end % isz:  # partial elements at the edges: merge with what is there
            merged = np.empty((last - first) * isz, dtype=np.uint8)
            partial = {first} if head else set()
            if end % isz:
                partial.add(last - 1)
            for element in partial:  # only the edge elements are partly overwritten
                start = (element - first) * isz
                merged[start : start + isz] = np.frombuffer(
                    await self.read(element * isz, isz), np.uint8
                )
            merged[head : head + len(data)] = src
            src = merged
        src = src.view(self._raw)
        shape, chunks = self.meta.shape, self.meta.chunks
        count = functools.partial(count_touched, shape, chunks)
        for lo, hi in pieces(first, last, count, WIDE):  # bounded plans over tiny chunks
            part = src[lo - first : hi - first]
            for coords, copies in plan_read(shape, chunks, lo, hi).items():
                chunk = await self._writable(coords, copies)
                for c in copies:
                    chunk[c.chunk_sel] = part[c.start : c.stop].reshape(c.box)[c.box_sel]
                self.cache.put_dirty((self.path, coords), chunk, chunk.nbytes, self)
        self.mtime_ns = time.time_ns()
        return len(data)

    # -- write-back --------------------------------------------------------------

    async def write_back_key(self, key: Hashable) -> int | None:
        return await self._write_back(self._unit(key[1]))

    def _dirty_units(self) -> set[Coords]:
        return {self._unit(key[1]) for key in self.cache.dirty(owner=self)}

    async def flush(self) -> None:
        """Store every dirty chunk of this file; raise the first write-back error."""
        units = self._dirty_units()
        if len(units) == 1:
            await self._write_back(units.pop())
        elif units:
            async with trio.open_nursery() as nursery:
                for unit in units:
                    nursery.start_soon(self._write_back, unit)
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
            await self.store.sync(sorted(keys))
        except Exception as e:
            self._unsynced |= keys  # the next fsync tries them all again
            log.error("fsync of %s failed: %s", self.path, e)
            raise FsError(_errno_of(e), f"fsync of {self.path} failed") from e

    async def _write_back(self, unit: Coords) -> int | None:
        """Store the dirty chunks of ``unit``; the errno when storing failed, else None."""
        async with self.cache.write_backs:
            await self._idle(unit)
            keys = [k for k in self.cache.dirty(owner=self) if self._unit(k[1]) == unit]
            if not keys:
                return None
            return await self._store_unit(unit, keys)

    async def _store_unit(self, unit: Coords, keys: list) -> int | None:
        done = self._busy[unit] = trio.Event()
        self._stores += 1
        self._generation[unit] = self._generation.get(unit, 0) + 1
        store_key = self._key(unit)
        try:
            if self._sharding is None:
                await self._store(store_key, await self._encode(self.cache.peek(keys[0])))
            else:
                await self._store(store_key, await self._shard(unit, store_key, keys))
                self.cache.invalidate((self.path, "index", store_key))
            self._note_stored(unit)
            for key in keys:
                self.cache.mark_clean(key)
            self.failed_at = None
            return None
        except Exception as e:  # store, codec or OS errors alike: keep the data, report
            self.error = _errno_of(e)
            self.failed_at = time.monotonic()
            log.error("write-back of %s failed (kept in memory, will retry): %s", store_key, e)
            return self.error
        finally:
            del self._busy[unit]
            done.set()

    async def _encode(self, chunk: np.ndarray) -> bytes | None:
        """The stored form of ``chunk``; ``None`` when it is all fill and should not exist."""
        if not self.write_empty_chunks and is_fill(chunk, self._fill_element):
            return None
        return await trio.to_thread.run_sync(
            self.pipeline.encode, chunk, limiter=self.decode_limiter
        )

    async def _store(self, key: str, raw: bytes | None) -> None:
        if raw is None:
            await self.store.delete(key)
        else:
            await self.store.set(key, raw)
        self._unsynced.add(key)

    async def _shard(self, shard: Coords, store_key: str, keys: list) -> bytes | None:
        """The new shard: dirty inner chunks encoded, the others copied from the old shard."""
        spec = self._sharding
        per_shard = spec.chunks_per_shard
        dirty = {key[1] for key in keys}
        # A shard whose inner chunks are all rewritten needs nothing of the old one.
        old = None if len(dirty) == math.prod(per_shard) else await self.store.get(store_key)
        index = None
        if old is not None:
            index = await trio.to_thread.run_sync(
                spec.decode_index,
                old[-spec.index_nbytes :] if spec.at_end else old[: spec.index_nbytes],
            )
        pieces: dict[Coords, bytes] = {}
        for local in np.ndindex(*per_shard):
            coords = tuple(s * n + i for s, n, i in zip(shard, per_shard, local, strict=True))
            if coords in dirty:
                raw = await self._encode(self.cache.peek((self.path, coords)))
            elif index is not None and int(index[local][0]) != MISSING:
                offset, length = (int(v) for v in index[local])
                raw = old[offset : offset + length]
            else:
                raw = None
            if raw is not None:
                pieces[local] = raw
        if not pieces:
            return None
        return await trio.to_thread.run_sync(spec.assemble, pieces)
