"""Sharded v3 arrays through the FUSE-shaped API (no mount): a small read inside a big
shard fetches the shard index and the one inner chunk it touches, nothing else."""

from __future__ import annotations

import os
import stat
import threading

import numpy as np
import pytest
import trio
from helpers import v3_fixtures as v3
from helpers.arrays import write_array
from zarr.codecs import BloscCodec, BytesCodec, ShardingCodec

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

MIB = 1 << 20


class CountingStore(LocalStore):
    """Records every ``get``/``get_range`` with the number of bytes it returned.

    Like a remote store, it reads no parts of values (``read_ranges``), so these requests
    are those of whole (inner) chunks (tests/unit/test_vfs_partial.py has the parts).
    """

    reads_parts = False

    def __init__(self, root):
        super().__init__(root)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, int, int, int]] = []  # kind, key, start, len, got
        self.lists: list[str] = []

    def get(self, key):
        value = super().get(key)
        with self.lock:
            self.requests.append(("get", key, 0, -1, len(value) if value is not None else 0))
        return value

    def get_range(self, key, start, length):
        value = super().get_range(key, start, length)
        with self.lock:
            self.requests.append(
                ("get_range", key, start, length, len(value) if value is not None else 0)
            )
        return value

    def list_dir(self, prefix):
        with self.lock:
            self.lists.append(prefix)
        return super().list_dir(prefix)

    def take(self):
        with self.lock:
            out, self.requests = self.requests, []
        return out


def make_fs(root):
    store = CountingStore(str(root))
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions(cache_size=256 * MIB, sidecars=[])  # the arrays alone
    return store, assemble(dialect, node, pipeline, options).fs


async def open_path(fs, path):
    ino = 1
    for part in path.split("/"):
        ino = (await fs.lookup(ino, part)).ino
    return fs.open(ino, os.O_RDONLY)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("v3-bigshard") / "big.zarr"
    info = v3.build_big_shard(root)
    info["root"] = root
    info["expected"] = np.ascontiguousarray(info["data"]).tobytes()
    return info


def test_fixture_is_one_64mib_shard_of_1mib_inner_chunks(big):
    assert big["inner_chunk_bytes"] == MIB
    assert len(big["inner_nbytes"]) == 64
    # random float32: blosc-lz4 cannot shrink an inner chunk much, so fetching two inner
    # chunks (or the shard) would exceed the 2 MiB bound of the test below
    assert min(big["inner_nbytes"]) > 0.8 * MIB
    assert big["shard_size"] > 50 * MIB


def test_4k_read_inside_a_64mib_shard_fetches_index_and_one_inner_chunk(big):
    store, fs = make_fs(big["root"])
    k = 37  # inner chunk (37, 0, 0)
    offset = k * MIB + 8192

    async def main():
        fh = await open_path(fs, "big")
        before = store.take()  # metadata documents (and a byte of the root's: still there?)
        assert all(key.endswith("zarr.json") for kind, key, *_ in before), before
        got = bytes(await fs.read(fh, offset, 4096))
        return got, store.take()

    got, requests = trio.run(main)
    assert got == big["expected"][offset : offset + 4096]
    assert len(requests) == 2, requests
    assert all(kind == "get_range" and key == big["shard_key"] for kind, key, *_ in requests), (
        requests
    )
    sizes = sorted(r[4] for r in requests)
    assert sizes == sorted([big["index_nbytes"], big["inner_nbytes"][k]]), requests
    inner = next(r for r in requests if r[4] == big["inner_nbytes"][k])
    assert inner[2] == big["inner_offsets"][k], (inner, big["inner_offsets"][k])
    total = sum(sizes)
    assert total < 2 * MIB, total


def test_following_reads_reuse_index_and_chunk(big):
    store, fs = make_fs(big["root"])

    async def main():
        fh = await open_path(fs, "big")
        store.take()
        out = {}
        await fs.read(fh, 5 * MIB, 4096)
        out["first"] = store.take()
        # same inner chunk again: served from the cache
        assert (
            bytes(await fs.read(fh, 5 * MIB + 100_000, 4096))
            == big["expected"][5 * MIB + 100_000 : 5 * MIB + 104_096]
        )
        out["same"] = store.take()
        # another inner chunk: only its own range (the index is cached)
        assert bytes(await fs.read(fh, 9 * MIB, 10)) == big["expected"][9 * MIB : 9 * MIB + 10]
        out["other"] = store.take()
        # a read across the boundary of inner chunks 20 and 21: those two ranges
        off = 21 * MIB - 2048
        assert bytes(await fs.read(fh, off, 4096)) == big["expected"][off : off + 4096]
        out["across"] = store.take()
        return out

    out = trio.run(main)
    assert len(out["first"]) == 2, out["first"]
    assert out["same"] == [], out["same"]
    assert [(r[0], r[4]) for r in out["other"]] == [("get_range", big["inner_nbytes"][9])]
    assert sorted(r[4] for r in out["across"]) == sorted(
        [big["inner_nbytes"][20], big["inner_nbytes"][21]]
    ), out["across"]


@pytest.mark.parametrize("location", ["start", "end"])
def test_index_location_start_and_end(tmp_path, location):
    """Same request pattern with the index at either end (index at the start: the inner
    chunk offsets count from the start of the shard, index included)."""
    root = tmp_path / "s.zarr"
    shape = (16, 128, 128)
    data = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    write_array(
        root,
        "a",
        data,
        chunks=(8, 128, 128),
        zarr_format=3,
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(1, 128, 128),
            index_location=location,
            codecs=[BytesCodec(), BloscCodec(cname="lz4")],
        ),
    )
    expected = data.tobytes()
    chunk = 128 * 128 * 4
    store, fs = make_fs(root)

    async def main():
        fh = await open_path(fs, "a")
        store.take()
        results = []
        for k in (0, 5, 11, 15):
            off = k * chunk + 777
            got = bytes(await fs.read(fh, off, 3000))
            assert got == expected[off : off + 3000], k
            results.append(store.take())
        return results

    results = trio.run(main)
    index_nbytes = 8 * 16 + 4
    for k, reqs in zip((0, 5, 11, 15), results, strict=True):
        first_in_shard = k in (0, 11)
        assert len(reqs) == (2 if first_in_shard else 1), (k, reqs)
        assert all(r[0] == "get_range" for r in reqs), reqs
        if first_in_shard:
            assert index_nbytes in [r[4] for r in reqs], reqs
        assert sum(r[4] for r in reqs) < chunk + index_nbytes + 1, reqs


def test_consolidated_hierarchy_lists_without_store_listing(tmp_path):
    """With consolidated metadata in the root zarr.json, walking the tree lists nothing in
    the store and shows what zarr-python shows."""
    members = v3.build_consolidated(tmp_path / "c.zarr")
    store, fs = make_fs(tmp_path / "c.zarr")

    async def walk(ino, prefix, seen):
        for name, attr in await fs.readdir(ino):
            path = f"{prefix}{name}"
            seen.add(path)
            if stat.S_ISDIR(attr.mode):
                await walk(attr.ino, path + "/", seen)

    seen: set[str] = set()
    trio.run(walk, 1, "", seen)
    assert seen == set(members), (sorted(seen), sorted(members))
    assert store.lists == [], store.lists
