"""Reads of an array's raw C-order file: plan, fetch and decode chunks, copy slices."""

from __future__ import annotations

import errno
import logging
import math

import numpy as np
import trio

from zarrmount.cache import ChunkCache
from zarrmount.codecs import ChunkDecodeError, Pipeline
from zarrmount.format.model import ArrayMeta
from zarrmount.layout import plan_read
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.vfs.errors import FsError

log = logging.getLogger(__name__)

# A missing chunk is a zero-stride view of the fill value: it costs the cache nothing.
_FILL_ENTRY_BYTES = 64


def raw_dtype(itemsize: int) -> np.dtype:
    """A dtype that copies ``itemsize`` bytes verbatim, never converting values."""
    if itemsize in (1, 2, 4, 8):
        return np.dtype(f"=u{itemsize}")
    return np.dtype((np.void, itemsize))


class ArrayFile:
    """One array shown as a file; shared by every handle open on it."""

    def __init__(
        self,
        path: str,
        meta: ArrayMeta,
        pipeline: Pipeline,
        store: AsyncStore,
        cache: ChunkCache,
        decode_limiter: trio.CapacityLimiter,
    ) -> None:
        self.path = path
        self.meta = meta
        self.pipeline = pipeline
        self.store = store
        self.cache = cache
        self.decode_limiter = decode_limiter
        self.size = meta.nbytes
        self._raw = raw_dtype(meta.itemsize)
        self._fill = np.broadcast_to(meta.fill_value.reshape(()).view(self._raw), meta.chunks)
        self._prefix = f"{path}/" if path else ""

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        return self._prefix + self.meta.key_encoding.key(coords)

    async def _load(self, coords: tuple[int, ...]) -> tuple[np.ndarray, int]:
        key = self.chunk_key(coords)
        try:
            raw = await self.store.get(key)
            if raw is None:
                return self._fill, _FILL_ENTRY_BYTES
            chunk = await trio.to_thread.run_sync(
                self.pipeline.decode, raw, limiter=self.decode_limiter
            )
        except (StoreError, ChunkDecodeError) as e:
            log.error("chunk %s: %s", key, e)
            raise FsError(errno.EIO, f"chunk {key}: {e}") from e
        return chunk.view(self._raw), chunk.nbytes

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

    async def read(self, offset: int, size: int) -> memoryview | bytes:
        """Bytes ``[offset, offset + size)`` of the file, short at the end of file."""
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        isz = self.meta.itemsize
        first, last = offset // isz, -(-end // isz)
        plan = plan_read(self.meta.shape, self.meta.chunks, first, last)
        chunks = await self._chunks(list(plan))
        out = np.empty(last - first, dtype=self._raw)
        for coords, copies in plan.items():
            src = chunks[coords]
            for c in copies:
                dest = out[c.start : c.start + math.prod(c.box)].reshape(c.box)
                dest[c.box_sel] = src[c.chunk_sel]
        skip = offset - first * isz
        return memoryview(out.view(np.uint8))[skip : skip + end - offset]
