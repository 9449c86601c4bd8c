"""Deadlines of the remote store layer, without a mount: a stalled HTTP request is
cancelled at the deadline; a key whose fetch failed a moment ago gets a short deadline
(the kernel re-sends a failed read at once); the mount command gives up on a store that
does not answer; ``-o rw`` is refused for sources that can never be written."""

from __future__ import annotations

import time
import zipfile

import pytest
import trio
import zarr
from helpers.remote_servers import FaultProxy, RangeHTTPServer
from helpers.store_doubles import ReadOnlyRemoteDouble

from zarrmount import cli
from zarrmount.format.model import GroupNode
from zarrmount.options import MountOptions
from zarrmount.store import StoreError, open_store
from zarrmount.store import aio as aio_module
from zarrmount.store.aio import AsyncStore
from zarrmount.store.failures import RecentFailures
from zarrmount.store.remote import FsspecStore


@pytest.fixture
def site(tmp_path):
    """A v3 group (written by zarr-python) served over HTTP, behind the fault proxy."""
    root = tmp_path / "site"
    g = zarr.open_group(str(root / "a.zarr"), mode="w", zarr_format=3)
    g.create_array("x", shape=(4,), chunks=(2,), dtype="<i4")[:] = [1, 2, 3, 4]
    with RangeHTTPServer(root) as server, FaultProxy(server.url) as proxy:
        yield root / "a.zarr", proxy


# -- fsspec requests are cancelled at the deadline ---------------------------------------


def test_stalled_http_request_is_cancelled_at_the_deadline(site):
    root, proxy = site
    store = FsspecStore(f"{proxy.url}/a.zarr", deadline_s=0.5)
    proxy.set("stall", r"/a\.zarr/zarr\.json$")
    t0 = time.monotonic()
    with pytest.raises(StoreError) as e:
        store.get("zarr.json")
    took = time.monotonic() - t0
    assert 0.45 < took < 0.9, took
    assert "no answer" in str(e.value) and "within 0.5 s" in str(e.value)
    assert proxy.count("GET", r"zarr\.json$", "stall") == 1  # no try after the deadline

    t0 = time.monotonic()
    with pytest.raises(StoreError):
        store.get("zarr.json", deadline_s=0.2)  # a shorter deadline for one call
    assert time.monotonic() - t0 < 0.5

    proxy.set("pass")
    assert store.get("zarr.json") == (root / "zarr.json").read_bytes()


# -- a key that failed a moment ago --------------------------------------------------------


def test_recent_failures_expire():
    now = [100.0]
    failed = RecentFailures(fresh_s=5.0, clock=lambda: now[0])
    assert not failed.is_fresh("a")
    failed.note("a")
    now[0] += 4.9
    assert failed.is_fresh("a") and not failed.is_fresh("b")
    failed.note("b")
    now[0] += 0.2
    assert not failed.is_fresh("a") and failed.is_fresh("b")
    failed.forget("b")
    assert not failed.is_fresh("b")
    for i in range(1000):  # bounded: stale keys are dropped as new failures come
        failed.note(f"k{i}")
        now[0] += 1.0
    assert len(failed) <= 6


class _StallingStore(ReadOnlyRemoteDouble):
    """A remote store whose gets of ``stalled`` keys time out at the deadline they are
    given (as a backend that can cancel its requests); records those deadlines."""

    url = "stalling://"

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self.stalled: set[str] = set()
        self.deadlines: list[float | None] = []

    def get(self, key, *, deadline_s=None):
        self.deadlines.append(deadline_s)
        if key in self.stalled:
            deadline = self.deadline_s if deadline_s is None else deadline_s
            time.sleep(deadline)
            raise StoreError(f"{key}: no answer within {deadline:g} s")
        return key.encode()


def test_repeat_of_a_fresh_failure_gets_a_short_deadline(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(aio_module, "RecentFailures", lambda: RecentFailures(clock=lambda: now[0]))
    monkeypatch.setattr(aio_module, "RETRY_DEADLINE_S", 0.05)
    store = _StallingStore(deadline_s=0.3)
    store.stalled.add("k")
    astore = AsyncStore(store)
    # One key stalls while the store answers the others; the outage a stall begins (and
    # its probe) is test_store_health.py's: here the store stays known as reachable.
    monkeypatch.setattr(astore.health, "failed", lambda _error: None)

    async def timed(fetch):
        t0 = time.monotonic()
        try:
            result = await fetch()
        except StoreError as e:
            result = e
        return result, time.monotonic() - t0

    async def main():
        got, took = await timed(lambda: astore.get("k"))
        assert isinstance(got, StoreError) and took >= 0.3
        now[0] = 1.0  # the kernel's re-send, another reader: fails fast
        got, took = await timed(lambda: astore.get_range("k", 0, 1))
        assert isinstance(got, StoreError) and took < 0.25, took
        assert "a short try" in str(got)  # the log says why it gave up so soon
        assert await astore.get("other") == b"other"  # other keys: as ever
        now[0] = 4.0  # a failed short try does not make the failure fresh again
        got, took = await timed(lambda: astore.get("k"))
        assert isinstance(got, StoreError) and took < 0.25, took
        now[0] = 5.5  # no longer fresh: a whole deadline again
        got, took = await timed(lambda: astore.get("k"))
        assert isinstance(got, StoreError) and took >= 0.3
        store.stalled.clear()  # the store is back: the short try is enough
        now[0] = 6.0
        assert await astore.get("k") == b"k"
        store.stalled.add("k")  # a success forgets the failure: a whole deadline
        now[0] = 6.1
        got, took = await timed(lambda: astore.get("k"))
        assert isinstance(got, StoreError) and took >= 0.3

    trio.run(main)
    short = min(0.05, 0.3 * aio_module.RETRY_SHARE)  # a twentieth of the deadline at most
    assert store.deadlines == [None, short, None, short, None, short, None]
    assert astore.stats.errors == 5 and astore.stats.gets == 2


# -- the mount command ----------------------------------------------------------------------


def test_mount_command_gives_up_on_a_store_that_does_not_answer(site):
    _, proxy = site
    proxy.set("stall", r"/a\.zarr/zarr\.json$", methods=("GET", "HEAD"))
    options = MountOptions()
    options.apply("timeout=0.5")
    source = f"{proxy.url}/a.zarr"
    t0 = time.monotonic()
    with pytest.raises(cli.CommandError) as e:
        cli._open(source, options)
    assert time.monotonic() - t0 < 1.0
    message = str(e.value)
    assert message.startswith(f"cannot open {source}: ") and "\n" not in message
    assert "no answer" in message and "within 0.5 s" in message


def test_rw_refused_for_read_only_sources(tmp_path, site):
    zarr_dir, proxy = site
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in zarr_dir.rglob("*"):
            if f.is_file():
                z.write(f, f.relative_to(zarr_dir).as_posix())
    rw = MountOptions()
    rw.apply("rw")
    for source, why in ((f"{proxy.url}/a.zarr", "HTTP"), (str(path), "zip")):
        proxy.clear()
        with pytest.raises(cli.CommandError) as e:
            cli._open(source, rw)
        message = str(e.value)
        assert why in message and "read-only" in message and "-o ro" in message, message
        assert proxy.requests == []  # refused before asking the store anything
        _, root, _ = cli._open(source, MountOptions())  # read-only: fine
        assert isinstance(root, GroupNode) and root.path == ""
    assert open_store(str(tmp_path)).read_only_reason is None
    assert open_store(f"memory://zm-rw-{time.monotonic_ns()}").read_only_reason is None
