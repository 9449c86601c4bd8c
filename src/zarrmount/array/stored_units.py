"""Which units (chunks, or shards) of an array are stored, from one listing of its keys.

A request over many chunks of a sparse array (10^12 one-byte chunks, most never written)
then serves the fill value for all the absent ones at once, instead of asking the store
about each: its work grows with the chunks that are there, not with those that are not.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import trio

from zarrmount.array.units import UnitsPart
from zarrmount.format.model import ChunkKeyEncoding
from zarrmount.layout import product
from zarrmount.store import Store, StoreError

log = logging.getLogger(__name__)

# Names listed at most: an array with more stored keys is read chunk by chunk.
LIMIT = 16384
# What one listed unit costs in memory (a tuple of ints in a set), for the cache's budget.
_UNIT_BYTES = 160
_NUMBER = "(0|[1-9][0-9]*)"
# How long a listing of an array's stored chunks is trusted: writers other than this
# mount are noticed within this time.
LISTING_TTL_S = 30.0


def _level_patterns(encoding: ChunkKeyEncoding, ndim: int) -> list[re.Pattern]:
    """One pattern per ``/``-separated level of a chunk key, with a group per coordinate."""
    template = encoding.prefix + encoding.separator.join(["\0"] * ndim)
    return [
        re.compile("".join(_NUMBER if c == "\0" else re.escape(c) for c in level), re.ASCII)
        for level in template.split("/")
    ]


def _key_pattern(encoding: ChunkKeyEncoding, ndim: int) -> re.Pattern:
    """A whole chunk key below the array's prefix, with a group per coordinate."""
    return re.compile("/".join(p.pattern for p in _level_patterns(encoding, ndim)), re.ASCII)


def list_units(
    store: Store, prefix: str, encoding: ChunkKeyEncoding, ndim: int, limit: int = LIMIT
) -> dict[tuple[int, ...], str] | None:
    """The grid coordinates of the chunk keys stored below ``prefix``, each with its
    object's validator (blocking); None for a 0-d array, a store that cannot list (HTTP),
    or when more than ``limit`` names are met on the way."""
    if ndim == 0 or not store.lists_chunks:
        return None
    if store.lists_deep:
        keys = store.list_tree(prefix)
        if len(keys) > limit:
            return None
        pattern = _key_pattern(encoding, ndim)
        return {
            tuple(int(g) for g in m.groups()): validator
            for key, validator in keys.items()
            if (m := pattern.fullmatch(key)) is not None
        }
    return _walk_units(store, prefix, _level_patterns(encoding, ndim), limit)


def _walk_units(
    store: Store, prefix: str, levels: list[re.Pattern], limit: int
) -> dict[tuple[int, ...], str] | None:
    """list_units level by level (directories), down matching names only."""
    units: dict[tuple[int, ...], str] = {}
    seen = 0
    todo: list[tuple[str, int, tuple[int, ...]]] = [(prefix, 0, ())]
    while todo:
        path, depth, coords = todo.pop()
        names = store.list_validated(path)
        seen += len(names)
        if seen > limit:
            return None
        for name, validator in names.items():
            match = levels[depth].fullmatch(name)
            if match is None:
                continue  # metadata, lock files, temporary files: not chunks
            found = coords + tuple(int(g) for g in match.groups())
            if depth + 1 == len(levels):
                units[found] = validator
            else:
                todo.append((f"{path}{name}/", depth + 1, found))
    return units


class StoredUnits:
    """A listing of an array's stored units, kept up to date with what this mount stores."""

    def __init__(
        self, units: set[tuple[int, ...]] | None, per_unit: tuple[int, ...], listed_at: float
    ) -> None:
        self.units = units  # None: unknown (too many, or the listing failed)
        self.per_unit = per_unit  # chunks per unit along each axis (all 1 without shards)
        self.listed_at = listed_at
        self._selector: Selector | None = None  # of the listed units alone, made once

    @property
    def nbytes(self) -> int:
        return 256 + _UNIT_BYTES * len(self.units or ())

    def add(self, unit: tuple[int, ...]) -> None:
        if self.units is not None and unit not in self.units:
            self.units.add(unit)
            self._selector = None

    def selector(self, extra: Iterable[tuple[int, ...]]) -> Selector:
        """The listed units and ``extra`` ones (written but not stored yet)."""
        more = set(extra).difference(self.units or ())
        if more:
            return Selector(more.union(self.units or ()), self.per_unit)
        if self._selector is None:
            self._selector = Selector(self.units or set(), self.per_unit)
        return self._selector


class Selector:
    """Picks, from the chunk ranges of a box, the chunks that lie in stored units."""

    def __init__(self, units: set[tuple[int, ...]], per_unit: tuple[int, ...]) -> None:
        ndim = len(per_unit)
        self._per = np.array(per_unit, dtype=np.int64)
        self._first = np.array(sorted(units), dtype=np.int64).reshape(-1, ndim) * self._per

    def _overlaps(self, ranges: list[range]) -> tuple[np.ndarray, np.ndarray]:
        """Per unit and axis, the first and the end of its chunks within ``ranges``."""
        lo = np.maximum(self._first, [r.start for r in ranges])
        hi = np.minimum(self._first + self._per, [r.stop for r in ranges])
        return lo, hi

    def count(self, ranges: list[range]) -> int:
        """How many chunks within ``ranges`` lie in stored units."""
        if not len(self._first):
            return 0
        lo, hi = self._overlaps(ranges)
        return int(np.prod(np.clip(hi - lo, 0, None), axis=1).sum())

    def chunks(self, ranges: list[range]) -> Iterator[tuple[int, ...]]:
        """Those chunks, unit by unit."""
        if not len(self._first):
            return
        lo, hi = self._overlaps(ranges)
        inside = np.all(hi > lo, axis=1)
        for a, b in zip(lo[inside].tolist(), hi[inside].tolist(), strict=True):
            yield from product([range(x, y) for x, y in zip(a, b, strict=True)])


@dataclass(eq=False)
class Listing(UnitsPart):
    """One array's listing of stored units: made when a wide read asks, kept as a cache
    entry, made anew once LISTING_TTL_S old, and told of every unit this mount stores.
    ``known()`` gives the units of a listing made for another purpose that is still
    trusted (the array's revalidation), if any: that one is not made twice."""

    known: Callable[[], Iterable[tuple[int, ...]] | None] = lambda: None
    # listings still in use (cached, or held by a read): each learns what is stored
    _listings: weakref.WeakSet[StoredUnits] = field(init=False, default_factory=weakref.WeakSet)

    async def units(self) -> StoredUnits | None:
        """The listing; None when unknown (too many to list, or the listing failed)."""
        key = (self.path, "stored")
        listed = self.cache.peek(key)
        if listed is not None and trio.current_time() - listed.listed_at > LISTING_TTL_S:
            self.cache.invalidate(key)
        listed = await self.cache.get(key, self._list)
        return listed if listed.units is not None else None

    async def _list(self) -> tuple[StoredUnits, int]:
        states = self.states
        stores, busy = states.stores, states.any_busy
        grid = self.grid
        try:
            units = self.known()
            if units is None:
                units = await self.store.run(
                    list_units, grid.prefix, grid.meta.key_encoding, len(grid.meta.shape)
                )
        except StoreError as e:
            log.warning("%s: its chunks are read one by one (no listing: %s)", self.path, e)
            units = None
        if busy or states.any_busy or states.stores != stores:
            units = None  # a write-back overlapped the listing, which may miss its key
        listed = StoredUnits(
            None if units is None else set(units), grid.per_unit, trio.current_time()
        )
        self._listings.add(listed)
        return listed, listed.nbytes

    def note_stored(self, unit: tuple[int, ...]) -> None:
        """This mount stored ``unit``: a listing made before must now include it."""
        for listed in self._listings:
            listed.add(unit)
