"""S3 sources through real mounts: a moto S3 server on loopback (own process).

Hierarchies are written with zarr-python through s3fs; the expected bytes are always
zarr-python's ``arr[:]`` read back through s3fs (and checked against the source data).
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import zarr
from helpers.common import assert_arrays_read_back, fault_proxy_fixture
from helpers.mounting import mounted
from helpers.remote_servers import (  # noqa: F401 - fixtures
    BUCKET,
    V2_ARRAYS,
    V2_DIRS,
    V3_ARRAYS,
    V3_DIRS,
    expected_bytes,
    read_all,
    s3_data_fixture,
    s3_fixture,
    s3fs_for,
    tree,
    zarr_s3_store,
)

pytestmark = pytest.mark.mount


proxy = fault_proxy_fixture()


def _check_all_arrays(m, oracle, kind: str, names: list[str]) -> None:
    """Shape and size of every array as zarr-python has them, then its bytes."""
    for name in names:
        path = m.p(name)
        arr = oracle[name]
        assert json.loads(os.getxattr(path, "user.zarr.shape")) == list(arr.shape), name
        assert os.path.getsize(path) == arr.nbytes, name
    assert_arrays_read_back(m, oracle, kind, names)


def _random_preads(m, oracle, kind: str, names: list[str], rng, n: int = 25) -> None:
    """Unaligned reads at random offsets (each through a fresh descriptor)."""
    for name in names:
        path = m.p(name)
        want = expected_bytes(oracle, kind, name, path)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(n):
                off = int(rng.integers(0, len(want)))
                size = int(rng.integers(1, max(2, len(want) // 3)))
                assert os.pread(fd, size, off) == want[off : off + size], (name, off, size)
        finally:
            os.close(fd)


def test_v2_via_storage_option_endpoint(s3_data):
    """``-o so.endpoint_url=``: the tree and every array's bytes equal zarr-python's."""
    with mounted(s3_data.v2, [f"so.endpoint_url={s3_data.endpoint}"], tag="s3v2") as m:
        dirs, files = tree(m.path)
        assert dirs == V2_DIRS
        assert files == set(V2_ARRAYS)
        assert json.loads(os.getxattr(m.path, "user.zarr.attributes")) == {"kind": "v2"}
        oracle = s3_data.oracle(s3_data.v2)
        lists_after_walk = m.group_lists()
        assert lists_after_walk >= 1  # no consolidated metadata: the groups were listed
        _check_all_arrays(m, oracle, "v2", V2_ARRAYS)
        _random_preads(m, oracle, "v2", V2_ARRAYS, np.random.default_rng(1))
        stats = m.stats()
        assert m.group_lists() == lists_after_walk, "a read path listed the store"
        assert stats["store_errors"] == 0
        m.assert_alive()


def test_v3_consolidated_via_environment_endpoint(s3_data, monkeypatch):
    """``AWS_ENDPOINT_URL`` in the daemon's environment, no storage option; consolidated
    metadata in the root zarr.json: the whole tree is known without a single listing."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_data.endpoint)
    with mounted(s3_data.v3, tag="s3v3env") as m:
        dirs, files = tree(m.path)
        assert dirs == V3_DIRS
        assert files == set(V3_ARRAYS)
        oracle = s3_data.oracle(s3_data.v3)
        _check_all_arrays(m, oracle, "v3", V3_ARRAYS)
        stats = m.stats()
        assert m.group_lists() == 0
        assert stats["store_errors"] == 0
        assert os.getxattr(m.p("sub/sharded"), "user.zarr.shards") == b"[64, 64]"


def test_v3_without_consolidated_metadata(s3_data):
    with mounted(s3_data.v3_plain, [f"so.endpoint_url={s3_data.endpoint}"], tag="s3v3") as m:
        dirs, files = tree(m.path)
        assert (dirs, files) == (V3_DIRS, set(V3_ARRAYS))
        oracle = s3_data.oracle(s3_data.v3_plain)
        lists = m.group_lists()
        assert lists >= 1
        _random_preads(m, oracle, "v3", V3_ARRAYS, np.random.default_rng(2))
        _check_all_arrays(m, oracle, "v3", V3_ARRAYS)
        assert m.group_lists() == lists


def test_requests_on_the_read_path(s3_data, s3, proxy):
    """What the daemon asks S3 for: at mount only the root metadata (consolidated), never a
    listing; a sharded array is read with range requests only, each inner chunk once and
    each shard index once (a suffix range: no HEAD for the shard's size); a one-element
    read fetches far less than the shard."""
    proxy.clear()
    with mounted(s3_data.v3, [f"so.endpoint_url={proxy.url}"], tag="s3req") as m:
        mount_reqs = proxy.requests
        assert mount_reqs, "the daemon did not go through the proxy"
        assert {r.path for r in mount_reqs} == {"/" + s3_data.v3[5:] + "/zarr.json"}
        tree(m.path)
        assert not any("list-type" in r.path or "prefix=" in r.path for r in proxy.requests)

        shard_re = r"/sub/sharded/c/\d+/\d+$"
        fs = s3fs_for(s3.url)
        shard_sizes = {
            "/" + k: fs.size(k)
            for k in fs.find(s3_data.v3[5:] + "/sub/sharded")
            if re.search(shard_re, "/" + k)
        }
        assert len(shard_sizes) == 4
        proxy.clear()
        fd = os.open(m.p("sub/sharded"), os.O_RDONLY | os.O_DIRECT)
        try:
            import mmap

            buf = mmap.mmap(-1, 4096)
            assert os.preadv(fd, [buf], 0) == 4096
            want = expected_bytes(
                s3_data.oracle(s3_data.v3), "v3", "sub/sharded", m.p("sub/sharded")
            )
            assert bytes(buf) == want[:4096]
        finally:
            os.close(fd)
        gets = [r for r in proxy.requests if r.method == "GET" and re.search(shard_re, r.path)]
        assert gets and all(r.range for r in gets), gets
        # exactly the index of each shard touched and the inner chunks touched: 2048
        # elements = rows 0-22 of 90 columns = inner chunk rows 0-1, all 6 inner columns
        expected = set()
        elements = np.arange(2048)
        inner = {
            (int(r) // 16, int(c) // 16) for r, c in zip(elements // 90, elements % 90, strict=True)
        }
        for ir, ic in inner:
            path = f"/{s3_data.v3[5:]}/sub/sharded/c/{ir // 4}/{ic // 4}"
            shard = fs.cat_file(path[1:])
            index = np.frombuffer(shard[-260:-4], "<u8").reshape(4, 4, 2)
            off, n = (int(v) for v in index[ir % 4, ic % 4])
            expected.add((path, f"bytes={off}-{off + n - 1}"))
            expected.add((path, "bytes=-260"))  # the index: the last bytes, size unasked
        assert {(r.path, r.range) for r in gets} == expected
        assert not any(r.method == "HEAD" for r in proxy.requests)
        assert len(gets) == len(expected), "a byte range was fetched twice"

        proxy.clear()
        got = read_all(m.p("sub/sharded"))
        assert got == want
        gets = [r for r in proxy.requests if r.method == "GET" and re.search(shard_re, r.path)]
        assert all(r.range for r in gets), "a whole shard was fetched"
        pairs = [(r.path, r.range) for r in gets]
        assert len(pairs) == len(set(pairs)), "a byte range was fetched twice"
        assert sum(r.nbytes for r in gets) <= sum(shard_sizes.values())
        assert m.group_lists() == 0


def test_read_write_reaches_the_store(s3, proxy):
    """``-o rw``: written data is in S3 after fsync, as zarr-python sees it; one PUT per
    chunk (or per shard), a chunk rewritten to the fill value is deleted, nothing more is
    stored at close or unmount."""
    url = f"s3://{BUCKET}/rw/v3.zarr"
    store = zarr_s3_store(url, s3.url)
    root = zarr.open_group(store, mode="w", zarr_format=3)
    root.create_array("dense", shape=(40, 50), chunks=(16, 16), dtype="<i2", fill_value=0)
    root.create_array(
        "sharded", shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="<u4", fill_value=0
    )
    dense = (np.arange(2000, dtype="<i2").reshape(40, 50) % 1000 + 1).astype("<i2")
    sharded = np.arange(1, 4097, dtype="<u4").reshape(64, 64)
    proxy.clear()
    with mounted(url, ["rw", f"so.endpoint_url={proxy.url}"], tag="s3rw") as m:
        fd = os.open(m.p("dense"), os.O_RDWR)
        try:
            assert os.pwrite(fd, dense.tobytes(), 0) == dense.nbytes
            os.fsync(fd)
        finally:
            os.close(fd)
        puts = [r.path for r in proxy.data_requests if r.method == "PUT" and "/dense/" in r.path]
        assert len(puts) == 12 and len(set(puts)) == 12, puts  # 3 x 4 chunks, once each

        fd = os.open(m.p("sharded"), os.O_RDWR)
        try:
            for row in range(0, 64, 16):  # four writes, each of 16 whole rows
                part = sharded[row : row + 16]
                os.pwrite(fd, part.tobytes(), row * 64 * 4)
            os.fsync(fd)
        finally:
            os.close(fd)
        puts = [r.path for r in proxy.data_requests if r.method == "PUT" and "/sharded/" in r.path]
        assert sorted(puts) == sorted(set(puts)) and len(puts) == 4, puts  # 2 x 2 shards

        # chunk (0, 0) of dense back to the fill value: deleted, not stored
        fd = os.open(m.p("dense"), os.O_RDWR)
        try:
            for row in range(16):
                os.pwrite(fd, bytes(32), row * 50 * 2)
            os.fsync(fd)
        finally:
            os.close(fd)
        dense[:16, :16] = 0
        deletes = [r.path for r in proxy.data_requests if r.method == "DELETE"]
        assert any(p.endswith("/dense/c/0/0") for p in deletes), proxy.requests[-5:]
        puts_before_unmount = proxy.count("PUT", lease=False)  # the lease's are no data
        assert m.stats()["store_errors"] == 0
    assert proxy.count("PUT", lease=False) == puts_before_unmount, (
        "data stored again at close/unmount"
    )
    assert puts_before_unmount == 12 + 4

    check = zarr.open_group(zarr_s3_store(url, s3.url, read_only=True), mode="r")
    np.testing.assert_array_equal(check["dense"][:], dense)
    np.testing.assert_array_equal(check["sharded"][:], sharded)
    fs = s3fs_for(s3.url)
    assert not fs.exists(f"{BUCKET}/rw/v3.zarr/dense/c/0/0")

    # and a fresh read-only mount shows the new bytes
    with mounted(url, [f"so.endpoint_url={s3.url}"], tag="s3rw2") as m:
        assert read_all(m.p("dense")) == dense.tobytes()
        assert read_all(m.p("sharded")) == sharded.tobytes()


def test_read_write_partial_chunk_v2(s3, proxy):
    """A write inside one chunk of a v2 array: read-modify-write of that chunk, one PUT."""
    import numcodecs

    url = f"s3://{BUCKET}/rw/v2.zarr"
    root = zarr.open_group(zarr_s3_store(url, s3.url), mode="w", zarr_format=2)
    data = np.random.default_rng(5).standard_normal((30, 30))
    root.create_array(
        "a", shape=(30, 30), chunks=(10, 10), dtype="<f8", compressors=numcodecs.Zlib(level=1)
    )[:] = data
    proxy.clear()
    with mounted(url, ["rw", f"so.endpoint_url={proxy.url}"], tag="s3rw2") as m:
        fd = os.open(m.p("a"), os.O_RDWR)
        try:
            os.pwrite(fd, np.array([42.5], "<f8").tobytes(), (15 * 30 + 15) * 8)
            os.fsync(fd)
        finally:
            os.close(fd)
        puts = [r.path for r in proxy.data_requests if r.method == "PUT"]
        assert len(puts) == 1 and puts[0].endswith("/rw/v2.zarr/a/1.1"), puts
    data[15, 15] = 42.5
    got = zarr.open_group(zarr_s3_store(url, s3.url, read_only=True), mode="r")["a"][:]
    np.testing.assert_array_equal(got, data)
    assert proxy.count("PUT", lease=False) == 1
