"""Small reads of uncached chunks decode only the part they need (no mount).

Arrays are written by zarr-python, and every expected byte is zarr-python's reading of
the same store. The statistics say which reads were served from a part of a chunk.
"""

from __future__ import annotations

import errno
import os
import shutil

import numcodecs
import numpy as np
import pytest
import trio
import trio.testing
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ZstdCodec

from zarrmount import hierarchy
from zarrmount.assemble import Mount, assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import Filesystem, FsError

SHAPE, CHUNKS = (256, 2048), (128, 1024)  # 512 KiB chunks of 4-byte elements
ROW = SHAPE[1] * 4
# c-blosc makes blocks of lz4 with byte shuffle at least 64 KiB whatever is asked; by
# default a 512 KiB chunk is one block, and decoding it is decoding the chunk.
SMALL_BLOCKS = 16384

# name: (zarr_format, dtype, create_array keywords, decoded in part)
# how a small read of an uncached chunk is served: part of it decoded, or the whole chunk
PART, WHOLE = "part", "whole"
SPECS = {
    "v2-raw": (2, "<f4", {"compressors": None}, PART),
    "v2-blosc-lz4": (2, "<f4", {"compressors": numcodecs.Blosc("lz4", 5, 1, SMALL_BLOCKS)}, PART),
    "v2-blosc-zstd-big-endian": (
        2,
        ">i4",
        {"compressors": numcodecs.Blosc("zstd", 3, 0, SMALL_BLOCKS)},
        PART,
    ),
    # one block per chunk: decoded whole
    "v2-blosc-one-block": (2, "<f4", {"compressors": numcodecs.Blosc("lz4")}, WHOLE),
    "v2-blosc-F-order": (2, "<f4", {"compressors": numcodecs.Blosc("lz4"), "order": "F"}, WHOLE),
    "v2-filter-then-blosc": (
        2,
        "<i4",
        {"filters": [numcodecs.Delta("<i4")], "compressors": numcodecs.Blosc("lz4")},
        WHOLE,
    ),
    "v2-zlib": (2, "<f4", {"compressors": numcodecs.Zlib()}, WHOLE),
    "v2-zstd": (2, "<f4", {"compressors": numcodecs.Zstd(level=3)}, PART),
    "v2-zstd-F-order": (2, "<i4", {"compressors": numcodecs.Zstd(), "order": "F"}, WHOLE),
    "v3-zstd": (3, "<i4", {"compressors": ZstdCodec()}, PART),
    "v3-zstd-big-endian": (
        3,
        ">u2",
        {"serializer": BytesCodec(endian="big"), "compressors": ZstdCodec(level=5)},
        PART,
    ),
    "v3-zstd-crc32c": (3, "<f4", {"compressors": [ZstdCodec(), Crc32cCodec()]}, WHOLE),
    "v3-bytes": (3, "<u4", {"compressors": None}, PART),
    "v3-sharded-blosc": (
        3,
        "<f4",
        {
            "shards": (128, 2048),
            "compressors": BloscCodec(cname="lz4", shuffle="shuffle", blocksize=SMALL_BLOCKS),
        },
        PART,
    ),
    "v3-sharded-bytes": (3, "<i4", {"shards": (128, 2048), "compressors": None}, PART),
    "v3-sharded-zstd": (3, "<f4", {"shards": (128, 2048), "compressors": ZstdCodec()}, PART),
    "v3-big-endian-blosc": (
        3,
        ">f4",
        {
            "serializer": BytesCodec(endian="big"),
            "compressors": BloscCodec(cname="lz4", blocksize=SMALL_BLOCKS),
        },
        PART,
    ),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    roots = {}
    rng = np.random.default_rng(5)
    for name, (fmt, dtype, kwargs, _) in SPECS.items():
        root = str(tmp_path_factory.mktemp(name) / "data.zarr")
        a = zarr.create_array(
            root, shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=fmt, **kwargs
        )
        values = np.cumsum(rng.integers(-3, 4, size=SHAPE), axis=1)
        a[:] = values.astype(dtype)
        a[128:, 1024:] = 0  # chunk (1, 1) is all fill: not stored
        roots[name] = root
    return roots


def oracle(root: str, name: str) -> bytes:
    """zarr-python's values in the stored byte order (the file's bytes)."""
    values = zarr.open_array(root, mode="r")[:]
    return np.ascontiguousarray(values, dtype=SPECS[name][1]).tobytes()


def make_mount(root: str, store=None) -> Mount:
    dialect, node, pipeline = hierarchy.open_hierarchy(store or LocalStore(root))
    return assemble(dialect, node, pipeline, MountOptions(cache_size=64 << 20))


def make_fs(root: str, store=None) -> Filesystem:
    return make_mount(root, store).fs


async def open_array(fs: Filesystem) -> int:
    return fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)


def small_reads(nbytes: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    reads = [(0, 4096), (nbytes - 100, 100), (200 * ROW + 1500 * 4, 64)]  # fill chunk
    for _ in range(count):
        offset = int(rng.integers(0, nbytes))
        reads.append((offset, int(rng.integers(1, 600))))
    return reads


@pytest.mark.parametrize("name", SPECS)
def test_small_cold_reads_equal_zarr(stores, name):
    root = stores[name]
    expected = oracle(root, name)
    kind = SPECS[name][3]

    async def main():
        fs = make_fs(root)
        fh = await open_array(fs)
        for offset, size in small_reads(len(expected), 40, 1):
            got = bytes(await fs.read(fh, offset, size))
            assert got == expected[offset : offset + size], (offset, size)
        return fs.stats()

    stats = trio.run(main)
    assert (stats["cache_partial_reads"] > 0) == (kind == PART)
    assert stats["cache_direct_reads"] == 0  # a random reader's chunks are kept decoded


def test_chunk_read_in_part_follows_into_the_cache(stores):
    """The first small read decodes a part; the whole chunk then loads in the background,
    and the next read of another row of it is a cache hit with no store access."""
    name = "v2-blosc-lz4"
    root = stores[name]
    expected = oracle(root, name)
    row = ROW

    async def main():
        mount = make_mount(root)
        fs = mount.fs
        fh = await open_array(fs)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:  # left once the background work is done
                mount.background.nursery = nursery
                assert bytes(await fs.read(fh, 0, 64)) == expected[:64]
                assert fs.stats()["cache_partial_reads"] == 1
        mount.background.nursery = None
        assert fs.stats()["cache_loading"] == 0
        gets = fs.stats()["store_gets"]
        hits = fs.stats()["cache_hits"]
        far = 20 * row + 64  # row 20 of chunk (0, 0): 2.5 KiB past the first part
        assert bytes(await fs.read(fh, far, 64)) == expected[far : far + 64]
        stats = fs.stats()
        assert stats["store_gets"] == gets
        assert stats["cache_hits"] == hits + 1  # the whole chunk followed into the cache
        assert stats["cache_partial_reads"] == 1

    trio.run(main)


def test_reads_of_a_chunk_already_loading_wait_for_it(stores):
    name = "v2-blosc-lz4"  # (a large read of an uncompressed array loads nothing: direct)
    root = stores[name]
    expected = oracle(root, name)

    async def main():
        fs = make_fs(root)
        fh = await open_array(fs)
        await fs.fresh_attr((await fs.lookup(1, "array")).ino)  # its first listing made
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fs.read, fh, 0, 40 * ROW)  # much of two chunks: loads them
            await trio.testing.wait_all_tasks_blocked(cushion=0.0)
            assert bytes(await fs.read(fh, 4, 8)) == expected[4:12]
        return fs.stats()

    stats = trio.run(main)
    assert stats["cache_partial_reads"] == 0


@pytest.mark.parametrize("name", ["v2-raw", "v2-blosc-lz4"])
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_chunk_fails_only_its_part_reads(tmp_path, stores, name, damage, caplog):
    root = str(tmp_path / "copy.zarr")
    shutil.copytree(stores[name], root)
    expected = oracle(root, name)
    path = os.path.join(root, "1.0")
    with open(path, "rb") as f:
        stored = f.read()
    with open(path, "wb") as f:
        f.write(b"\x02\x01" + bytes(100) if damage == "garbage" else stored[: len(stored) // 2])
    chunk_start = 128 * ROW + 64  # row 128, column 16: chunk (1, 0)

    async def main():
        fs = make_fs(root)
        fh = await open_array(fs)
        with pytest.raises(FsError) as e:
            await fs.read(fh, chunk_start, 64)
        assert e.value.errno == errno.EIO
        assert bytes(await fs.read(fh, 0, 64)) == expected[:64]  # its neighbours still read

    trio.run(main)
    assert any("chunk 1.0:" in r.getMessage() for r in caplog.records)


class RecordingStore(LocalStore):
    """Records ``get_range`` calls and reads of parts as ``(kind, key, start, got)``."""

    def __init__(self, root):
        super().__init__(root)
        self.requests: list[tuple[str, str, int, int]] = []

    def get_range(self, key, start, length, **kw):
        value = super().get_range(key, start, length, **kw)
        self.requests.append(("get_range", key, start, len(value or b"")))
        return value

    def read_ranges(self, key, use):
        def recorded(size, read):
            def logged(start, length):
                value = read(start, length)
                self.requests.append(("read", key, start, len(value)))
                return value

            return use(size, logged)

        return super().read_ranges(key, recorded)


def test_small_read_in_a_shard_reads_its_index_and_one_block(stores):
    name = "v3-sharded-blosc"
    root = stores[name]
    expected = oracle(root, name)
    store = RecordingStore(root)
    shard = os.path.join(root, "c", "0", "0")
    offset = 5 * ROW + 1100 * 4  # row 5, column 1100: inner chunk (0, 1) of shard (0, 0)

    async def main():
        fs = make_fs(root, store)
        fh = await open_array(fs)
        store.requests.clear()
        assert bytes(await fs.read(fh, offset, 64)) == expected[offset : offset + 64]
        return fs.stats()

    stats = trio.run(main)
    index, *parts = store.requests
    assert index[:2] == ("get_range", "c/0/0"), store.requests
    assert parts and all(r[:2] == ("read", "c/0/0") for r in parts), store.requests
    assert sum(r[3] for r in parts) < os.path.getsize(shard) / 8, store.requests
    assert stats["cache_partial_reads"] == 1
