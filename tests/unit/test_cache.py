"""The decoded-chunk cache: one load per key, byte budget, LRU order, failures not kept."""

from __future__ import annotations

import numpy as np
import trio

from zarrmount.cache import BufferPool, ChunkCache, Loaded


def run(fn, *args):
    return trio.run(fn, *args)


def slow_loader(calls: list, result=None, error: Exception | None = None):
    """A loader that counts its calls in ``calls`` and sleeps before it returns ``result``
    (or raises ``error``), so that concurrent gets of its key find its load under way."""

    async def loader():
        calls.append(1)
        await trio.sleep(0.01)
        if error is not None:
            raise error
        return result

    return loader


def test_concurrent_gets_load_once():
    calls = []

    async def main():
        cache = ChunkCache(1000)
        loader = slow_loader(calls, result=("value", 10))
        results = []
        async with trio.open_nursery() as n:
            for _ in range(5):
                n.start_soon(lambda: _get(cache, "k", loader, results))
        assert results == ["value"] * 5
        assert cache.stats.misses == 1 and cache.stats.waits == 4

    async def _get(cache, key, loader, results):
        results.append(await cache.get(key, loader))

    run(main)
    assert len(calls) == 1


def test_lru_eviction_by_bytes():
    async def main():
        cache = ChunkCache(100)

        def loader_for(v):
            async def loader():
                return v, 40

            return loader

        for k in "abc":
            await cache.get(k, loader_for(k))
        assert cache.peek("a") is None  # evicted: 120 > 100
        assert cache.peek("b") == "b" and cache.peek("c") == "c"
        await cache.get("b", loader_for("b"))  # refresh b
        await cache.get("d", loader_for("d"))  # evicts c, the least recent
        assert cache.peek("c") is None and cache.peek("b") == "b"
        assert cache.used <= 100 and cache.stats.evictions == 2

    run(main)


def test_entry_larger_than_budget_is_returned_not_kept():
    async def main():
        cache = ChunkCache(10)

        async def loader():
            return "big", 11

        assert await cache.get("k", loader) == "big"
        assert len(cache) == 0 and cache.used == 0

    run(main)


def test_failure_reaches_waiters_and_is_not_cached():
    attempts = []

    async def main():
        cache = ChunkCache(100)
        failing = slow_loader(attempts, error=ValueError("corrupt"))
        errors = []

        async def get():
            try:
                await cache.get("k", failing)
            except ValueError as e:
                errors.append(str(e))

        async with trio.open_nursery() as n:
            n.start_soon(get)
            n.start_soon(get)
        assert errors == ["corrupt", "corrupt"]

        async def good():
            return "ok", 1

        assert await cache.get("k", good) == "ok"

    run(main)
    assert len(attempts) == 1


def test_cancelled_loader_lets_waiter_retry():
    results = []

    async def main():
        cache = ChunkCache(100)

        async def slow():
            await trio.sleep(10)
            return "never", 1

        async def fast():
            return "fast", 1

        async def first(scope_holder, task_status=trio.TASK_STATUS_IGNORED):
            with trio.CancelScope() as scope:
                task_status.started(scope)
                await cache.get("k", slow)

        async def waiter():
            results.append(await cache.get("k", fast))

        async with trio.open_nursery() as n:
            scope = await n.start(first, None)
            await trio.sleep(0.01)
            n.start_soon(waiter)
            await trio.sleep(0.01)
            scope.cancel()

    run(main)
    assert results == ["fast"]


def test_room_reserved_for_a_new_value_recycles_the_oldest_buffers():
    """Before a value is made, least recently used clean entries are evicted so that their
    buffers are in the pool for it (after it was made, they would be freed instead)."""
    pool = BufferPool(4 * 100)
    cache = ChunkCache(4 * 100, recycle=pool.give)
    pool.in_use = lambda: cache.used
    buffers = [np.zeros(100, np.uint8) for _ in range(4)]
    for k, b in enumerate(buffers):
        cache.put(k, Loaded(b, 100, b), since=0.0)
    cache.entry(0)  # 0 is now the most recently used: 1 goes first
    cache.reserve(100)
    assert cache.used == 300 and cache.peek(1) is None and cache.peek(0) is not None
    assert pool.take(100) is buffers[1]  # the evicted chunk's buffer, not fresh memory
    cache.reserve(50)  # room enough already: nothing goes
    assert len(cache) == 3
