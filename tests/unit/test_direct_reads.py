"""Direct reads without FUSE: chunks stored as they are read go from their files into the
reply, equal to zarr-python's values, and follow other writers and our own writes; a
damaged or escaping file fails only its reads; open files stay bounded."""

from __future__ import annotations

import errno
import logging
import os

import numpy as np
import pytest
import trio
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.cache.open_files import OPEN_FILES, OpenFiles
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import FsError

TTL = 0.05


def _mount(root: str, options: str = ""):
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    opts = MountOptions(metadata_ttl=TTL, negative_ttl=TTL)
    if options:
        opts.apply(options)
    return assemble(dialect, node, pipeline, opts)


async def _open(fs, name: str = "array", flags: int = os.O_RDONLY) -> int:
    return fs.open((await fs.lookup(1, name)).ino, flags)


def _values(root: str) -> bytes:
    return np.ascontiguousarray(zarr.open_array(root, mode="r")[:]).tobytes()


@pytest.fixture(scope="module", params=[2, 3])
def raw_store(request, tmp_path_factory):
    """An uncompressed array of odd shape (edge chunks on every axis), some chunks absent."""
    root = str(tmp_path_factory.mktemp("direct") / "raw.zarr")
    a = zarr.create_array(
        root, shape=(13, 11, 7), chunks=(4, 3, 5), dtype="<i2", fill_value=-3,
        compressors=None, zarr_format=request.param,
    )  # fmt: skip
    a[:] = np.arange(13 * 11 * 7, dtype="<i2").reshape(13, 11, 7)
    a[4:8, 3:6, :5] = -3  # one chunk holds only the fill value: not written
    return root


@given(data=st.data())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_reads_equal_zarr_python_and_come_from_the_files(raw_store, data):
    expected = _values(raw_store)
    ranges = data.draw(
        st.lists(st.tuples(st.integers(0, len(expected)), st.integers(0, 600)), min_size=1)
    )
    cache = data.draw(st.sampled_from(["0", "64M"]))
    mount = _mount(raw_store, f"cache_size={cache}")

    async def main():
        fh = await _open(mount.fs)
        return [bytes(await mount.fs.read(fh, off, n)) for off, n in ranges]

    for (off, n), got in zip(ranges, trio.run(main), strict=True):
        assert got == expected[off : off + n], (off, n)
    stats = mount.fs.stats()
    if any(off < len(expected) and n for off, n in ranges):
        assert stats["cache_direct_reads"] > 0
    assert stats["cache_partial_reads"] == 0 and stats["cache_open_files"] <= OPEN_FILES


def _replace(path: str, data: bytes) -> None:
    """What many writers do: a new file renamed over the old one (a new inode)."""
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.replace(path + ".new", path)


@pytest.mark.parametrize("how", ["renamed", "in place"])
def test_another_writers_chunk_is_read_after_the_period(tmp_path, how):
    root = str(tmp_path / "a.zarr")
    a = zarr.create_array(root, shape=(4, 1024), chunks=(1, 1024), dtype="<i4", compressors=None)
    a[:] = 1
    mount = _mount(root)
    chunk = os.path.join(root, "c", "2", "0")
    new = np.full(1024, 9, "<i4").tobytes()

    async def main():
        fh = await _open(mount.fs)
        first = bytes(await mount.fs.read(fh, 0, 4 * 4096))
        if how == "renamed":
            _replace(chunk, new)
        else:
            with open(chunk, "r+b") as f:
                f.write(new)
        await trio.sleep(TTL * 2)
        return first, bytes(await mount.fs.read(fh, 0, 4 * 4096))

    first, second = trio.run(main)
    assert first == np.full((4, 1024), 1, "<i4").tobytes()
    assert second == _values(root)
    assert np.frombuffer(second, "<i4")[2048:3072].tolist() == [9] * 1024


def test_our_own_writes_are_read_back_after_they_leave_the_cache(tmp_path):
    root = str(tmp_path / "w.zarr")
    a = zarr.create_array(root, shape=(8, 256), chunks=(2, 256), dtype="u1", compressors=None)
    a[:] = 5
    mount = _mount(root, "rw,cache_size=1K")  # nothing stays cached: reads go to the files

    async def main():
        fh = await _open(mount.fs, flags=os.O_RDWR)
        assert bytes(await mount.fs.read(fh, 0, 2048)) == bytes([5]) * 2048  # files opened
        await mount.fs.write(fh, 600, bytes([7]) * 1000)
        await mount.fs.fsync(fh)
        got = bytes(await mount.fs.read(fh, 0, 2048))
        await mount.fs.release(fh)
        return got

    want = bytearray([5]) * 2048
    want[600:1600] = bytes([7]) * 1000
    assert trio.run(main) == want == _values(root)


def test_a_short_chunk_file_fails_its_reads_alone(tmp_path, caplog):
    root = str(tmp_path / "s.zarr")
    a = zarr.create_array(root, shape=(2, 1024), chunks=(1, 1024), dtype="<f4", compressors=None)
    a[:] = 2.5
    with open(os.path.join(root, "c", "1", "0"), "r+b") as f:
        f.truncate(100)
    mount = _mount(root)

    async def main():
        fh = await _open(mount.fs)
        good = bytes(await mount.fs.read(fh, 0, 4096))
        with pytest.raises(FsError) as failed:
            await mount.fs.read(fh, 4096, 4096)
        return good, failed.value.errno

    with caplog.at_level(logging.ERROR):
        good, code = trio.run(main)
    assert good == np.full(1024, 2.5, "<f4").tobytes() and code == errno.EIO
    assert "c/1/0" in caplog.text


def test_a_chunk_file_leading_outside_the_root_is_refused(tmp_path):
    outside = tmp_path / "secret"
    outside.write_bytes(b"\x01" * 4096)
    root = str(tmp_path / "o.zarr")
    a = zarr.create_array(root, shape=(2, 1024), chunks=(1, 1024), dtype="<i4", compressors=None)
    a[:] = 0
    a[0] = 3
    os.makedirs(os.path.join(root, "c", "1"), exist_ok=True)  # the fill value's: not written
    os.symlink(outside, os.path.join(root, "c", "1", "0"))
    mount = _mount(root)

    async def main():
        fh = await _open(mount.fs)
        with pytest.raises(FsError) as failed:
            await mount.fs.read(fh, 4096, 4096)
        return failed.value.errno, bytes(await mount.fs.read(fh, 0, 4096))

    code, first = trio.run(main)
    assert code == errno.EIO and first == np.full(1024, 3, "<i4").tobytes()


def test_pages_not_in_the_page_cache_are_read_in_a_worker_thread(tmp_path):
    root = str(tmp_path / "d.zarr")
    a = zarr.create_array(root, shape=(64, 512), chunks=(8, 512), dtype="<u2", compressors=None)
    a[:] = np.arange(64 * 512, dtype="<u2").reshape(64, 512)
    mount = _mount(root)
    expected = _values(root)

    def evict() -> None:
        for name in os.listdir(os.path.join(root, "c")):
            path = os.path.join(root, "c", name, "0")
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)

    async def main():
        fh = await _open(mount.fs)
        first = bytes(await mount.fs.read(fh, 0, len(expected)))  # files opened, kept
        evict()
        return first, bytes(await mount.fs.read(fh, 0, len(expected)))

    assert trio.run(main) == (expected, expected)


def test_open_files_are_bounded_and_closed_when_dropped():
    class File:
        closed = 0

        def close(self) -> None:
            File.closed += 1

    files = OpenFiles(capacity=3)
    for k in range(5):
        files.put(("a", "file", (k,)), File(), since=float(k))
    assert len(files) == 3 and File.closed == 2 and files.get(("a", "file", (0,))) is None
    assert files.recheck(lambda key, entry: entry.since >= 4.0) == 2
    assert File.closed == 4 and files.get(("a", "file", (4,))) is not None
    files.close_all()
    assert len(files) == 0 and File.closed == 5
