"""An LRU of decoded chunks, bounded in bytes, with one load per chunk however many wait.

Concurrency rules (see docs/cache.md): every method runs on the trio thread, so the
dictionaries need no locks; loaders and write-backs do their work in worker threads and
never touch the cache from there. A key is cached, in flight (one loader, any number of
waiters) or absent. A failed or cancelled load leaves the key absent, so the next read
retries. Dirty entries (written, not yet stored) live apart from the LRU and are never
evicted: only their owner's write-back makes them clean again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, NamedTuple, Protocol

import numpy as np
import trio

from zarrmount.counters import Counters


class Loaded(NamedTuple):
    """What a loader returns: the value, its size, and the pool buffer it lives in."""

    value: Any
    nbytes: int
    buffer: Any = None


Loader = Callable[[], Awaitable[tuple]]


# Pause between retries of a failed write-back by the idle timer.
RETRY_S = 10.0


class Owner(Protocol):
    failed_at: float | None  # monotonic time its last write-back failed, if it did

    async def write_back_key(self, key: Hashable) -> int | None:
        """Store the dirty entry ``key`` (and whatever else shares its stored object);
        the errno of a failed store, else ``None``."""


class CacheStats(Counters):
    # partial_reads: reads served from part of a chunk, decoded outside the cache;
    # direct_reads: chunks read from their files straight into a reply (array/direct.py)
    names = ("hits", "misses", "waits", "evictions", "load_errors", "partial_reads", "direct_reads")
    __slots__ = names


class Entry:
    """A cached value; ``mutable`` once a writer owns a private copy of it.

    ``pins`` counts readers copying from it across awaits: a pinned entry is not evicted,
    so the pool buffer it lives in is not handed to another chunk under their feet.
    """

    __slots__ = (
        "value",
        "nbytes",
        "buffer",
        "since",
        "pins",
        "mutable",
        "owner",
        "dirty_since",
        "_flat",
    )

    def __init__(self, value: Any, nbytes: int, buffer: Any = None, since: float = 0.0) -> None:
        self.value = value
        self.nbytes = nbytes
        self.buffer = buffer
        # monotonic time from which the value is known to be the stored one: its load's
        # start, or the end of a listing that found its object unchanged (revalidation)
        self.since = since
        self.pins = 0
        self.mutable = False
        self.owner: Owner | None = None
        self.dirty_since: float | None = None
        self._flat: memoryview | None | bool = False  # not looked at yet

    def c_bytes(self) -> memoryview | None:
        """The bytes of an array value in C order, or None when they are not contiguous
        (F order, a broadcast fill value); made once, as small reads reply with parts."""
        if self._flat is False:
            value = self.value
            contiguous = isinstance(value, np.ndarray) and value.flags.c_contiguous
            self._flat = memoryview(value.reshape(-1).view(np.uint8)) if contiguous else None
        return self._flat


class _Flight:
    """One load under way; waiters block on ``done`` and read ``value`` or ``error``."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: Any = None
        self.buffer: Any = None
        self.error: BaseException | None = None
        self.stale = False  # a writer changed the key while this load ran


# Write-backs that may encode and store at once: each holds its encoded object (a shard's
# also the old shard and the new one) beside the cache, so their number bounds that memory.
# A local store's are bound by the encoders; a remote store's wait a round trip each, and
# as many as a remote store takes at once overlap them (each array within a share of the
# cache, array/writer.py).
WRITE_BACKS = 4
REMOTE_WRITE_BACKS = 16


class ChunkCache:
    def __init__(
        self,
        capacity: int,
        recycle: Callable[[Any], None] | None = None,
        write_backs: int = WRITE_BACKS,
    ) -> None:
        self.capacity = capacity
        self.recycle = recycle
        self.write_backs = trio.CapacityLimiter(write_backs)
        self.used = 0
        self.dirty_bytes = 0
        self.stats = CacheStats()
        self._clean: OrderedDict[Hashable, Entry] = OrderedDict()
        self._dirty: OrderedDict[Hashable, Entry] = OrderedDict()  # oldest write first
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        return len(self._clean) + len(self._dirty)

    def entry(self, key: Hashable) -> Entry | None:
        """The entry for ``key`` without loading or counting; refreshes its LRU position."""
        found = self._dirty.get(key)
        if found is not None:
            return found
        found = self._clean.get(key)
        if found is not None:
            self._clean.move_to_end(key)
        return found

    def loading(self, key: Hashable) -> bool:
        return key in self._flights

    @property
    def in_flight(self) -> int:
        """Loads under way (statistics)."""
        return len(self._flights)

    def peek(self, key: Hashable) -> Any | None:
        found = self.entry(key)
        return None if found is None else found.value

    async def get(self, key: Hashable, loader: Loader) -> Any:
        """The value for ``key``, loading it with ``loader`` (returns value, nbytes) if absent.

        Only valid until the caller's next await when it lives in a pool buffer: callers
        that hold it across awaits use :meth:`get_pinned`.
        """
        value, entry = await self._get(key, loader, pin=False)
        return value

    async def get_pinned(self, key: Hashable, loader: Loader) -> tuple[Any, Entry | None]:
        """Like :meth:`get`, with the entry pinned (pass it to :meth:`unpin` when done)."""
        return await self._get(key, loader, pin=True)

    async def _get(self, key: Hashable, loader: Loader, pin: bool) -> tuple[Any, Entry | None]:
        while True:
            entry = self.entry(key)
            if entry is not None:
                self.stats.hits += 1
                entry.pins += pin
                return entry.value, entry
            flight = self._flights.get(key)
            if flight is None:
                found = await self._load(key, loader, pin)
                if found is not None:
                    return found
                continue  # written while we loaded: what we loaded is stale
            self.stats.waits += 1
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            # Loaded (now cached, unless too big to keep), stale or cancelled: look again.
            # A value outside any pool buffer stays valid even when it was not kept.
            if flight.value is not None and flight.buffer is None and self.peek(key) is None:
                return flight.value, None

    async def _load(self, key: Hashable, loader: Loader, pin: bool):
        """Run ``loader`` as the one load of ``key``; ``None`` if a writer made it stale."""
        self.stats.misses += 1
        flight = _Flight()
        self._flights[key] = flight
        since = time.monotonic()
        try:
            loaded = Loaded(*await loader())
        except trio.Cancelled:
            raise
        except BaseException as e:
            self.stats.load_errors += 1
            flight.error = e
            raise
        else:
            if flight.stale:
                if loaded.buffer is not None and self.recycle is not None:
                    self.recycle(loaded.buffer)
                return None
            flight.value, flight.buffer = loaded.value, loaded.buffer
            entry = Entry(*loaded, since=since)
            entry.pins = int(pin)  # before insertion: eviction must not recycle it
            self._insert_clean(key, entry)
            return entry.value, entry
        finally:
            del self._flights[key]
            flight.done.set()

    def put(self, key: Hashable, loaded: Loaded, since: float) -> None:
        """Keep ``loaded`` as the clean value of ``key``, loaded by the caller (in a batch
        begun at monotonic time ``since``)."""
        self.stats.misses += 1
        self._insert_clean(key, Entry(*loaded, since=since))

    def _drop(self, entry: Entry) -> None:
        """An entry left the cache: its pool buffer may serve another chunk."""
        self.used -= entry.nbytes
        if entry.buffer is not None and not entry.pins and self.recycle is not None:
            self.recycle(entry.buffer)
        entry.buffer = None

    def _insert_clean(self, key: Hashable, entry: Entry) -> None:
        old = self._clean.pop(key, None)
        if old is not None:
            self._drop(old)
        if entry.nbytes > self.capacity:
            return
        self._clean[key] = entry
        self.used += entry.nbytes
        self._evict()

    def reserve(self, nbytes: int) -> None:
        """Room for a value of ``nbytes`` about to be made: least recently used clean
        entries go first, so their buffers wait in the pool for it. Evicted after it was
        made, they would find the budget full and be freed, and every new value would
        cost fresh memory (several times a fast decode on these machines)."""
        self._evict(self.capacity - nbytes)

    def _evict(self, most: int | None = None) -> None:
        """Evict clean, unpinned entries until ``used`` is at most ``most`` (the capacity)."""
        most = self.capacity if most is None else most
        passed = 0  # pinned entries are passed over (to the young end), each once
        while self.used > most and passed < len(self._clean):
            key, old = next(iter(self._clean.items()))
            if old.pins:
                self._clean.move_to_end(key)
                passed += 1
                continue
            del self._clean[key]
            self._drop(old)
            self.stats.evictions += 1

    def release(self, key: Hashable) -> None:
        """Drop ``key`` now if it is clean and unused: a streaming reader is done with it."""
        entry = self._clean.get(key)
        if entry is not None and not entry.pins and entry.buffer is not None:
            del self._clean[key]
            self._drop(entry)

    def unpin(self, entry: Entry | None) -> None:
        if entry is not None:
            entry.pins -= 1

    def invalidate(self, key: Hashable) -> None:
        """The stored object behind ``key`` changed: forget the clean entry, and make a load
        under way (which may have read the old object) not count."""
        flight = self._flights.get(key)
        if flight is not None:
            flight.stale = True
        old = self._clean.pop(key, None)
        if old is not None:
            self._drop(old)

    def recheck(self, keep: Callable[[Hashable, Entry], bool]) -> int:
        """Drop the clean entries ``keep`` refuses (their stored objects changed), as
        :meth:`invalidate` would; returns how many. Dirty entries are never looked at."""
        gone = [key for key, entry in self._clean.items() if not keep(key, entry)]
        for key in gone:
            self.invalidate(key)
        return len(gone)

    def put_dirty(
        self, key: Hashable, value: Any, nbytes: int, owner: Owner, buffer: Any = None
    ) -> None:
        """Keep ``value`` (living in pool ``buffer``, if any) as the unstored content of ``key``."""
        flight = self._flights.get(key)
        if flight is not None:
            flight.stale = True  # a load under way read what this write replaces
        entry = self._dirty.get(key)
        if entry is None:
            entry = self._clean.pop(key, None)
            if entry is not None and entry.value is value:
                self.used -= entry.nbytes  # the writer patched our own copy: it moves over
            else:
                if entry is not None:
                    self._drop(entry)
                entry = Entry(value, nbytes, buffer)
            entry.dirty_since = time.monotonic()
            self._dirty[key] = entry
            self.used += nbytes
            self.dirty_bytes += nbytes
        elif entry.value is not value:
            self.used += nbytes - entry.nbytes
            self.dirty_bytes += nbytes - entry.nbytes
            entry.value, entry.nbytes, entry.buffer = value, nbytes, buffer
        entry.mutable = True
        entry.owner = owner

    def mark_clean(self, key: Hashable) -> None:
        """The dirty entry ``key`` is stored: it may be evicted from now on."""
        entry = self._dirty.pop(key, None)
        if entry is None:
            return
        self.dirty_bytes -= entry.nbytes
        self.used -= entry.nbytes
        entry.dirty_since = None
        self._insert_clean(key, entry)

    def dirty(self, owner: Owner | None = None, before: float | None = None) -> list[Hashable]:
        """Dirty keys, oldest first; only ``owner``'s, only those dirty since ``before``."""
        return [
            key
            for key, e in self._dirty.items()
            if (owner is None or e.owner is owner) and (before is None or e.dirty_since < before)
        ]

    async def relieve(self, limit: int) -> int | None:
        """Above ``limit`` dirty bytes, write back the oldest entries, concurrently, until a
        quarter of ``limit`` is free again (so writers do not stall on every write).

        Returns the errno of a write-back whose store failed, else ``None``. An entry dirty
        again afterwards is no failure: another writer may have changed it once stored.
        """
        if self.dirty_bytes <= limit:
            return None
        excess = self.dirty_bytes - limit + limit // 4
        batch = []
        for key, entry in self._dirty.items():
            batch.append((key, entry))
            excess -= entry.nbytes
            if excess <= 0:
                break
        failures: list[int] = []

        async def write_back(owner: Owner, key: Hashable) -> None:
            error = await owner.write_back_key(key)
            if error is not None:
                failures.append(error)

        async with trio.open_nursery() as nursery:
            for key, entry in batch:
                nursery.start_soon(write_back, entry.owner, key)
        return failures[0] if failures else None

    async def write_back_idle(self, delay: float) -> None:
        """Forever: store entries that stayed dirty for ``delay`` seconds. An owner whose
        write-back failed is retried every ``RETRY_S`` seconds, not every tick."""
        while True:
            await trio.sleep(min(1.0, delay) or 0.1)
            now = time.monotonic()
            for key in self.dirty(before=now - delay):
                entry = self._dirty.get(key)
                owner = entry.owner if entry is not None else None
                if owner is None or (owner.failed_at and now - owner.failed_at < RETRY_S):
                    continue
                await owner.write_back_key(key)
