"""The store's health and the request's deadline, without FUSE: a remote store double
whose "network" the test switches off and on.

Outcomes only: how many calls reached the store, what each caller got, what the disk
cache served.
"""

from __future__ import annotations

import threading

import pytest
import trio
from helpers.store_doubles import ReadOnlyRemoteDouble

from zarrmount.store import StoreError, Unreachable, deadline
from zarrmount.store.aio import AsyncStore
from zarrmount.store.diskcache import DiskCache
from zarrmount.store.health import Health


class Switchable(ReadOnlyRemoteDouble):
    """Values in a dict; while ``down``, every try fails as a refused connection does."""

    url = "s3://bucket/data"
    deadline_s = 0.2
    root_marker = "zarr.json"

    def __init__(self, values: dict[str, bytes]) -> None:
        self.values = values
        self.down = False
        self.calls = 0
        self.asked: list[str] = []  # each try's key
        self._lock = threading.Lock()

    def get(self, key, *, deadline_s=None):
        def attempt(_left: float):
            with self._lock:
                self.calls += 1
                self.asked.append(key)
            if self.down:
                raise ConnectionRefusedError(111, "Connection refused")
            return self.values.get(key)

        return self.retrying(attempt, key, self.deadline_s if deadline_s is None else deadline_s)


def _async(store: Switchable, disk: DiskCache | None = None) -> AsyncStore:
    return AsyncStore(store, disk=disk)


def test_an_outage_fails_requests_at_once_until_a_probe_finds_the_store():
    store = Switchable({"a": b"1", "b": b"2", "zarr.json": b"{}"})
    aio = _async(store)

    async def main():
        assert await aio.get("a") == b"1"
        store.down = True
        with pytest.raises(Unreachable):
            await aio.get("a")  # the request that finds the store down
        assert not aio.health.reachable
        store.asked.clear()
        for key in ("a", "b", "c"):
            with pytest.raises(Unreachable, match="unreachable"):
                await aio.get(key)
        assert set(store.asked) == {"zarr.json"}  # a probe (retried), none of the keys
        store.down = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(aio.watch_health)
            while not aio.health.reachable:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        assert await aio.get("b") == b"2"
        assert aio.health.statistics()["store_outages"] == 1

    aio.health.every = 0.01
    trio.run(main)


def test_a_store_slow_for_one_request_answers_the_next_ones_probe():
    """One object stalled; the store answers: the next request's probe finds it there,
    and the request is served without waiting for the prober's period."""
    store = Switchable({"a": b"1", "zarr.json": b"{}"})
    aio = _async(store)
    aio.health.every = 3600.0  # the prober would not come back in this test

    async def main():
        store.down = True
        with pytest.raises(Unreachable):
            await aio.get("a")
        store.down = False
        return await aio.get("a")

    assert trio.run(main) == b"1"
    assert aio.health.reachable and aio.health.outages == 1


def test_an_answer_of_a_request_under_way_ends_the_outage():
    health = Health("s3://x")
    health.failed(Unreachable("no answer"))
    assert health.statistics()["store_reachable"] == 0
    assert "UNREACHABLE" in health.status()
    health.answered()
    assert health.reachable and health.statistics()["store_unreachable_since_s"] == 0
    health.check()  # no longer raises


def test_the_outage_is_logged_once_with_its_length(caplog):
    health = Health("s3://x")
    for _ in range(3):
        health.failed(Unreachable("no answer"))
    health.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("store unreachable" in line for line in lines) == 1, lines
    assert sum("reachable again after" in line for line in lines) == 1, lines


def test_a_call_cut_short_by_its_request_says_nothing_of_the_store():
    """Past the request's deadline no try is made; a try the request's deadline cut to
    less than half the store's own is no evidence of an outage."""
    store = Switchable({"a": b"1"})
    store.deadline_s = 10.0
    with deadline.request(0.0), pytest.raises(StoreError, match="deadline has passed") as e:
        store.get("a")
    assert not isinstance(e.value, Unreachable) and store.calls == 0
    store.down = True
    with deadline.request(0.3), pytest.raises(ConnectionRefusedError):
        store.get("a")  # the last try's own error, as from any store call


def test_request_deadline_bounds_every_call_made_for_it():
    assert deadline.left(5.0) == 5.0  # no request: the call's own
    with deadline.request(1.0):
        assert deadline.left(5.0) <= 1.0
        assert deadline.left(0.5) == 0.5
        deadline.detach()
        assert deadline.left(5.0) == 5.0
    with deadline.request(None):
        assert deadline.left(5.0) == 5.0


def test_the_disk_cache_serves_any_version_while_the_store_is_unreachable(tmp_path):
    store = Switchable({"c/0": b"chunk"})
    disk = DiskCache(str(tmp_path), store.url, 1 << 20, immutable=False)
    aio = _async(store, disk)
    limiter = trio.CapacityLimiter(2)

    async def main():
        first = await aio.get_with("c/0", bytearray, bytes, limiter, validator="v1")
        assert first == b"chunk"
        store.down = True
        # a newer validator (or none: never listed) is asked for; only the old is held
        again = await aio.get_with("c/0", bytearray, bytes, limiter, validator=None)
        assert again == b"chunk"
        with pytest.raises(Unreachable):
            await aio.get_with("c/1", bytearray, bytes, limiter, validator=None)

    trio.run(main)
    assert disk.stats.hits == 1
