"""Runs blocking store calls in worker threads so the trio loop never waits on I/O."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import trio

from zarrmount.store.base import Store, StoreError
from zarrmount.store.failures import RecentFailures

# The deadline of a fetch of a key that failed a moment ago: long enough for a store
# that is back, short enough that the kernel's immediate re-send of a failed read (page
# cache) does not wait a whole deadline again.
RETRY_DEADLINE_S = 1.0
# A hung call is abandoned this long after its deadline: the store's own deadline, which
# names the cause, fires first where the backend can cancel the request.
SLACK_S = 1.0
# How long a check that the store's root is there counts (absent keys read as fill values
# only from a store that is there); a failed check counts for nothing.
ROOT_CHECK_S = 1.0


@dataclass
class StoreStats:
    gets: int = 0
    get_bytes: int = 0
    sets: int = 0
    set_bytes: int = 0
    deletes: int = 0
    synced: int = 0  # keys made durable by fsync (local stores)
    errors: int = 0


class AsyncStore:
    """Awaitable wrapper of a :class:`Store`; at most ``concurrency`` calls at once."""

    def __init__(self, store: Store, concurrency: int = 16) -> None:
        self.store = store
        self.stats = StoreStats()
        self._limiter = trio.CapacityLimiter(concurrency)
        self._failed = RecentFailures()
        self._root_seen: float | None = None  # trio time the root was last found

    async def _run(self, fn, *args, deadline_s: float | None = None):
        """Run ``fn`` in a thread; for remote stores never wait past the deadline."""
        deadline = self.store.deadline_s if deadline_s is None else deadline_s
        try:
            if not self.store.remote:
                return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
            # A hung request is abandoned (its thread finishes on its own) after the deadline.
            with trio.fail_after(deadline + SLACK_S):
                return await trio.to_thread.run_sync(
                    fn, *args, limiter=self._limiter, abandon_on_cancel=True
                )
        except trio.TooSlowError:
            self.stats.errors += 1
            raise StoreError(f"no answer from {self.store.url} within {deadline:g} s") from None
        except Exception:
            self.stats.errors += 1
            raise

    async def _fetch(self, fn, key: str, *args) -> bytes | None:
        """``fn(key, *args)``, a get of a remote store: with a short deadline while an
        earlier fetch of ``key`` failed a moment ago, the store's own otherwise."""
        if not self.store.remote:
            return await self._run(fn, key, *args)
        retry = self._failed.is_fresh(key)
        deadline = min(RETRY_DEADLINE_S, self.store.deadline_s) if retry else None
        try:
            value = await self._run(
                functools.partial(fn, deadline_s=deadline), key, *args, deadline_s=deadline
            )
        except StoreError as e:
            if retry:  # the first failure's time is kept: a whole try again once it is stale
                raise StoreError(f"{e} (a short try: {key} failed a moment ago)") from e
            self._failed.note(key)
            raise
        self._failed.forget(key)
        return value

    async def check_root(self) -> None:
        """Raise StoreError unless the store's root metadata is there (checked at most
        every ROOT_CHECK_S while it is)."""
        marker = self.store.root_marker
        now = trio.current_time()
        if marker is None or (self._root_seen is not None and now - self._root_seen < ROOT_CHECK_S):
            return
        if await self._fetch(self.store.get_range, marker, 0, 1) is None:
            raise StoreError(f"the store's root ({marker}) is gone: {self.store.url}")
        self._root_seen = now

    async def get(self, key: str) -> bytes | None:
        value = await self._fetch(self.store.get, key)
        self.stats.gets += 1
        if value is not None:
            self.stats.get_bytes += len(value)
        return value

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        value = await self._fetch(self.store.get_range, key, start, length)
        self.stats.gets += 1
        if value is not None:
            self.stats.get_bytes += len(value)
        return value

    async def set(self, key: str, value: bytes) -> None:
        await self._run(self.store.set, key, value)
        self.stats.sets += 1
        self.stats.set_bytes += len(value)

    async def delete(self, key: str) -> None:
        await self._run(self.store.delete, key)
        self.stats.deletes += 1

    async def sync(self, keys: list[str]) -> None:
        await self._run(self.store.sync, keys)
        self.stats.synced += len(keys)

    def count_get(self, nbytes: int | None) -> None:
        """Account for a get done by a caller's own worker thread (fetch and decode in one)."""
        self.stats.gets += 1
        if nbytes is not None:
            self.stats.get_bytes += nbytes

    async def call(self, fn, *args):
        """Run another blocking function of the store layer (e.g. a hierarchy load)."""
        return await self._run(fn, *args)
