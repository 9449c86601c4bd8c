"""How long an array's cached chunks are trusted while other writers may change the store,
and their revalidation in one listing rather than a request per chunk.

Each revalidation of an array of at most ``LIST_MOST`` stored units (one page of an
object store's listing) lists them with their validators (ETag, generation, mtime and
size). A cached chunk loaded after the previous listing had ended, whose unit's
validator is the same in both listings, is the stored one still: nothing changed the
object between the two listings, and the load lay between them. Every other cached
chunk and shard index of the array is dropped and read again when next asked for.

A larger array is never listed on a read's behalf (10^5 chunks take minutes to list,
and a read must not cost more for an array of more chunks): its revalidation is a look
at the ages of its cached chunks, no request; those loaded more than a period ago are
dropped and fetched again when read, which costs what the read touches. So is one on a
store that lists nothing. An array with a disk cache is still listed (its entries are
served by the validators a listing gives).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import trio

from zarrmount.array.grid import UnitGrid
from zarrmount.array.stored_units import list_units
from zarrmount.cache import ChunkCache, OpenFiles
from zarrmount.cache.chunks import Entry
from zarrmount.cache.open_files import OpenEntry
from zarrmount.counters import Counters
from zarrmount.store import StoreError, Unreachable
from zarrmount.store.aio import AsyncStore

log = logging.getLogger(__name__)

Units = dict[tuple[int, ...], str]
# Arrays whose last listing is remembered, and the memory those listings may take (a
# share of the chunk cache's); one forgotten is listed afresh, its cached chunks dropped.
KEEP_ARRAYS = 4096
LISTINGS_SHARE = 16
# What one listed unit costs in memory: its coordinates and its validator, in a dict.
UNIT_BYTES = 240
# The most units an array may have to be listed to revalidate it: one page of an object
# store's listing (a thousand keys), as much as a request for one chunk.
LIST_MOST = 1000


@dataclass(frozen=True)
class Ttl:
    """Seconds cached answers are trusted (None: for good): ``metadata`` for what exists
    (metadata, listings, chunks), ``negative`` for what does not (absent names, chunks)."""

    metadata: float | None = 10.0
    negative: float | None = 5.0
    # with both for good: list each array once all the same (an rw mount's validators,
    # the keys of the disk cache; its own writes keep them current)
    list_once: bool = False

    @property
    def period(self) -> float | None:
        """How often a listing revalidates an array: it answers both kinds at once."""
        known = [t for t in (self.metadata, self.negative) if t is not None]
        return min(known) if known else None


class FreshnessStats(Counters):
    # revalidations: listings of an array's units; revalidated: chunks found unchanged;
    # stale: chunks (and shard indexes) dropped because their object changed;
    # served_stale: revalidations put off, the store unreachable (cached chunks kept)
    names = ("revalidations", "revalidated", "stale", "served_stale")
    __slots__ = names


class Validity:
    """What the last listing of one array found, and until when its chunks are trusted."""

    __slots__ = ("units", "listed_end", "fresh_until", "lock", "changed_ns")

    def __init__(self) -> None:
        self.units: Units | None = None
        self.listed_end = math.inf  # no listing yet: no cached chunk is known current
        self.fresh_until = -math.inf
        self.lock = trio.Lock()
        self.changed_ns: int | None = None  # wall-clock time a listing last found changes

    def forget(self) -> None:
        """Let go of the last listing: the next one drops every cached chunk."""
        self.units, self.listed_end, self.fresh_until = None, math.inf, -math.inf

    @property
    def nbytes(self) -> int:
        return UNIT_BYTES * len(self.units or ())

    def validator(self, unit: tuple[int, ...]) -> str | None:
        """The unit's object's validator in the last listing (None: unknown, or absent)."""
        return None if self.units is None else self.units.get(unit) or None


class Revalidation:
    """The mount's revalidation of array chunks (shared by the engines of each path)."""

    def __init__(self, ttl: Ttl, store: AsyncStore, cache: ChunkCache) -> None:
        self.ttl = ttl
        self.store, self.cache = store, cache
        self.files = OpenFiles()  # of chunks read straight into replies, checked as chunks
        self.stats = FreshnessStats()
        self._arrays: dict[str, Validity] = {}  # least recently used first
        self.budget = cache.capacity // LISTINGS_SHARE  # bytes of listings kept at most
        # told the arrays whose chunks other writers changed (None: any), after a sync
        self.moved: Callable[[set[str] | None], None] = lambda _paths: None

    def of(self, path: str) -> Validity:
        found = self._arrays.pop(path, None) or Validity()
        self._arrays[path] = found
        self._bound(found)
        return found

    def _bound(self, keep: Validity) -> None:
        """At most KEEP_ARRAYS listings of at most ``budget`` bytes: the least recently
        used go (an engine still holding one keeps its state, not its listing)."""
        used = sum(v.nbytes for v in self._arrays.values())
        for path in list(self._arrays):
            if len(self._arrays) <= KEEP_ARRAYS and used <= self.budget:
                break
            validity = self._arrays[path]
            if validity is keep:
                continue
            used -= validity.nbytes
            validity.forget()
            del self._arrays[path]

    def expired(self, validity: Validity) -> bool:
        """The array's cached chunks are due for revalidation."""
        if self.ttl.period is None:
            return self.ttl.list_once and validity.listed_end == math.inf
        return time.monotonic() >= validity.fresh_until

    def fresh_for(self, path: str) -> float | None:
        """Seconds the cached chunks of an array stay trusted; None before its first
        listing (nothing of it is cached)."""
        validity = self._arrays.get(path)
        if validity is None or validity.listed_end == math.inf or self.ttl.period is None:
            return None
        return max(validity.fresh_until - time.monotonic(), 0.0)

    def changed_ns(self, path: str) -> int | None:
        """When a revalidation last found the array changed by another writer, if ever."""
        validity = self._arrays.get(path)
        return None if validity is None else validity.changed_ns

    async def revalidate(self, path: str, validity: Validity, grid: UnitGrid) -> None:
        """List the array's units and drop its cached chunks whose objects changed (or
        may have), once its period has run out; one listing however many readers ask."""
        async with validity.lock:
            if not self.expired(validity):
                return
            if grid.units > LIST_MOST and self.store.disk is None:
                self._by_age(path, validity)
                return
            start = time.monotonic()
            try:
                units = await self._list(path, grid)
            except Unreachable:  # what is cached is served past its TTL (stale-if-error)
                self.stats.served_stale += 1  # and checked once the store answers
                return
            end = time.monotonic()
            changed = _changed(validity.units, units)
            previous_end = validity.listed_end
            keep = _Keeper(path, grid, changed, previous_end, end)
            dropped = self.cache.recheck(keep) + self.files.recheck(keep)
            if changed is None or changed:
                self.cache.invalidate((path, "stored"))  # the absent units it listed too
            validity.units, validity.listed_end = units, end
            self._bound(validity)
            validity.fresh_until = start + (self.ttl.period or math.inf)
            self.stats.revalidations += 1
            self.stats.revalidated += keep.kept
            self.stats.stale += dropped
            first = previous_end == math.inf  # nothing to compare with: nothing seen change
            if not first and (changed is None or changed):
                validity.changed_ns = time.time_ns()  # the kernel drops its pages too
                log.debug("%s: %d cached chunks changed in the store", path or "/", dropped)

    async def listed(self, path: str, grid: UnitGrid) -> Units | None:
        """The array's stored units with their validators, as a listing still trusted
        gives them, listed now if due (as a read would: the next read uses these, and
        finds what is kept of them on disk); else listed for the asking (a mount that
        never revalidates). None: too many units to list, or a store that cannot.
        Unreachable or StoreError when the listing fails."""
        validity = self.of(path)
        await self.revalidate(path, validity, grid)
        if validity.units is not None and not self.expired(validity):
            return validity.units
        meta = grid.meta
        return await self.store.run(list_units, grid.prefix, meta.key_encoding, len(meta.shape))

    def _by_age(self, path: str, validity: Validity) -> None:
        """Revalidate without a listing: the array's cached chunks (and shard indexes)
        loaded more than a period ago are dropped, the rest kept; no request."""
        now = time.monotonic()
        oldest = now - (self.ttl.period or math.inf)

        def keep(key: Hashable, entry: Entry | OpenEntry) -> bool:
            mine = isinstance(key, tuple) and key[0] == path  # its stored units too
            return not mine or entry.since >= oldest

        dropped = self.cache.recheck(keep) + self.files.recheck(keep)
        validity.units, validity.listed_end = None, now
        validity.fresh_until = now + (self.ttl.period or math.inf)
        self.stats.revalidations += 1
        self.stats.stale += dropped

    def gone(self, paths: set[str]) -> None:
        """Nodes a reload found removed or replaced (arrays, groups with their arrays):
        their cached chunks, open chunk files and listings are dropped, so a successor at
        the same path (other chunks, other data) is read anew. Dirty chunks stay (they
        are written back)."""
        if not paths:
            return
        prefixes = tuple(p + "/" for p in paths)

        def under(path: str) -> bool:
            return path in paths or path.startswith(prefixes)

        def keep(key: Hashable, _entry: object) -> bool:
            return not (isinstance(key, tuple) and under(key[0]))

        dropped = self.cache.recheck(keep) + self.files.recheck(keep)
        for path in [p for p in self._arrays if under(p)]:
            self._arrays.pop(path).forget()
        log.debug("reload: %d cached chunks of removed or replaced nodes dropped", dropped)

    def after_sync(self) -> None:
        """Drop the cached chunks of arrays other writers changed, as the last commit
        found (a transactional store), and tell ``moved`` of them."""
        paths = self.store.changed_by_others()
        if paths is not None and not paths:
            return

        def keep(key: Hashable, _entry: object) -> bool:
            return not (isinstance(key, tuple) and (paths is None or key[0] in paths))

        dropped = self.cache.recheck(keep) + self.files.recheck(keep)
        self.stats.stale += dropped
        now = time.time_ns()
        for path in list(self._arrays) if paths is None else paths:
            self.of(path).changed_ns = now  # the kernel drops its pages too
        log.info("other writers changed %s: %d cached chunks dropped", paths or "arrays", dropped)
        self.moved(paths)

    async def _list(self, path: str, grid: UnitGrid) -> Units | None:
        meta = grid.meta
        try:
            return await self.store.run(list_units, grid.prefix, meta.key_encoding, len(meta.shape))
        except Unreachable:
            raise
        except StoreError as e:
            log.warning("%s: cannot list its chunks to revalidate them: %s", path or "/", e)
            return None


def _changed(before: Units | None, after: Units | None) -> set | None:
    """Units whose objects appeared, went or changed between two listings; None when
    either is unknown (everything may have changed)."""
    if before is None or after is None:
        return None
    return {u for u in before.keys() | after.keys() if before.get(u) != after.get(u)}


class _Keeper:
    """Which cached entries of one array stay: those loaded (or last found current) after
    the previous listing ended, in units that did not change; they become current as of
    the new listing's end."""

    def __init__(self, path: str, grid: UnitGrid, changed: set | None, since: float, end: float):
        self.path, self.grid, self.changed = path, grid, changed
        self.since, self.end = since, end
        self.stale_keys = set() if changed is None else {grid.key(unit) for unit in changed}
        self.kept = 0

    def __call__(self, key: Hashable, entry: Entry | OpenEntry) -> bool:
        if not isinstance(key, tuple) or key[0] != self.path or key[1] == "stored":
            return True
        if self.changed is None or entry.since < self.since:
            return False
        if key[1] == "index":
            fresh = key[2] not in self.stale_keys
        elif key[1] == "file":  # an open chunk file (array/direct.py)
            fresh = self.grid.unit(key[2]) not in self.changed
        else:
            fresh = self.grid.unit(key[1]) not in self.changed
        if fresh:
            entry.since = self.end
            self.kept += 1
        return fresh
