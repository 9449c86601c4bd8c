"""Shards: the cached index of each shard, where an inner chunk lies in it, reading it
whole or in part, and building a new shard on write-back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np

from zarrmount.array.decoders import Decoders
from zarrmount.array.grid import Coords
from zarrmount.array.units import UnitsPart
from zarrmount.codecs import ChunkDecodeError
from zarrmount.codecs.v3 import index_entry
from zarrmount.store import StoreError

T = TypeVar("T")

# The cached "index" of a shard that does not exist: every inner chunk reads as fill.
_NO_SHARD = np.empty(0, dtype=np.uint64)
_NO_SHARD_BYTES = 512  # the entry's own cost, as for a chunk of fill values


class InnerPlace(NamedTuple):
    """An inner chunk's ``length`` bytes at ``offset`` in the shard under ``key``, as of
    the shard's ``generation``."""

    key: str
    offset: int
    length: int
    shard: Coords
    generation: int


@dataclass(eq=False)
class ShardReader(UnitsPart):
    """One array's shards: inner chunks read by their (cached) index, shards rebuilt on
    write-back."""

    decoders: Decoders
    check: Callable[[list[bytes]], list[bool]]  # which inner chunks decode, in a worker thread

    async def index(self, key: str, validator: str | None = None) -> np.ndarray:
        """The shard's index, from the cache; empty when the shard does not exist.
        ``validator``: the shard object's, as last listed (the disk cache's key)."""
        return await self.cache.get((self.path, "index", key), lambda: self._load(key, validator))

    def forget(self, key: str) -> None:
        """The shard was rewritten: its cached index is stale."""
        self.cache.invalidate((self.path, "index", key))

    async def _load(self, key: str, validator: str | None) -> tuple[np.ndarray, int]:
        spec = self.grid.sharding
        start, n = self.index_range()
        raw = await self.store.get_range(key, start, n, validator)
        if raw is None:
            return _NO_SHARD, _NO_SHARD_BYTES
        if len(raw) != n:
            raise ChunkDecodeError(f"shard index has {len(raw)} bytes, expected {n}")
        index = await self.decoders.run(spec.decode_index, raw)
        return index, index.nbytes

    def index_range(self) -> tuple[int, int]:
        """Where a shard's index lies: ``(start, length)``, a negative start from the end."""
        spec = self.grid.sharding
        n = spec.index_nbytes
        return (-n if spec.at_end else 0), n

    def _index_bytes(self, shard: bytes) -> bytes:
        start, n = self.index_range()
        return shard[start:] if start < 0 else shard[:n]

    def pieces(self, raw: bytes) -> list[tuple[int, int | None, bytes]]:
        """The ranges of a shard (``raw``, just built) that reads ask for, as ``(start,
        length, bytes)``: its index, then each inner chunk the index places."""
        index_raw = self._index_bytes(raw)
        found: list[tuple[int, int | None, bytes]] = [(*self.index_range(), index_raw)]
        index = self.grid.sharding.decode_index(index_raw)
        for local in np.ndindex(index.shape[:-1]):
            if (place := self.inner_range(index, local)) is not None:
                offset, length = place
                found.append((offset, length, raw[offset : offset + length]))
        return found

    def inner_range(self, index: np.ndarray, local: Coords) -> tuple[int, int] | None:
        """``(offset, length)`` of an inner chunk in its shard; None when it is absent. An
        entry longer than any encoding of the chunk is damage, not a request to make."""
        found = index_entry(index, local)
        if found is None:
            return None
        offset, length = found
        if length > self.grid.sharding.inner_stored or offset >= 1 << 62:
            raise ChunkDecodeError(
                f"shard index says inner chunk {list(local)} has {length} bytes at {offset}"
            )
        return offset, length

    async def fetch_inner(
        self,
        key: str,
        local: Coords,
        shard: Coords,
        use: Callable[[bytes], T],
        drop: Callable[[T], object],
        validator: str | None = None,
    ) -> T | None:
        """``use`` of the bytes of one inner chunk (a range request located by the cached
        shard index), in the worker thread that reads them; None when the chunk is absent.

        Index and range must come from the same version of the shard: a fetch that
        overlapped a rewrite of the shard starts over (what it made goes to ``drop``).
        """
        states = self.states
        while True:
            await states.idle(shard)
            generation = states.generation(shard)
            found = await self._fetch_inner_once(key, local, use, validator)
            if not states.changed(shard, generation):
                return found
            if found is not None:
                drop(found)

    async def _fetch_inner_once(
        self, key: str, local: Coords, use: Callable[[bytes], T], validator: str | None
    ) -> T | None:
        index = await self.index(key, validator)
        if index.size == 0:
            return None
        found = self.inner_range(index, local)
        if found is None:
            return None
        offset, length = found

        def checked(raw: bytes | None) -> T:
            if raw is None or len(raw) != length:
                raise ChunkDecodeError(f"shard ends before inner chunk {list(local)}")
            return use(raw)

        return await self.store.get_range_with(
            key, offset, length, checked, self.decoders.limiter, validator
        )

    async def place(self, coords: Coords) -> InnerPlace | None:
        """Where an inner chunk lies in its shard, by the shard's (cached) index; None when
        the normal path had better handle it (no shard, no such chunk, a shard being
        rewritten, an index that fails: that path reports it)."""
        grid, states = self.grid, self.states
        key, local = grid.locate(coords)
        shard = grid.unit(coords)
        if states.busy(shard):
            return None
        generation = states.generation(shard)
        try:
            index = await self.index(key)
            if index.size == 0 or states.changed(shard, generation):
                return None
            found = self.inner_range(index, local)
        except (StoreError, ChunkDecodeError):
            return None
        if found is None:
            return None
        return InnerPlace(key, *found, shard, generation)

    async def build(
        self, unit: Coords, chunks: dict[Coords, np.ndarray], encode: Callable
    ) -> bytes | None:
        """The new stored form of shard ``unit``: ``chunks`` (decoded, by chunk coordinates)
        stored as ``encode`` gives them (None: all fill, left out), the other inner chunks
        copied from the old shard; None when nothing is left to store. All but the read of
        the old shard is done in one worker thread: each hop waits for a core, and on a
        busy machine writers wait for the write-backs."""
        inner = self.grid.inner(unit)
        # A shard whose inner chunks are all rewritten needs nothing of the old one.
        old = None if len(chunks) == len(inner) else await self.store.get(self.grid.key(unit))
        return await self.decoders.run(self._build, unit, chunks, encode, old)

    def _build(
        self, unit: Coords, chunks: dict[Coords, np.ndarray], encode: Callable, old: bytes | None
    ) -> bytes | None:
        copied = {} if old is None else self._kept(old, unit, chunks)
        pieces = {}
        for local, coords in self.grid.inner(unit):
            raw = encode(chunks[coords]) if coords in chunks else copied.get(local)
            if raw is not None:
                pieces[local] = raw
        return self.grid.sharding.assemble(pieces) if pieces else None

    def _kept(self, old: bytes, unit: Coords, chunks: dict) -> dict[Coords, bytes]:
        """The inner chunks of the stored shard ``old`` that ``chunks`` leave as they are,
        each checked to decode: a damaged read must not be stored for good. One that does
        not decode fails the rewrite (the new data stays dirty, tried again; writing that
        inner chunk whole replaces it)."""
        index = self.grid.sharding.decode_index(self._index_bytes(old))
        pieces: dict[Coords, bytes] = {}
        for local, coords in self.grid.inner(unit):
            if coords not in chunks and (found := self.inner_range(index, local)) is not None:
                pieces[local] = old[found[0] : found[0] + found[1]]
        decodes = self.check(list(pieces.values()))
        bad = [list(local) for local, ok in zip(pieces, decodes, strict=True) if not ok]
        if bad:
            raise ChunkDecodeError(
                f"{self.grid.key(unit)}: inner chunks {bad} to keep do not decode"
            )
        return pieces
