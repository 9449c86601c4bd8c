"""Direct reads without FUSE: chunks stored as they are read go from their files into the
reply, equal to zarr-python's values, and follow other writers and our own writes; a
damaged or escaping file fails only its reads; open files stay bounded."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading

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


async def _stream(fs, fh: int, start: int, stop: int, step: int = 512) -> bytes:
    """Read ``[start, stop)`` as a sequential reader does: requests that follow each other
    (from the third on, chunks not cached are read directly)."""
    return b"".join(
        [bytes(await fs.read(fh, off, min(step, stop - off))) for off in range(start, stop, step)]
    )


def _counting(path, shape: tuple[int, ...], chunks: tuple[int, ...], dtype: str) -> str:
    """An uncompressed array holding 0, 1, 2, ... in C order."""
    a = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype, compressors=None)
    a[:] = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    return str(path)


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
def test_streams_equal_zarr_python_and_come_from_the_files(raw_store, data):
    """A sequential reader (requests that follow each other, of any sizes), then random
    reads: the stream's chunks are read directly, every byte as zarr-python reads it."""
    expected = _values(raw_store)
    offset = data.draw(st.integers(0, len(expected) // 2))
    sizes = data.draw(st.lists(st.integers(1, 700), min_size=3, max_size=12))
    ranges = []
    for n in sizes:
        ranges.append((offset, n))
        offset += n
    ranges += data.draw(st.lists(st.tuples(st.integers(0, len(expected)), st.integers(0, 600))))
    cache = data.draw(st.sampled_from(["0", "64M"]))
    mount = _mount(raw_store, f"cache_size={cache}")

    async def main():
        fh = await _open(mount.fs)
        return [bytes(await mount.fs.read(fh, off, n)) for off, n in ranges]

    for (off, n), got in zip(ranges, trio.run(main), strict=True):
        assert got == expected[off : off + n], (off, n)
    assert mount.fs.stats()["cache_open_files"] <= OPEN_FILES


def test_a_stream_reads_chunk_files_straight_into_its_replies(raw_store):
    expected = _values(raw_store)
    mount = _mount(raw_store)

    async def main():
        fh = await _open(mount.fs)
        return b"".join(
            [bytes(await mount.fs.read(fh, off, 300)) for off in range(0, len(expected), 300)]
        )

    assert trio.run(main) == expected
    stats = mount.fs.stats()
    assert stats["cache_direct_reads"] > 0
    # only the chunks of the first requests (before the reader was a stream) are got: 9 of 32
    assert stats["store_gets"] < 16


def test_a_large_first_read_is_read_directly(tmp_path):
    """A first request of the size the kernel's read-ahead makes needs no stream before."""
    root = _counting(tmp_path / "l.zarr", (256, 1024), (64, 256), "<f4")
    expected = _values(root)
    mount = _mount(root)

    async def main():
        fh = await _open(mount.fs)
        return bytes(await mount.fs.read(fh, 4096, 128 << 10)), bytes(
            await mount.fs.read(fh, 0, 4096)
        )

    big, small = trio.run(main)
    assert big == expected[4096 : 4096 + (128 << 10)] and small == expected[:4096]
    stats = mount.fs.stats()
    assert stats["cache_direct_reads"] == 4  # the large read's chunks: rows 1-32, 4 columns
    # the small one's four chunks, read in part (a random reader's are cached after)
    assert stats["cache_partial_reads"] == stats["store_gets"] == 4


def _replace(path: str, data: bytes) -> None:
    """What many writers do: a new file renamed over the old one (a new inode)."""
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.replace(path + ".new", path)


def _rows(root: str, rows: int, value: int, dtype: str = "<i4"):
    """An uncompressed array of ``rows`` chunks of one 4 KiB row each, all ``value``."""
    a = zarr.create_array(root, shape=(rows, 1024), chunks=(1, 1024), dtype=dtype, compressors=None)
    a[:] = value
    return a


@pytest.mark.parametrize("how", ["renamed", "in place"])
def test_another_writers_chunk_is_read_after_the_period(tmp_path, how):
    root = str(tmp_path / "a.zarr")
    _rows(root, 4, 1)
    mount = _mount(root)
    chunk = os.path.join(root, "c", "2", "0")
    new = np.full(1024, 9, "<i4").tobytes()

    async def main():
        fh = await _open(mount.fs)
        # to the middle of chunk 2: its file stays open (a stream closes those it passed)
        first = await _stream(mount.fs, fh, 0, 2 * 4096 + 2048)
        if how == "renamed":
            _replace(chunk, new)
        else:
            with open(chunk, "r+b") as f:
                f.write(new)
        await trio.sleep(TTL * 2)
        return first, await _stream(mount.fs, fh, 0, 4 * 4096)

    first, second = trio.run(main)
    assert first == np.full(2560, 1, "<i4").tobytes()
    assert second == _values(root)
    assert np.frombuffer(second, "<i4")[2048:3072].tolist() == [9] * 1024
    assert mount.fs.stats()["cache_direct_reads"] > 0


def test_our_own_writes_are_read_back_after_they_leave_the_cache(tmp_path):
    root = str(tmp_path / "w.zarr")
    a = zarr.create_array(root, shape=(4, 2048), chunks=(1, 2048), dtype="u1", compressors=None)
    a[:] = 5
    mount = _mount(root, "rw,cache_size=1K")  # nothing stays cached: reads go to the files

    async def main():
        fh = await _open(mount.fs, flags=os.O_RDWR)
        # to the middle of the last chunk: the files of chunks 2 and 3 stay open
        assert await _stream(mount.fs, fh, 0, 7000, 256) == bytes([5]) * 7000
        await mount.fs.write(fh, 4600, bytes([7]) * 3000)
        await mount.fs.fsync(fh)
        got = await _stream(mount.fs, fh, 0, 8192, 256)
        await mount.fs.release(fh)
        return got

    want = bytearray([5]) * 8192
    want[4600:7600] = bytes([7]) * 3000
    assert trio.run(main) == want == _values(root)
    assert mount.fs.stats()["cache_direct_reads"] > 0


def _around_row_2(root: str):
    """Rows 0-1 streamed, then row 2 (which fails), then row 3: their bytes, the errno of
    row 2, and the mount."""
    mount = _mount(root)

    async def main():
        with trio.fail_after(30):  # a read that waits on a hostile file fails the test
            fh = await _open(mount.fs)
            good = await _stream(mount.fs, fh, 0, 8192)
            with pytest.raises(FsError) as failed:
                await _stream(mount.fs, fh, 8192, 12288)
            return good, failed.value.errno, await _stream(mount.fs, fh, 12288, 16384)

    return (*trio.run(main), mount)


def test_a_short_chunk_file_fails_its_reads_alone(tmp_path, caplog):
    root = str(tmp_path / "s.zarr")
    _rows(root, 4, 3)
    with open(os.path.join(root, "c", "2", "0"), "r+b") as f:
        f.truncate(100)
    with caplog.at_level(logging.ERROR):
        good, code, last, mount = _around_row_2(root)
    assert good == last * 2 == np.full(2048, 3, "<i4").tobytes() and code == errno.EIO
    assert "c/2/0" in caplog.text
    assert mount.fs.stats()["cache_direct_reads"] > 0


def test_a_chunk_file_leading_outside_the_root_is_refused(tmp_path):
    outside = tmp_path / "secret"
    outside.write_bytes(b"\x01" * 4096)
    root = str(tmp_path / "o.zarr")
    _rows(root, 4, 0)[:2] = 3  # rows 2 and 3 hold the fill value: not written
    os.makedirs(os.path.join(root, "c", "2"), exist_ok=True)
    os.symlink(outside, os.path.join(root, "c", "2", "0"))
    first, code, last, _ = _around_row_2(root)
    assert code == errno.EIO and first == np.full(2048, 3, "<i4").tobytes()
    assert last == bytes(4096)


def test_pages_not_in_the_page_cache_are_read_in_a_worker_thread(tmp_path):
    root = _counting(tmp_path / "d.zarr", (64, 512), (8, 512), "<u2")
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
        first = await _stream(mount.fs, fh, 0, len(expected))  # files opened, kept
        evict()
        return first, await _stream(mount.fs, fh, 0, len(expected))

    assert trio.run(main) == (expected, expected)
    assert mount.fs.stats()["cache_direct_reads"] > 0


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


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "lz4"])
def test_a_fifo_where_a_chunk_should_be_fails_its_reads_at_once(tmp_path, compressed, caplog):
    """Hostile data: opening a FIFO would wait for a writer forever."""
    root = str(tmp_path / "f.zarr")
    kwargs = {} if compressed else {"compressors": None}
    a = zarr.create_array(root, shape=(4, 1024), chunks=(1, 1024), dtype="<i4", **kwargs)
    a[:2] = 5  # rows 2 and 3 hold the fill value: not written
    os.makedirs(os.path.join(root, "c", "2"), exist_ok=True)
    fifo = os.path.join(root, "c", "2", "0")
    os.mkfifo(fifo)
    rescued, done = [], threading.Event()

    def rescue() -> None:  # were reads to wait on it: a writer each time, so the test ends
        while not done.wait(20 if not rescued else 0.2):
            with contextlib.suppress(OSError):  # ENXIO: nobody waits on it
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                rescued.append(True)

    helper = threading.Thread(target=rescue, daemon=True)
    helper.start()
    try:
        with caplog.at_level(logging.ERROR):
            good, code, last, _ = _around_row_2(root)
    finally:
        done.set()
        helper.join()
    assert not rescued
    assert good == np.full(2048, 5, "<i4").tobytes() and code == errno.EIO
    assert last == bytes(4096) and "c/2/0" in caplog.text
