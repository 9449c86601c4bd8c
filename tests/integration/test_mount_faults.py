"""Through the kernel, with faults injected into the store (``-o fault=``): each class of
fault fails only the reads that touch its keys (EIO, one log line naming the key) or the
writes and syncs it hits, healthy chunks keep reading right, and ``zarrmount -u`` still
completes; in a directory and in an Icechunk repository alike. Expected bytes come from
zarr-python reading the same store."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import zarr
from helpers.mounting import mounted, run_cli

pytestmark = pytest.mark.mount

ROW = 64 * 4  # bytes of one row of the array: 64 float32
CHUNK_ROWS = 16  # rows of a chunk: chunk (r, 0) holds rows 16r to 16r + 15


@dataclass
class Source:
    """What a test mounts, and zarr-python's view of the array it holds as stored now."""

    url: str
    opened: Callable[[], zarr.Array]

    def __fspath__(self) -> str:
        return self.url


def _icechunk(path: str) -> Source:
    icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
    icechunk.set_logs_filter("error")
    storage = icechunk.local_filesystem_storage(path)
    session = icechunk.Repository.create(storage).writable_session("main")
    _fill(zarr.create_array(session.store, shape=(64, 64), chunks=(16, 64), dtype="<f4"))
    session.commit("made")

    def opened() -> zarr.Array:
        repo = icechunk.Repository.open(storage)
        return zarr.open_array(repo.readonly_session("main").store, mode="r")

    return Source(f"icechunk+file://{path}", opened)


def _fill(array: zarr.Array) -> None:
    array[...] = np.arange(64 * 64, dtype="<f4").reshape(64, 64)


@pytest.fixture(params=["directory", "icechunk"])
def store(tmp_path, request):
    if request.param == "icechunk":
        return _icechunk(str(tmp_path / "repo"))
    root = str(tmp_path / "f.zarr")
    _fill(zarr.create_array(root, shape=(64, 64), chunks=(16, 64), dtype="<f4"))
    return Source(root, lambda: zarr.open_array(root, mode="r"))


def open_read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _expected(store: Source, first: int, count: int) -> bytes:
    return store.opened()[first : first + count].tobytes()


@pytest.mark.parametrize("kind", ["error", "short", "corrupt"])
def test_a_read_fault_fails_only_the_reads_of_its_chunk(store, kind):
    with mounted(store, [f"fault={kind}:c/1/0$"], tag=f"fault-{kind}") as m:
        path = m.p("array")
        with open(path, "rb", buffering=0) as f:
            assert f.read(CHUNK_ROWS * ROW) == _expected(store, 0, CHUNK_ROWS)  # chunk 0
            f.seek(2 * CHUNK_ROWS * ROW)
            assert f.read(CHUNK_ROWS * ROW) == _expected(store, 32, CHUNK_ROWS)  # chunk 2
            f.seek(CHUNK_ROWS * ROW)
            with pytest.raises(OSError) as e:
                f.read(ROW)  # chunk 1
            assert e.value.errno == errno.EIO
        assert m.wait_for_log("c/1/0"), m.read_log()[-2000:]
        m.assert_alive()
        if kind == "error":  # the store failed (short and corrupt values fail to decode)
            assert m.stats()["store_errors"] > 0


def test_a_delay_slows_reads_and_changes_no_byte(store):
    with mounted(store, ["fault=delay/0.05"], tag="fault-delay") as m:
        assert open_read(m.p("array")) == _expected(store, 0, 64)


def test_write_faults_keep_the_data_dirty_and_fsync_says_so(store):
    with mounted(
        store, ["rw", "writeback_delay=600", "fault=write_error:c/0/0$"], tag="fault-w"
    ) as m:
        fd = os.open(m.p("array"), os.O_WRONLY)
        try:
            os.write(fd, np.full(64, -1, dtype="<f4").tobytes())  # row 0: chunk (0, 0)
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno == errno.EIO
            assert m.stats()["cache_dirty_bytes"] > 0  # kept, to be tried again
        finally:
            try:
                os.close(fd)
            except OSError as e:  # close reports the same failure
                assert e.errno == errno.EIO
        done = run_cli(["-u", m.path], timeout=60)
        assert done.returncode == 0, done.stderr  # -u completes; the daemon says what failed
        assert m.proc.wait(60) != 0
    assert "c/0/0" in m.read_log()
    assert store.opened()[0, 0] == 0  # the store kept its old chunk


def test_sync_faults_fail_fsync_and_lose_no_write(store, tmp_path):
    """A directory: the chunk is stored, not made durable. A repository, where a sync is
    the commit: nothing is committed, and the journal keeps the write for the next mount,
    which commits it."""
    journal = f"journal={tmp_path / 'journal'}"
    options = ["rw", "writeback_delay=600", "fault=sync_error", journal]
    with mounted(store, options, tag="fault-s") as m, open(m.p("array"), "r+b") as f:
        f.write(np.full(64, 5, dtype="<f4").tobytes())
        f.flush()
        with pytest.raises(OSError) as e:
            os.fsync(f.fileno())
        assert e.value.errno == errno.EIO
    if store.url.startswith("icechunk+"):
        assert (store.opened()[0] == np.arange(64)).all()  # not committed
        with mounted(store, ["rw", journal], tag="fault-s-again"):
            pass
    assert (store.opened()[0] == 5).all()


def test_faults_switched_on_and_off_while_mounted(store):
    """``user.zarrmount.faults`` on the root of a mount started with ``-o fault=``: the
    faults from then on; only root and the mount's owner may set it. (The kernel sets
    no attribute on a read-only mount: switching faults needs an ``rw`` one.)"""
    options = ["rw", "fault=delay/0", "allow_other", "direct_io"]
    with mounted(store, options, tag="fault-switch") as m:
        path, rows = m.p("array"), CHUNK_ROWS * ROW
        with open(path, "rb", buffering=0) as f:
            assert f.read(rows) == _expected(store, 0, CHUNK_ROWS)
        os.setxattr(m.path, "user.zarrmount.faults", b"error:c/1/0$\ncorrupt:c/2/0$")
        with open(path, "rb", buffering=0) as f:
            f.seek(rows)
            with pytest.raises(OSError) as e:
                f.read(rows)
            assert e.value.errno == errno.EIO
        os.setxattr(m.path, "user.zarrmount.faults", b"")
        with open(path, "rb", buffering=0) as f:
            f.seek(rows)
            assert f.read(2 * rows) == _expected(store, CHUNK_ROWS, 2 * CHUNK_ROWS)
        with pytest.raises(OSError) as e:
            os.setxattr(m.path, "user.zarrmount.faults", b"explode")
        assert e.value.errno == errno.EINVAL
        other = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                "setfattr",
                "-n",
                "user.zarrmount.faults",
                "-v",
                "error",
                m.path,
            ],
            capture_output=True,
            text=True,
        )
        assert other.returncode != 0, other  # the kernel (mode 0555) or the daemon refuses
        assert "Permission denied" in other.stderr or "not permitted" in other.stderr
        assert "store faults now: none" in m.read_log()


def test_without_fault_option_there_is_no_control(store):
    with mounted(store, ["rw"], tag="fault-none") as m:
        with pytest.raises(OSError) as e:
            os.setxattr(m.path, "user.zarrmount.faults", b"error")
        assert e.value.errno == errno.ENOTSUP


def test_a_damaged_read_of_a_shard_being_rewritten_is_never_stored(tmp_path):
    """A shard's rewrite copies the inner chunks nobody wrote from the stored shard: read
    damaged then, the rewrite fails (EIO at fsync, the key in the log) and stores nothing;
    once the store reads right, the write is stored and every inner chunk is intact."""
    root = str(tmp_path / "s.zarr")
    array = zarr.create_array(
        root, shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="<u2",
        compressors=zarr.codecs.BloscCodec(cname="lz4"),
    )  # fmt: skip
    array[...] = np.arange(64, dtype="<u2").reshape(8, 8)
    expected = array[...]
    expected[7, 0] = 1
    with mounted(root, ["rw", "writeback_delay=600", "fault=delay@0"], tag="fault-sh") as m:
        fd = os.open(m.p("array"), os.O_RDWR)
        try:
            os.pwrite(fd, b"\x01\x00", 2 * (8 * 7))  # element (7, 0): inner chunk (1, 0)
            os.setxattr(m.path, "user.zarrmount.faults", b"corrupt")
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno == errno.EIO
            assert "inner chunks [[0, 0]] to keep do not decode" in m.read_log()
            assert np.array_equal(zarr.open_array(root, mode="r")[...][:4], expected[:4])
            os.setxattr(m.path, "user.zarrmount.faults", b"")
            os.fsync(fd)
        finally:
            os.close(fd)
    assert np.array_equal(zarr.open_array(root, mode="r")[...], expected)
