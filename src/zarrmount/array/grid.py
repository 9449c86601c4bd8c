"""Where a chunk's bytes live in the store: its key, and with sharding the *unit* (the
shard, written as one object) and the chunk's place inside it. Pure: no store, no cache."""

from __future__ import annotations

import math

from zarrmount.codecs.v3 import ShardIndexSpec
from zarrmount.format.model import ArrayMeta
from zarrmount.layout import Copy, product

Coords = tuple[int, ...]
# A request touching more chunks than this is served a piece of at most this many at a
# time: its plan, tasks and pins stay small, and other requests get their turns.
WIDE = 256


class UnitGrid:
    """The chunk grid of one array and the grid of its stored units (chunks, or shards)."""

    def __init__(self, meta: ArrayMeta, prefix: str, sharding: ShardIndexSpec | None) -> None:
        self.meta = meta
        self.prefix = prefix
        self.sharding = sharding
        ndim = len(meta.shape)
        self.per_unit = (1,) * ndim if sharding is None else sharding.chunks_per_shard
        # elements per step along each axis of a chunk in C order
        self.steps = [math.prod(meta.chunks[i + 1 :]) for i in range(ndim)]

    @property
    def units(self) -> int:
        """How many stored units (chunks, or shards) the grid has."""
        per_unit = [c * n for c, n in zip(self.meta.chunks, self.per_unit, strict=True)]
        return math.prod(-(-s // u) for s, u in zip(self.meta.shape, per_unit, strict=True))

    def key(self, coords: Coords) -> str:
        """The store key of the chunk (or, given a unit's coordinates, of the shard)."""
        return self.prefix + self.meta.key_encoding.key(coords)

    def unit(self, coords: Coords) -> Coords:
        """The grid coordinates of the stored object holding ``coords`` (chunk or shard)."""
        if self.sharding is None:
            return coords
        return tuple(c // n for c, n in zip(coords, self.per_unit, strict=True))

    def locate(self, coords: Coords) -> tuple[str, Coords | None]:
        """The store key holding ``coords`` and, for shards, its place inside the shard."""
        if self.sharding is None:
            return self.key(coords), None
        local = tuple(c % n for c, n in zip(coords, self.per_unit, strict=True))
        return self.key(self.unit(coords)), local

    def inner(self, unit: Coords) -> list[tuple[Coords, Coords]]:
        """``(place in the shard, chunk coordinates)`` of every chunk of a shard."""
        return [
            (p, tuple(u * n + i for u, n, i in zip(unit, self.per_unit, p, strict=True)))
            for p in product([range(n) for n in self.per_unit])
        ]

    def extent(self, coords: Coords) -> tuple[int, ...]:
        """The chunk's extent along each axis inside the array (less at its far edges)."""
        meta = self.meta
        return tuple(
            min(c, s - i * c) for i, c, s in zip(coords, meta.chunks, meta.shape, strict=True)
        )

    def inside(self, coords: Coords) -> int:
        """How many elements of the chunk at ``coords`` lie inside the array."""
        return math.prod(self.extent(coords))

    def span(self, copies: list[Copy]) -> tuple[int, int]:
        """Bytes ``[lo, hi)`` of the chunk (in C order) that ``copies`` read from."""
        isz, steps = self.meta.itemsize, self.steps
        lo, hi = self.meta.chunk_nbytes, 0
        for c in copies:
            first = sum(s.start * n for s, n in zip(c.chunk_sel, steps, strict=True))
            last = sum((s.stop - 1) * n for s, n in zip(c.chunk_sel, steps, strict=True))
            lo, hi = min(lo, first * isz), max(hi, (last + 1) * isz)
        return lo, hi

    def row_end(self, row: int, step: int) -> int:
        """The flat index of the first element of the last line, along the first axis, of
        the chunks in ``row``: none of them ends before it."""
        n, s = self.meta.chunks[0], self.meta.shape[0]
        return (min((row + 1) * n, s) - 1) * step

    def unit_end(self, unit: Coords, element_steps: list[int]) -> int:
        """The flat index of the last element of the stored unit (a chunk, or a shard:
        its corner chunk's last element, the array's edge clipping it)."""
        corner = tuple(u * n + n - 1 for u, n in zip(unit, self.per_unit, strict=True))
        return self.chunk_end(corner, element_steps)

    def chunks_of(self, unit: Coords) -> list[Coords]:
        """The chunks (inner chunks of a shard) stored as ``unit``."""
        return [unit] if self.sharding is None else [c for _, c in self.inner(unit)]

    def chunk_end(self, coords: Coords, element_steps: list[int]) -> int:
        """The flat index (in the array's C order) of the chunk's last element."""
        meta, end = self.meta, 0
        for c, n, s, step in zip(coords, meta.chunks, meta.shape, element_steps, strict=True):
            end += (min((c + 1) * n, s) - 1) * step
        return end
