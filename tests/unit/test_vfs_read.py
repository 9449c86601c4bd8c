"""Reads through the FUSE-shaped API (no mount): random ranges against zarr-python's bytes."""

from __future__ import annotations

import errno
import os
import threading

import numcodecs
import numpy as np
import pytest
import trio
import zarr
from helpers.arrays import write_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import FsError


class CountingStore(LocalStore):
    def __init__(self, root):
        super().__init__(root)
        self.gets: list[str] = []

    def get(self, key):
        self.gets.append(key)
        return super().get(key)

    def read_into(self, key, buffer_for):
        self.gets.append(key)
        return super().read_into(key, buffer_for)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("vfs") / "data.zarr")
    g = zarr.open_group(root, mode="w", zarr_format=2)
    rng = np.random.default_rng(0)
    write_array(
        g,
        "a",
        rng.integers(-1000, 1000, size=(23, 17, 5), dtype="<i2"),
        chunks=(4, 6, 3),
        compressors=numcodecs.Zstd(level=1),
        fill_value=-7,
        order="F",
    )
    b = g.create_array(
        "sub/b",
        shape=(41,),
        chunks=(8,),
        dtype=">f8",
        compressors=numcodecs.Blosc(cname="lz4"),
        fill_value=1.5,
    )
    b[5:20] = rng.random(15)  # the rest of b's chunks are missing: fill value
    return root


def oracle(root, path):
    return np.ascontiguousarray(zarr.open_array(root, path=path, mode="r")[:]).tobytes()


def make_mount(root, cache_size=64 << 20):
    store = CountingStore(root)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    return store, assemble(dialect, node, pipeline, MountOptions(cache_size=cache_size))


def make_fs(root, cache_size=64 << 20):
    store, mount = make_mount(root, cache_size)
    return store, mount.fs


async def open_path(fs, path):
    ino = 1
    for part in path.split("/"):
        ino = (await fs.lookup(ino, part)).ino
    return fs.open(ino, os.O_RDONLY)


@given(data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_random_reads_equal_oracle(source, data):
    path = data.draw(st.sampled_from(["a", "sub/b"]))
    expected = oracle(source, path)
    offset = data.draw(st.integers(0, len(expected) + 10))
    size = data.draw(st.integers(0, len(expected) + 10))
    _, fs = make_fs(source, cache_size=data.draw(st.sampled_from([0, 500, 64 << 20])))

    async def main():
        fh = await open_path(fs, path)
        return bytes(await fs.read(fh, offset, size))

    assert trio.run(main) == expected[offset : offset + size]


def test_second_pass_fetches_nothing(source):
    store, fs = make_fs(source)
    expected = oracle(source, "a")

    async def main():
        fh = await open_path(fs, "a")
        first = bytes(await fs.read(fh, 0, len(expected)))
        gets_after_first = len(store.gets)
        for off in range(0, len(expected), 1000):
            assert bytes(await fs.read(fh, off, 1000)) == expected[off : off + 1000]
        return first, gets_after_first

    first, gets_after_first = trio.run(main)
    assert first == expected
    assert len(store.gets) == gets_after_first
    assert fs.stats()["cache_hits"] > 0


def test_warm_up_readies_root_arrays_without_fetching_chunks(source):
    store, mount = make_mount(source)
    fs = mount.fs
    expected = oracle(source, "a")
    chunk_nbytes = 4 * 6 * 3 * 2  # a's chunks (4, 6, 3) of int16

    async def main():
        await mount.warm_up()
        names = {key.rsplit("/", 1)[-1] for key in store.gets}
        assert all(n.startswith(".") or n == "zarr.json" for n in names)  # no chunk read
        assert mount.pool.held >= chunk_nbytes  # buffers ready for a's first reads
        fh = await open_path(fs, "a")
        return bytes(await fs.read(fh, 0, len(expected)))

    assert trio.run(main) == expected


def test_keep_decoders_gives_each_decoding_thread_work(source, monkeypatch):
    _, mount = make_mount(source)
    threads_met = set()
    wait = threading.Barrier.wait

    def recording_wait(self, timeout=None):
        threads_met.add(threading.get_ident())
        return wait(self, timeout)

    monkeypatch.setattr(threading.Barrier, "wait", recording_wait)

    async def main():
        with trio.move_on_after(0.5):
            await mount.decoders.keep_alive(period=0.05)

    trio.run(main)
    assert len(threads_met) == mount.decoders.threads  # distinct threads
    assert mount.decoders.limiter.borrowed_tokens == 0


def test_each_chunk_fetched_once_under_concurrency(source):
    store, fs = make_fs(source)

    async def main():
        fh = await open_path(fs, "a")
        async with trio.open_nursery() as n:
            for _ in range(8):
                n.start_soon(fs.read, fh, 0, 23 * 17 * 5 * 2)

    trio.run(main)
    chunk_gets = [k for k in store.gets if k.startswith("a/") and ".z" not in k]
    assert len(chunk_gets) == len(set(chunk_gets)) == 6 * 3 * 2


def test_corrupt_chunk_fails_only_its_reads(tmp_path, caplog):
    root = str(tmp_path / "c.zarr")
    a = zarr.create_array(
        root, shape=(20,), chunks=(10,), dtype="u1", compressors=numcodecs.Zlib(), zarr_format=2
    )
    a[:] = np.arange(20, dtype="u1")
    with open(os.path.join(root, "1"), "wb") as f:
        f.write(b"garbage")
    _, fs = make_fs(root)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        assert bytes(await fs.read(fh, 0, 10)) == bytes(range(10))
        with pytest.raises(FsError) as e:
            await fs.read(fh, 5, 10)
        assert e.value.errno == errno.EIO

    trio.run(main)
    assert any("chunk 1:" in r.getMessage() for r in caplog.records)


def test_write_open_on_read_only_mount_is_erofs(source):
    _, fs = make_fs(source)

    async def main():
        ino = (await fs.lookup(1, "a")).ino
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC):
            with pytest.raises(FsError) as e:
                fs.open(ino, flags)
            assert e.value.errno == errno.EROFS

    trio.run(main)


@pytest.mark.parametrize("order", ["C", "F"])
def test_small_reads_of_cached_chunks_equal_zarr(tmp_path, order):
    """Reads inside one row of a cached chunk (answered with a view of the chunk in C
    order, a copy otherwise): C and F order, edge chunks, missing chunks, odd offsets."""
    root = str(tmp_path / "d.zarr")
    a = zarr.create_array(
        root,
        shape=(37, 50),
        chunks=(8, 16),
        dtype="<u4",
        zarr_format=2,
        compressors=numcodecs.Blosc(cname="lz4"),
        fill_value=9,
        order=order,
    )
    a[:30] = np.arange(30 * 50, dtype="<u4").reshape(30, 50)  # chunk row 4 stays missing
    expected = oracle(root, "")
    _, fs = make_fs(root)
    rng = np.random.default_rng(4)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        assert bytes(await fs.read(fh, 0, len(expected))) == expected  # every chunk cached
        before = fs.stats()
        for _ in range(400):
            offset = int(rng.integers(0, len(expected)))
            size = int(rng.integers(1, 70))
            got = bytes(await fs.read(fh, offset, size))
            assert got == expected[offset : offset + size], (offset, size)
        after = fs.stats()
        assert after["cache_misses"] == before["cache_misses"]  # all from the cache
        assert after["cache_hits"] >= before["cache_hits"] + 400

    trio.run(main)
