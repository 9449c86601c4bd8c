"""The fault-injecting store wrapper without FUSE: how faults are written, and what each
does to the calls of the store it wraps (a local store of known values)."""

from __future__ import annotations

import pytest

from zarrmount.store import StoreError
from zarrmount.store.faults import Fault, FaultSpecError, FaultyStore
from zarrmount.store.local import LocalStore

VALUE = bytes(range(256)) * 4


@pytest.fixture
def inner(tmp_path):
    store = LocalStore(str(tmp_path))
    for key in ("a/c/0/0", "a/c/0/1", "b/c/0"):
        store.set(key, VALUE)
    return store


def faulty(inner, *specs: str, seed: int = 0) -> FaultyStore:
    return FaultyStore(inner, [Fault.parse(s) for s in specs], seed)


@pytest.mark.parametrize(
    "text, kind, fraction, seconds, pattern",
    [
        ("error", "error", 1.0, 0.0, ""),
        ("stall", "stall", 1.0, 3600.0, ""),
        ("delay@0.25/2:^a/", "delay", 0.25, 2.0, "^a/"),
        ("corrupt:c/0/1$", "corrupt", 1.0, 0.0, "c/0/1$"),
        ("write_error:a:b", "write_error", 1.0, 0.0, "a:b"),
    ],
)
def test_faults_are_written_kind_fraction_seconds_pattern(text, kind, fraction, seconds, pattern):
    fault = Fault.parse(text)
    assert (fault.kind, fault.fraction, fault.seconds, fault.keys.pattern) == (
        kind,
        fraction,
        seconds,
        pattern,
    )


@pytest.mark.parametrize("text", ["explode", "error@2", "error@x", "delay/-1", "error:("])
def test_bad_faults_are_refused_saying_how(text):
    with pytest.raises(FaultSpecError, match="bad fault"):
        Fault.parse(text)


def test_each_read_fault_on_its_keys_only(inner):
    assert faulty(inner, "error:^a/c/0/0$").get("a/c/0/1") == VALUE
    with pytest.raises(StoreError, match="a/c/0/0: injected error"):
        faulty(inner, "error:^a/c/0/0$").get("a/c/0/0")
    assert faulty(inner, "short").get("b/c/0") == VALUE[: len(VALUE) // 2]
    corrupt = faulty(inner, "corrupt").get("b/c/0")
    assert len(corrupt) == len(VALUE) and corrupt != VALUE and corrupt[64:] == VALUE[64:]
    assert faulty(inner, "delay/0.001").get_range("b/c/0", 4, 8) == VALUE[4:12]
    store = faulty(inner, "corrupt")
    got = store.read_into("b/c/0", lambda n: bytearray(n))
    assert bytes(got) != VALUE and store.injected == 1


def test_write_and_sync_faults_leave_the_store_as_it_was(inner):
    store = faulty(inner, "write_error:^a/", "sync_error:^b/")
    with pytest.raises(StoreError, match="injected write error"):
        store.set("a/c/0/0", b"new")
    with pytest.raises(StoreError, match="injected write error"):
        store.delete("a/c/0/1")
    assert inner.get("a/c/0/0") == VALUE and inner.get("a/c/0/1") == VALUE
    store.set("b/c/0", b"fine")  # writes elsewhere pass
    with pytest.raises(StoreError, match="injected sync error"):
        store.sync(["b/c/0"])
    store.sync(["a/c/0/0"])


def test_a_fraction_fails_that_share_of_calls_the_same_way_for_a_seed(inner):
    def failures(seed: int) -> list[int]:
        store = faulty(inner, "error@0.3", seed=seed)
        failed = []
        for i in range(1000):
            try:
                store.get("b/c/0")
            except StoreError:
                failed.append(i)
        return failed

    first = failures(7)
    assert first == failures(7)  # reproducible
    assert 240 <= len(first) <= 360


def test_the_wrapper_shows_what_the_layers_above_read_and_set(inner):
    store = faulty(inner, "error")
    assert (store.url, store.remote, store.concurrency) == (
        inner.url,
        inner.remote,
        inner.concurrency,
    )
    store.root_marker = "zarr.json"
    assert inner.root_marker == "zarr.json" and store.root_marker == "zarr.json"
    assert store.list_dir("a/c") == inner.list_dir("a/c")


def test_a_stall_of_a_remote_store_ends_a_moment_after_the_calls_deadline(inner):
    inner.remote, inner.deadline_s = True, 30.0  # as an object store says of itself
    store = faulty(inner, "stall:^b/")
    with pytest.raises(StoreError, match="injected stall, no answer within 0.01 s"):
        store.get("b/c/0", deadline_s=0.01)
    assert store.get("a/c/0/0", deadline_s=0.01) == VALUE
