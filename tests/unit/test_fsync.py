"""fsync makes written chunks durable: the files of a local store and the directories that
name them are fsynced, chunks written back earlier (cache pressure) included, and a failed
fsync is reported and tried again by the next one.

Which files exist comes from the store directory itself (``os.walk``), not from our code.
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.errors import FsError
from zarrmount.options import MountOptions
from zarrmount.store import local
from zarrmount.store.base import StoreError
from zarrmount.store.local import LocalStore


@pytest.fixture
def fsynced(monkeypatch) -> list[str]:
    """The paths ``os.fsync`` is called on inside the local store, in order."""
    paths: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(local.os, "fsync", record)
    return paths


def _files(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files}


def _dirs(root: str) -> set[str]:
    return {d for d, _, _ in os.walk(root)}


def test_local_sync_covers_files_and_every_directory_up_to_the_root(tmp_path, fsynced):
    root = str(tmp_path / "s")
    store = LocalStore(root)
    store.set("a/c/0/1", b"x")
    store.set("a/c/0/2", b"y")
    store.set("b", b"z")
    store.sync(["a/c/0/1", "a/c/0/2", "a/c/7/7", "gone"])  # the last two were never stored
    assert set(fsynced) == {root + "/a/c/0/1", root + "/a/c/0/2"} | _dirs(root)
    files = [p for p in fsynced if os.path.isfile(p)]
    assert fsynced[: len(files)] == files  # files before the directories that name them
    assert fsynced.index(root + "/a/c/0") < fsynced.index(root)


def test_local_sync_failure_is_a_store_error(tmp_path, monkeypatch):
    store = LocalStore(str(tmp_path))
    store.set("k", b"x")

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(local.os, "fsync", fail)
    with pytest.raises(StoreError, match="k: fsync failed"):
        store.sync(["k"])


class FlakySync(LocalStore):
    """Records the keys of each sync; the first one fails as a disk would."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.calls: list[list[str]] = []

    def sync(self, keys):
        self.calls.append(list(keys))
        if len(self.calls) == 1:
            raise StoreError("fsync failed") from OSError(errno.EIO, "I/O error")
        super().sync(keys)


def test_fsync_makes_every_written_chunk_durable_and_retries_after_a_failure(tmp_path, fsynced):
    root = str(tmp_path / "w.zarr")
    zarr.create_array(
        root, zarr_format=2, shape=(64, 64), chunks=(16, 16), dtype="<u2", fill_value=0
    )
    store = FlakySync(root)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    options.apply("rw,cache_size=1K,writeback_delay=600")  # pressure writes chunks back
    fs = assemble(dialect, node, pipeline, options).fs
    data = np.arange(64 * 64, dtype="<u2").tobytes()

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for off in range(0, len(data), 1000):  # 1000 bytes at a time, unaligned
            await fs.write(fh, off, data[off : off + 1000])
        before = len(fsynced)
        with pytest.raises(FsError) as failed:
            await fs.fsync(fh)
        assert failed.value.errno == errno.EIO and len(fsynced) == before
        await fs.fsync(fh)  # the keys of the failed sync are tried again
        await fs.fsync(fh)  # nothing new: nothing to do
        await fs.release(fh)

    trio.run(main)
    chunks = {p for p in _files(root) if not os.path.basename(p).startswith(".z")}
    assert len(chunks) == 16
    assert len(store.calls) == 2 and store.calls[0] == store.calls[1]
    assert {os.path.join(root, k) for k in store.calls[1]} == chunks
    assert chunks <= set(fsynced) and root in fsynced
    got = np.asarray(zarr.open_array(root, mode="r")[:])
    assert got.tobytes() == data


def test_unmount_flush_makes_dirty_data_durable(tmp_path, fsynced):
    root = str(tmp_path / "w.zarr")
    zarr.create_array(root, zarr_format=3, shape=(10, 10), chunks=(5, 5), dtype="u1", fill_value=0)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions()
    options.apply("rw,writeback_delay=600")
    mount = assemble(dialect, node, pipeline, options)
    fs = mount.fs

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        await fs.write(fh, 0, bytes(range(1, 101)))
        assert await mount.arrays.flush_all() == 0

    trio.run(main)
    chunks = {p for p in _files(root) if "/c/" in p}
    assert len(chunks) == 4 and chunks <= set(fsynced)
    assert np.asarray(zarr.open_array(root, mode="r")[:]).tobytes() == bytes(range(1, 101))
