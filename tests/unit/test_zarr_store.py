"""zarr-python's stores behind zarrmount's blocking interface: values and ranges as the
zarr store holds them, listings, refusals, and a stalled call that fails in time."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from zarr.storage import MemoryStore

from zarrmount.store.base import StoreError
from zarrmount.store.zarr_store import ZarrPythonStore

VALUES = {
    "zarr.json": b'{"zarr_format": 3, "node_type": "group"}',
    "a/zarr.json": b"{}",
    "a/c/0/0": bytes(range(200)),
    "a/c/0/1": b"xyz",
    "g/b/zarr.json": b"{}",
}


@pytest.fixture
def store():
    inner = MemoryStore()
    wrapped = ZarrPythonStore(inner, "memory://test", deadline_s=5.0)
    for key, value in VALUES.items():
        wrapped.set(key, value)
    yield wrapped
    wrapped.close()


def test_values_and_ranges_are_the_zarr_stores(store):
    data = VALUES["a/c/0/0"]
    assert store.get("a/c/0/0") == data
    assert bytes(store.get_buffer("a/c/0/0")) == data
    assert store.get_range("a/c/0/0", 10, 20) == data[10:30]
    assert store.get_range("a/c/0/0", -16, 16) == data[-16:]
    assert store.get_range("a/c/0/0", -16, 4) == data[-16:-12]
    assert store.get("a/c/9/9") is None and store.get_range("nope", 0, 4) is None


def test_listings(store):
    assert store.list_dir("") == ["a", "g", "zarr.json"]
    assert store.list_dir("a") == ["c", "zarr.json"]
    assert store.list_tree("a") == dict.fromkeys(["zarr.json", "c/0/0", "c/0/1"], "")
    assert set(store.list_tree("")) == set(VALUES)


def test_delete_and_keys_outside_the_root(store):
    store.delete("a/c/0/1")
    assert store.get("a/c/0/1") is None
    with pytest.raises(StoreError, match="leave the store root"):
        store.get("a/../../etc/passwd")


def test_a_read_only_zarr_store_refuses_writes_with_the_reason():
    inner = MemoryStore(read_only=True)
    store = ZarrPythonStore(inner, "memory://ro", deadline_s=1.0)
    try:
        assert store.read_only_reason
        with pytest.raises(StoreError, match="read-only"):
            store.set("k", b"v")
        with pytest.raises(StoreError, match="read-only"):
            store.delete("k")
    finally:
        store.close()


class Stalling(MemoryStore):
    """A store whose gets never answer until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def get(self, key, prototype, byte_range=None):
        await self.release.wait()
        return await super().get(key, prototype, byte_range)


def test_a_stalled_call_fails_within_the_deadline_and_the_store_goes_on():
    inner = Stalling()
    store = ZarrPythonStore(inner, "memory://stall", deadline_s=0.5)
    try:
        start = time.monotonic()
        with pytest.raises(StoreError, match="no answer"):
            store.get("k")
        assert time.monotonic() - start < 0.5 * 1.2 + 0.2
        store._loop.loop.call_soon_threadsafe(inner.release.set)
        store.set("k", b"v")
        assert store.get("k") == b"v"
    finally:
        store.close()


def test_calls_from_many_threads_at_once(store):
    found: list[bytes | None] = []

    def read() -> None:
        for _ in range(50):
            found.append(store.get_range("a/c/0/0", 5, 3))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [VALUES["a/c/0/0"][5:8]] * 400
