"""An LRU of decoded chunks, bounded in bytes, with one load per chunk however many wait.

Concurrency rules (see docs/cache.md): every method runs on the trio thread, so the
dictionaries need no locks; only loaders do work in worker threads, and they never
touch the cache. A key is either cached, in flight (one loader, any number of waiters),
or absent. A failed or cancelled load leaves the key absent, so the next read retries.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

import trio

log = logging.getLogger(__name__)

Loader = Callable[[], Awaitable[tuple[Any, int]]]


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    waits: int = 0
    evictions: int = 0
    load_errors: int = 0


class _Flight:
    """One load under way; waiters block on ``done`` and read ``value`` or ``error``."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class ChunkCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self.stats = CacheStats()
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, key: Hashable) -> Any | None:
        """The cached value without loading or counting; refreshes its LRU position."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    async def get(self, key: Hashable, loader: Loader) -> Any:
        """The value for ``key``, loading it with ``loader`` (returns value, nbytes) if absent."""
        while True:
            value = self.peek(key)
            if value is not None:
                self.stats.hits += 1
                return value
            flight = self._flights.get(key)
            if flight is None:
                break
            self.stats.waits += 1
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.value is not None:
                return flight.value
            # The loader was cancelled: try again, perhaps as the loader.
        self.stats.misses += 1
        flight = _Flight()
        self._flights[key] = flight
        try:
            value, nbytes = await loader()
        except trio.Cancelled:
            raise
        except BaseException as e:
            self.stats.load_errors += 1
            flight.error = e
            raise
        else:
            flight.value = value
            self._insert(key, value, nbytes)
            return value
        finally:
            del self._flights[key]
            flight.done.set()

    def _insert(self, key: Hashable, value: Any, nbytes: int) -> None:
        if nbytes > self.capacity:
            return
        self._entries[key] = (value, nbytes)
        self.used += nbytes
        while self.used > self.capacity:
            _, (_, size) = self._entries.popitem(last=False)
            self.used -= size
            self.stats.evictions += 1
