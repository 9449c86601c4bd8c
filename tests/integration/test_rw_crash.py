"""Durability: what is in the store when the daemon dies or is told to stop.

* SIGKILL after fsync: every fsynced byte is in the store (each stored chunk fsynced to
  disk), and every chunk object in the store decodes (zarr-python reads the whole array; no
  torn chunk), even when the kill lands while write-backs of later, unsynced writes are
  under way.
* SIGTERM / SIGINT / ``zarrmount -u`` with the file still open and nothing fsynced: the
  daemon stores every written byte, unmounts and exits.

Only the daemon these tests started is signalled, by its PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import numpy as np
import pytest
from helpers import mounting, rw_tools
from helpers.rw_tools import SPECS, assert_store_equals

pytestmark = pytest.mark.mount


def _random_writes(fd, model, rng, count, max_len, lo=0, hi=None):
    """``count`` random pwrites inside ``[lo, hi)``; the model follows."""
    hi = model.size if hi is None else hi
    for _ in range(count):
        n = int(rng.integers(1, max_len))
        n = min(n, hi - lo)
        off = int(rng.integers(lo, hi - n + 1))
        data = rng.integers(0, 256, n, dtype=np.uint8)
        rw_tools.pwrite_all(fd, data.tobytes(), off)
        model[off : off + n] = data


def _every_chunk_decodes(store: rw_tools.Store) -> np.ndarray:
    """zarr-python reads every chunk (a torn or half-written one would fail to decode)."""
    try:
        return store.read_bytes()
    except Exception as e:  # noqa: BLE001 - the message is the finding
        raise AssertionError(f"zarr-python cannot read the store after the crash: {e!r}") from e


@pytest.mark.parametrize("delay", [0.0, 0.13])
@pytest.mark.parametrize("name", ["v2f", "sharded"])
def test_sigkill_after_fsync_keeps_fsynced_bytes(tmp_path, name, delay):
    """fsync, then a thread keeps writing (O_DIRECT: one request per write) while idle
    write-backs run every 0.1 s (``writeback_delay=0``); SIGKILL lands among them, once
    the first of them has stored something."""
    rng = np.random.default_rng(11 + int(delay * 100))
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=rng)
    meta = store.open()
    chunk_ids = rw_tools.chunk_of_bytes(meta.shape, meta.chunks, meta.dtype.itemsize)
    model = store.read_bytes()
    attempted: list[tuple[int, bytes]] = []
    with rw_tools.rw_mount(store, ["writeback_delay=0"], tag="rwkill") as m:
        fd = os.open(m.p(name), os.O_RDWR)
        dfd = os.open(m.p(name), os.O_RDWR | os.O_DIRECT)
        stop = threading.Event()
        errors: list[OSError] = []

        def writer() -> None:
            wrng = np.random.default_rng(99)
            while not stop.is_set():
                n = int(wrng.integers(1, 4000))
                off = int(wrng.integers(0, model.size - n + 1))
                data = wrng.integers(0, 256, n, dtype=np.uint8).tobytes()
                attempted.append((off, data))  # before: it may land even if we never hear
                try:
                    os.pwrite(dfd, data, off)
                except OSError as e:
                    errors.append(e)
                    return

        try:
            _random_writes(fd, model, rng, 60, 3000)
            os.fsync(fd)
            synced = model.copy()
            assert m.stats()["cache_dirty_bytes"] == 0, m.stats()
            sets = m.stats()["store_sets"]
            thread = threading.Thread(target=writer)
            thread.start()
            try:
                # kill only once idle write-backs of the new writes are going on, among
                # enough of them to matter (the writer's pace depends on the machine)
                started = mounting.wait_until(
                    lambda: m.stats()["store_sets"] > sets and len(attempted) > 20, 10, 0.01
                )
                assert started, f"no idle write-back within 10 s: {m.stats()}"
                time.sleep(delay)
                pid = m.proc.pid
                assert mounting.pid_alive(pid) and m.path in mounting.pid_cmdline(pid)
                os.kill(pid, signal.SIGKILL)
                assert rw_tools.wait_exit(m.proc, 10) == -signal.SIGKILL
            finally:
                stop.set()
                thread.join(10)
        finally:
            for f in (fd, dfd):
                # the mount is dead: close may fail with ENOTCONN
                with contextlib.suppress(OSError):
                    os.close(f)
        rw_tools.lazy_unmount_dead(m.path)
    assert len(attempted) > 20, f"only {len(attempted)} writes before the kill"

    got = _every_chunk_decodes(store)
    # Chunks are replaced whole: each stored chunk is the chunk as it was at one moment
    # between the fsync and the kill (with no later write at all: exactly the fsynced bytes).
    bad = rw_tools.unexplained_chunks(got, synced, attempted, chunk_ids)
    assert bad.size == 0, (
        f"{bad.size} chunks match no moment after the fsync (torn/mixed or fsynced data "
        f"lost), e.g. chunk number {bad[:5]} (C order over the chunk grid)"
    )
    touched = np.zeros(model.size, bool)
    for off, data in attempted:
        touched[off : off + len(data)] = True
    lost = np.flatnonzero(~touched & (got != synced))
    assert lost.size == 0, f"fsynced bytes lost after SIGKILL, first at offset {lost[0]}"


def test_sigkill_only_fsynced_write_survives(tmp_path):
    """No background write-back at all (long delay): after fsync + SIGKILL the store is
    exactly the fsynced state; the unsynced writes are simply lost (not half-applied)."""
    name = "v3"
    store, model, rng = rw_tools.seeded_store(tmp_path, name, 12)
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwkill") as m:
        fd = os.open(m.p(name), os.O_RDWR)
        try:
            _random_writes(fd, model, rng, 50, 2000)
            os.fdatasync(fd)
            synced = model.copy()
            st = m.stats()  # each chunk stored once (no write-back before), each made durable
            assert st["store_synced"] == st["store_sets"] + st["store_deletes"] > 0, st
            _random_writes(fd, model, rng, 20, 2000)
            assert m.stats()["cache_dirty_bytes"] > 0
            os.kill(m.proc.pid, signal.SIGKILL)
            assert rw_tools.wait_exit(m.proc, 10) == -signal.SIGKILL
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        rw_tools.lazy_unmount_dead(m.path)
    got = _every_chunk_decodes(store)
    assert_store_equals(store, synced, "after fdatasync + SIGKILL")
    assert got.size == synced.size


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "zarrmount -u"])
@pytest.mark.parametrize("name", ["v2f", "sharded"])
def test_stop_without_fsync_stores_everything(tmp_path, name, how):
    store, model, rng = rw_tools.seeded_store(tmp_path, name, 13)
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwterm") as m:
        fd = os.open(m.p(name), os.O_RDWR)
        try:
            _random_writes(fd, model, rng, 60, 3000)
            st = m.stats()
            assert st["cache_dirty_bytes"] > 0, st
            # The file stays open: no close (flush) stores the data for us.
            t0 = time.monotonic()
            if how == "zarrmount -u":
                res = mounting.run_cli(["-u", m.path], timeout=60)
                assert res.returncode == 0, res
            else:
                os.kill(m.proc.pid, getattr(signal, how))
            status = rw_tools.wait_exit(m.proc, 30)
            waited = time.monotonic() - t0
            assert status is not None, f"the daemon did not exit {waited:.1f} s after {how}"
            assert status == 0, f"exit status {status}; log:\n{m.read_log()}"
            assert not mounting.is_mounted(m.path), f"still mounted after {how}"
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    assert_store_equals(store, model, f"after {how} without fsync")
    assert not store.temp_files()
