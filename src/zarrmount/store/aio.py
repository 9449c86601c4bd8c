"""Runs blocking store calls in worker threads so the trio loop never waits on I/O."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from zarrmount.store.base import Store, StoreError


@dataclass
class StoreStats:
    gets: int = 0
    get_bytes: int = 0
    sets: int = 0
    set_bytes: int = 0
    deletes: int = 0
    errors: int = 0


class AsyncStore:
    """Awaitable wrapper of a :class:`Store`; at most ``concurrency`` calls at once."""

    def __init__(self, store: Store, concurrency: int = 16) -> None:
        self.store = store
        self.stats = StoreStats()
        self._limiter = trio.CapacityLimiter(concurrency)

    async def _run(self, fn, *args):
        """Run ``fn`` in a thread; for remote stores never wait past the store's deadline."""
        try:
            if not self.store.remote:
                return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
            # A hung request is abandoned (its thread finishes on its own) after the deadline.
            with trio.fail_after(self.store.deadline_s + 1.0):
                return await trio.to_thread.run_sync(
                    fn, *args, limiter=self._limiter, abandon_on_cancel=True
                )
        except trio.TooSlowError:
            self.stats.errors += 1
            raise StoreError(
                f"no answer from {self.store.url} within {self.store.deadline_s:g} s"
            ) from None
        except Exception:
            self.stats.errors += 1
            raise

    async def get(self, key: str) -> bytes | None:
        value = await self._run(self.store.get, key)
        self.stats.gets += 1
        if value is not None:
            self.stats.get_bytes += len(value)
        return value

    async def get_range(self, key: str, start: int, length: int) -> bytes | None:
        value = await self._run(self.store.get_range, key, start, length)
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

    def count_get(self, nbytes: int | None) -> None:
        """Account for a get done by a caller's own worker thread (fetch and decode in one)."""
        self.stats.gets += 1
        if nbytes is not None:
            self.stats.get_bytes += nbytes

    async def call(self, fn, *args):
        """Run another blocking function of the store layer (e.g. a hierarchy load)."""
        return await self._run(fn, *args)
