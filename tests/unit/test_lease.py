"""The writer lease of object stores, against fsspec's in-memory filesystem: the object is
read back with fsspec itself and records of other holders are written by hand, so the
tests check what is in the store rather than what the lease says about itself. Time is an
injected clock; nothing sleeps or depends on the machine's pace."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid

import fsspec
import pytest

from zarrmount.store import StoreError
from zarrmount.store import lease as lease_mod
from zarrmount.store.lease import TTL_S, WriterLease, boot_id
from zarrmount.store.local import LOCK_NAME
from zarrmount.store.remote import FsspecStore

NOW = 1_800_000_000.0


class Clock:
    """Wall clock under the test's control."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def url():
    """A fresh ``memory://`` store (the memory filesystem is global to the process)."""
    root = f"memory://zm-lease-{uuid.uuid4().hex}/store"
    yield root
    fs = fsspec.filesystem("memory")
    top = root.rsplit("/", 1)[0]
    if fs.exists(top):
        fs.rm(top, recursive=True)


@pytest.fixture
def store(url):
    return FsspecStore(url, deadline_s=5)


def lease_path(url: str) -> str:
    return f"{url}/{LOCK_NAME}"


def stored(url: str) -> dict | None:
    fs = fsspec.filesystem("memory")
    path = lease_path(url)
    return json.loads(fs.cat_file(path)) if fs.exists(path) else None


def plant(url: str, **fields) -> dict:
    """Write another holder's lease (defaults: a live-looking one on another host)."""
    record = {
        "holder": "pid 1 on elsewhere, mounted at /mnt/other",
        "hostname": "elsewhere",
        "pid": 1,
        "boot_id": "other-boot",
        "token": "theirs",
        "expires": NOW + 30,
    }
    record.update(fields)
    fsspec.filesystem("memory").pipe_file(lease_path(url), json.dumps(record).encode())
    return record


def take(store, holder: str = "pid 2 on here, mounted at /mnt/me", clock=None, **kw):
    return WriterLease(store, holder, clock=clock or Clock()).take(pause=lambda s: None, **kw)


def here(**fields) -> dict:
    """Fields of a record written on this host in this boot."""
    return {
        "hostname": socket.gethostname(),
        "boot_id": boot_id(),
        "pid_ns": os.readlink("/proc/self/ns/pid"),
        **fields,
    }


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@contextlib.contextmanager
def live_process(argv: list[str]):
    """A process of ours for the duration, once it runs ``argv``; killed by pid at the end."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    try:
        for _ in range(6000):  # an outcome, not a time: exec has finished
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[-2:-1] == [argv[-1].encode()]:
                    break
            time.sleep(0.01)
        else:
            raise AssertionError(f"{argv} did not start")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


# -- taking it ------------------------------------------------------------------------


def test_take_writes_the_record_at_the_store_root(url, store):
    lease = take(store, "pid 2 on here, mounted at /mnt/me")
    record = stored(url)
    assert record == {
        "holder": "pid 2 on here, mounted at /mnt/me",
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "boot_id": boot_id(),
        "pid_ns": os.readlink("/proc/self/ns/pid"),
        "token": lease.token,
        "expires": NOW + TTL_S,
    }
    assert len(record["token"]) >= 16
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert record["boot_id"] == f.read().strip()


def test_a_second_writer_is_refused_naming_the_first(url, store):
    first = take(store, "pid 7 on here, mounted at /mnt/first")
    with pytest.raises(
        StoreError,
        match=r"^mounted read-write already \(pid 7 on here, "
        r"mounted at /mnt/first\)$",
    ):
        take(FsspecStore(url), "second")
    assert stored(url)["token"] == first.token


def test_a_live_lease_of_another_host_is_refused(url, store):
    theirs = plant(url)
    with pytest.raises(StoreError, match=r"mounted read-write already \(pid 1 on elsewhere"):
        take(store)
    assert stored(url) == theirs


def test_a_hostile_holder_text_is_shown_tamed(url, store):
    plant(url, holder="\x1b]0;pwned\x07" + "x" * 1000)
    with pytest.raises(StoreError) as e:
        take(store)
    message = str(e.value)
    assert "\x1b" not in message and "\x07" not in message and len(message) < 400


def test_an_expired_lease_is_taken_over(url, store):
    plant(url, expires=NOW - 1)
    lease = take(store)
    assert stored(url)["token"] == lease.token


def test_a_lease_expiring_right_now_is_free(url, store):
    plant(url, expires=NOW)
    lease = take(store)
    assert stored(url)["token"] == lease.token


def test_a_dead_daemons_lease_on_this_host_is_taken_at_once(url, store, dead_pid):
    plant(url, **here(pid=dead_pid, expires=NOW + TTL_S))
    lease = take(store)
    assert stored(url)["token"] == lease.token


def test_a_reused_pid_that_is_no_zarrmount_is_dead(url, store):
    with live_process(["sleep", "600"]) as pid:
        plant(url, **here(pid=pid))
        lease = take(store)
        assert stored(url)["token"] == lease.token


def test_a_live_zarrmount_pid_on_this_host_holds_it(url, store):
    argv = [sys.executable, "-c", "import sys; sys.stdin.read()", "zarrmount"]
    with live_process(argv) as pid:
        theirs = plant(url, **here(pid=pid))
        with pytest.raises(StoreError, match="mounted read-write already"):
            take(store)
    assert stored(url) == theirs


@pytest.mark.parametrize(
    "other",
    [{"boot_id": "an-earlier-boot"}, {"hostname": "elsewhere"}, {"pid_ns": "pid:[1]"}],
    ids=["boot", "host", "container"],
)
def test_a_dead_pid_proves_nothing_in_another_boot_host_or_pid_ns(url, store, dead_pid, other):
    theirs = plant(url, **{**here(pid=dead_pid), **other})
    with pytest.raises(StoreError, match="mounted read-write already"):
        take(store)
    assert stored(url) == theirs


# -- malformed leases -----------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[1, 2]",
        b'{"holder": "x"}',
        b'{"holder": "x", "token": 3}',
        b"",
        b"[" * 50_000,
        b'"' + b"x" * (1 << 17) + b'"',
    ],
    ids=["text", "list", "fields-missing", "wrong-type", "empty", "deep", "huge"],
)
def test_a_malformed_lease_is_held_until_a_ttl_after_it_was_written(url, store, content):
    fs = fsspec.filesystem("memory")
    fs.pipe_file(lease_path(url), content)
    written = fs.modified(lease_path(url)).timestamp()
    with pytest.raises(
        StoreError,
        match=r"mounted read-write already \(unknown holder: "
        r"\.zarrmount\.lock is malformed",
    ):
        take(store, clock=Clock(written + TTL_S - 1))
    assert fs.cat_file(lease_path(url)) == content
    lease = take(store, clock=Clock(written + TTL_S + 1))
    assert stored(url)["token"] == lease.token


def test_a_malformed_lease_of_unknown_age_is_refused_saying_so(url, store, monkeypatch):
    fsspec.filesystem("memory").pipe_file(lease_path(url), b"garbage")

    def no_mtime(path):
        raise NotImplementedError

    monkeypatch.setattr(store.fs, "modified", no_mtime)
    with pytest.raises(StoreError, match="no zarrmount lease and its age is unknown"):
        take(store, clock=Clock(NOW + 10 * TTL_S))
    assert fsspec.filesystem("memory").cat_file(lease_path(url)) == b"garbage"


# -- races while taking it ------------------------------------------------------------


def test_conditional_create_loses_to_a_writer_that_came_first(url, store, monkeypatch):
    """Between our read (nothing there) and our create, another mount wrote its lease."""
    real_get = store.get
    seen = []

    def get_after_race(key, **kw):
        if not seen:
            seen.append(key)
            plant(url, holder="the racer")
            return None
        return real_get(key, **kw)

    monkeypatch.setattr(store, "get", get_after_race)
    with pytest.raises(StoreError, match=r"mounted read-write already \(the racer\)"):
        take(store)
    assert stored(url)["holder"] == "the racer"


def test_without_conditional_create_the_write_is_read_back(url, store, monkeypatch):
    monkeypatch.setattr(lease_mod, "CONDITIONAL_CREATE", frozenset())
    pauses = []
    lease = WriterLease(store, "me", clock=Clock()).take(pause=pauses.append)
    assert pauses == [lease_mod.SETTLE_S]
    assert stored(url)["token"] == lease.token


@pytest.mark.parametrize("conditional", [True, False])
def test_a_takeover_race_is_lost_to_the_later_writer(url, store, monkeypatch, conditional):
    """Two mounts take over one stale lease; the other one's write lands during our pause."""
    if not conditional:
        monkeypatch.setattr(lease_mod, "CONDITIONAL_CREATE", frozenset())
    plant(url, expires=NOW - 1)
    lease = WriterLease(store, "me", clock=Clock())
    with pytest.raises(StoreError, match=r"mounted read-write already \(the racer\)"):
        lease.take(pause=lambda s: plant(url, holder="the racer", token="racer"))
    assert stored(url)["token"] == "racer"


# -- keeping it -----------------------------------------------------------------------


def test_renewal_extends_the_expiry(url, store):
    clock = Clock()
    lease = take(store, clock=clock)
    clock.now += TTL_S / 3
    assert lease.renew()
    assert stored(url)["expires"] == NOW + TTL_S / 3 + TTL_S
    assert stored(url)["token"] == lease.token
    clock.now += 2 * TTL_S  # a later mount elsewhere would still find it live: renewed
    assert lease.renew()
    with pytest.raises(StoreError, match="mounted read-write already"):
        take(FsspecStore(url), clock=Clock(clock.now + TTL_S - 1))


def test_a_renewal_that_finds_another_token_logs_once_and_stops(url, store, caplog):
    clock = Clock()
    lease = take(store, clock=clock)
    theirs = plant(url, holder="the forcer", token="forced", expires=NOW + 100)
    with caplog.at_level(logging.ERROR, logger="zarrmount.store.lease"):
        assert not lease.renew()
        assert not lease.renew()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "the forcer" in errors[0].getMessage()
    assert stored(url) == theirs  # not overwritten back
    lease.close()
    assert stored(url) == theirs  # and not deleted: it is not ours


def test_a_failed_renewal_is_logged_and_retried(url, store, monkeypatch, caplog):
    lease = take(store)

    def broken(key, value):
        raise StoreError("network down")

    monkeypatch.setattr(store, "set", broken)
    with caplog.at_level(logging.WARNING, logger="zarrmount.store.lease"):
        assert lease.renew()  # no crash; the next period tries again
    assert "network down" in caplog.text
    monkeypatch.undo()
    assert lease.renew() and stored(url)["token"] == lease.token


def test_the_renewal_thread_renews_and_stops_at_close(url, store):
    ticks = iter(range(10**9))
    lease = WriterLease(store, "me", ttl_s=0.03, clock=lambda: NOW + next(ticks))
    lease.take(pause=lambda s: None)
    first = stored(url)["expires"]
    lease.start()
    try:
        for _ in range(3000):  # an outcome, not a time: wait for a renewal to land
            record = stored(url)
            if record is not None and record["expires"] > first:
                break
            lease._stop.wait(0.01)
        assert stored(url)["expires"] > first
    finally:
        lease.close()
    assert not lease._thread.is_alive()
    assert stored(url) is None


# -- giving it up ---------------------------------------------------------------------


def test_close_deletes_our_lease_and_then_another_mount_takes_it(url, store):
    lease = take(store)
    lease.close()
    assert stored(url) is None
    lease.close()  # twice is harmless
    other = take(FsspecStore(url), "next")
    assert stored(url)["token"] == other.token
    lease.close()
    assert stored(url)["token"] == other.token


def test_close_leaves_another_token_in_place(url, store):
    lease = take(store)
    theirs = plant(url, token="someone-else", expires=NOW + 100)
    lease.close()
    assert stored(url) == theirs


# -- the store hook -------------------------------------------------------------------


def test_fsspec_store_lock_writer_returns_a_renewed_lease(url, store):
    lease = store.lock_writer("pid 3 on here, mounted at /mnt/x")
    try:
        assert isinstance(lease, WriterLease)
        assert lease._thread is not None and lease._thread.is_alive()
        assert stored(url)["holder"] == "pid 3 on here, mounted at /mnt/x"
        with pytest.raises(StoreError, match=r"\(pid 3 on here, mounted at /mnt/x\)"):
            FsspecStore(url).lock_writer("another")
    finally:
        lease.close()
    assert stored(url) is None


def test_read_only_stores_take_no_lease():
    assert FsspecStore("http://127.0.0.1:9/data.zarr").lock_writer("me") is None
