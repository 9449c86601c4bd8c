"""Reads of part of an uncached chunk, decoded outside the cache (docs/cache.md rule 7).

A read whose part of an uncached chunk costs at most 1/PART_FRACTION of decoding it whole
gets just that part decoded (stores that read parts cheaply, codecs that allow it: stored
as is, blosc blocks, a zstd frame's first bytes), while the whole chunk follows into the
cache in the background: a first read, or a random one, costs a block's decoding instead
of a chunk's.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from zarrmount.array.failures import failed
from zarrmount.array.grid import Coords
from zarrmount.codecs import ChunkDecodeError
from zarrmount.codecs.base import Reader, Unsupported
from zarrmount.store import StoreError

if TYPE_CHECKING:
    from zarrmount.array.source import ChunkSource

PART_FRACTION = 8
# Parts one thread reads before a second one helps: handing work to another thread, and
# the two threads' turns at the interpreter lock, cost more than a few parts (a first read
# of four parts: 3.6 ms in one thread, 4.4 ms in two).
PARTS_PER_THREAD = 8


class Part(NamedTuple):
    """A read of bytes ``[lo, hi)`` of a chunk from part of its stored value: all of the
    value under ``key``, or for an inner chunk ``length`` bytes from ``offset`` in its
    shard (``shard`` at ``generation``)."""

    key: str
    lo: int
    hi: int
    offset: int = 0
    length: int | None = None
    shard: Coords | None = None
    generation: int = 0


def _read_within(read: Reader, base: int, size: int, at: int, n: int) -> bytes:
    """Read from an inner chunk's own bytes, ``size`` of them from ``base``."""
    return read(base + at, max(0, min(n, size - at)))


class PartialReads:
    """Plans and reads parts of one array's uncached chunks."""

    def __init__(self, source: ChunkSource) -> None:
        self.source = source
        pipeline = source.pipeline
        self.enabled = pipeline.decode_range is not None and source.store.reads_parts

    async def plan(self, plan: dict, missing: list[Coords]) -> dict[Coords, Part]:
        """Where to read those ``missing`` chunks that cost less read in part than whole
        (none already loading or being written back)."""
        if not self.enabled:
            return {}
        source = self.source
        limit = source.meta.chunk_nbytes // PART_FRACTION
        parts = {}
        for coords in missing:
            if source.cache.loading(source.key(coords)) or source.states.busy(coords):
                continue
            lo, hi = source.grid.span(plan[coords])
            if source.pipeline.part_cost(lo, hi) > limit:
                continue
            if source.grid.sharding is None:
                parts[coords] = Part(source.grid.key(coords), lo, hi)
            elif (inner := await source.shards.place(coords)) is not None:
                parts[coords] = Part(inner.key, lo, hi, *inner[1:])
        return parts

    def shares(self, parts: dict[Coords, Part]) -> list[dict[Coords, Part]]:
        """``parts`` shared among the decoding threads, idle on a first read, when there
        are enough to be worth handing to a second thread."""
        threads = min(self.source.decoders.threads, -(-len(parts) // PARTS_PER_THREAD))
        items = list(parts.items())
        return [dict(items[i::threads]) for i in range(threads)]

    async def read(self, share: dict[Coords, Part], lent: list) -> dict[Coords, np.ndarray]:
        """Decode each part into a pool buffer (lent until copied); returns each chunk so
        read. Chunks that are missing, whose stored form only decodes whole, or whose shard
        was rewritten meanwhile are left out."""
        source = self.source
        got = await source.store.with_parts(
            functools.partial(self._read, share, lent), source.decoders.limiter
        )
        for coords, part in share.items():
            if part.shard is not None and source.states.changed(part.shard, part.generation):
                got.pop(coords, None)
        source.cache.stats.partial_reads += len(got)
        return got

    def _read(self, share: dict, lent: list, read_parts) -> dict[Coords, np.ndarray]:
        """In a worker thread (see ``read``)."""
        source = self.source
        nbytes, got = source.meta.chunk_nbytes, {}
        for coords, part in share.items():
            buffer = source.pool.take(nbytes)
            try:
                done = read_parts(part.key, functools.partial(self._decode, part, buffer))
            except (StoreError, ChunkDecodeError) as e:
                source.pool.give(buffer)
                raise failed(part.key, e) from e
            if done:
                lent.append(buffer)
                got[coords] = buffer.view(source.raw).reshape(source.meta.chunks)
            else:
                source.pool.give(buffer)
        return got

    def _decode(self, part: Part, buffer: np.ndarray, size: int, read: Reader) -> bool:
        """Decode ``part`` from a stored value of ``size`` bytes; False when it decodes
        only whole."""
        if part.length is not None:  # an inner chunk: its own bytes within the shard
            if part.offset + part.length > size:
                raise ChunkDecodeError("shard ends before inner chunk")
            base, size = part.offset, part.length
            read = functools.partial(_read_within, read, base, size)
        try:
            with self.source.decoders.timed():
                self.source.pipeline.decode_part(read, size, part.lo, part.hi, buffer)
        except Unsupported:
            return False
        return True
