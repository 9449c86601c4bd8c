"""Reads of an array's raw C-order file: plan, fetch and decode chunks, copy slices."""

from __future__ import annotations

import contextlib
import errno
import logging
import math

import numpy as np
import trio

from zarrmount.cache import ChunkCache
from zarrmount.cache.prefetch import ReadAhead
from zarrmount.codecs import ChunkDecodeError, Pipeline
from zarrmount.codecs.base import raw_dtype
from zarrmount.codecs.v3 import MISSING
from zarrmount.format.model import ArrayNode
from zarrmount.layout import chunks_touched, plan_read
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.vfs.errors import FsError

log = logging.getLogger(__name__)

# A missing chunk is a zero-stride view of the fill value: it costs the cache nothing.
_FILL_ENTRY_BYTES = 64
# The cached "index" of a shard that does not exist: every inner chunk reads as fill.
_NO_SHARD = np.empty(0, dtype=np.uint64)


PAGE = 4096


def aligned_empty(count: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array starting on a page boundary.

    Copies into destinations at 16 mod 32 bytes (where malloc puts large blocks) run
    several times slower on these CPUs than into page-aligned ones.
    """
    nbytes = count * dtype.itemsize
    block = np.empty(nbytes + PAGE, dtype=np.uint8)
    skip = -block.ctypes.data % PAGE
    return block[skip : skip + nbytes].view(dtype)


class Background:
    """Where work nobody waits for runs: the mount session's nursery, once it has one."""

    def __init__(self) -> None:
        self.nursery: trio.Nursery | None = None

    def start_soon(self, fn, *args) -> None:
        if self.nursery is not None:
            self.nursery.start_soon(fn, *args)


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
        self._read_ahead = ReadAhead(self.size, cache.capacity // 4)
        self.background = background

    def _key(self, coords: tuple[int, ...]) -> str:
        return self._prefix + self.meta.key_encoding.key(coords)

    async def _decode(self, raw: bytes) -> np.ndarray:
        return await trio.to_thread.run_sync(self.pipeline.decode, raw, limiter=self.decode_limiter)

    def _locate(self, coords: tuple[int, ...]) -> tuple[str, tuple[int, ...] | None]:
        """The store key holding ``coords`` and, for shards, its place inside the shard."""
        if self._sharding is None:
            return self._key(coords), None
        per_shard = self._sharding.chunks_per_shard
        shard = tuple(c // n for c, n in zip(coords, per_shard, strict=True))
        return self._key(shard), tuple(c % n for c, n in zip(coords, per_shard, strict=True))

    async def _load(self, coords: tuple[int, ...]) -> tuple[np.ndarray, int]:
        """Fetch and decode one read unit: a chunk, or an inner chunk of a shard."""
        key, local = self._locate(coords)
        try:
            if local is None:
                raw = await self.store.get(key)
            else:
                raw = await self._fetch_inner(key, local)
            if raw is None:
                return self._fill, _FILL_ENTRY_BYTES
            chunk = await self._decode(raw)
        except (StoreError, ChunkDecodeError) as e:
            log.error("chunk %s: %s", key, e)
            raise FsError(errno.EIO, f"chunk {key}: {e}") from e
        return chunk.view(self._raw), chunk.nbytes

    async def _fetch_inner(self, key: str, local: tuple[int, ...]) -> bytes | None:
        """The bytes of one inner chunk: a range request located by the (cached) shard index."""
        index = await self.cache.get((self.path, "index", key), lambda: self._load_index(key))
        if index.size == 0:
            return None
        offset, length = (int(v) for v in index[local])
        if offset == MISSING and length == MISSING:
            return None
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

    async def chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The decoded chunk at ``coords`` as raw elements, from the cache when there."""
        return await self.cache.get((self.path, coords), lambda: self._load(coords))

    async def _chunks(self, wanted: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        found: dict[tuple[int, ...], np.ndarray] = {}
        missing = []
        for coords in wanted:
            value = self.cache.peek((self.path, coords))
            if value is None:
                missing.append(coords)
            else:
                self.cache.stats.hits += 1
                found[coords] = value
        if len(missing) == 1:
            found[missing[0]] = await self.chunk(missing[0])
        elif missing:
            errors: list[FsError] = []

            async def one(coords: tuple[int, ...]) -> None:
                try:
                    found[coords] = await self.chunk(coords)
                except FsError as e:
                    errors.append(e)

            async with trio.open_nursery() as nursery:
                for coords in missing:
                    nursery.start_soon(one, coords)
            if errors:
                raise errors[0]
        return found

    async def _prefetch(self, first: int, last: int) -> None:
        """Load the chunks of elements ``[first, last)`` into the cache, in walk order."""
        for coords in chunks_touched(self.meta.shape, self.meta.chunks, first, last):
            if self.cache.peek((self.path, coords)) is None:
                self.background.start_soon(self._prefetch_one, coords)

    async def _prefetch_one(self, coords: tuple[int, ...]) -> None:
        # A failed load was logged; the reader meets the same error if it gets there.
        with contextlib.suppress(FsError):
            await self.chunk(coords)

    async def read(self, offset: int, size: int) -> memoryview | bytes:
        """Bytes ``[offset, offset + size)`` of the file, short at the end of file."""
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        ahead = self._read_ahead.observe(offset, end)
        if ahead is not None:
            self.background.start_soon(self._prefetch, ahead[0] // isz, -(-ahead[1] // isz))
        plan = plan_read(self.meta.shape, self.meta.chunks, first, last)
        chunks = await self._chunks(list(plan))
        out = aligned_empty(last - first, self._raw)
        for coords, copies in plan.items():
            src = chunks[coords]
            for c in copies:
                dest = out[c.start : c.start + math.prod(c.box)].reshape(c.box)
                dest[c.box_sel] = src[c.chunk_sel]
        skip = offset - first * isz
        return memoryview(out.view(np.uint8))[skip : skip + end - offset]
