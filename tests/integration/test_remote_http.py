"""HTTP sources through real mounts: a static server on loopback that answers ``Range``.

The hierarchies are written to a local directory with zarr-python; zarr-python reading that
directory is the oracle. Over HTTP there is no listing, so consolidated metadata is what
makes the tree known (``zarr.json`` for v3, ``.zmetadata`` for v2).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re

import numpy as np
import pytest
import zarr
from helpers.common import assert_tree_and_bytes
from helpers.mounting import mounted
from helpers.remote_servers import (
    V3_ARRAYS,
    RangeHTTPServer,
    expected_bytes,
    write_v2,
    write_v3,
)

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("http-site")
    write_v3(str(root / "v3.zarr"), consolidated=True)
    write_v2(str(root / "v2.zarr"), consolidated=True)
    with RangeHTTPServer(root) as server:
        yield root, server


def _oracle(root, name):
    return zarr.open_group(str(root / name), mode="r")


@contextlib.contextmanager
def _mounted_over_http(site, kind: str, tag: str):
    """Mount ``<kind>.zarr`` of the site with a fresh request log (so a test sees only the
    requests of its own mount), its tree and bytes checked against zarr-python."""
    root, server = site
    server.clear()
    with mounted(f"{server.url}/{kind}.zarr", tag=tag) as m:
        assert_tree_and_bytes(m, _oracle(root, f"{kind}.zarr"), kind)
        yield m, server


def test_v3_consolidated_over_http(site):
    with _mounted_over_http(site, "v3", tag="http3") as (m, server):
        stats = m.stats()
        assert stats["store_lists"] == 0
        assert stats["store_errors"] == 0
        with pytest.raises(OSError) as e:
            os.open(m.p("plain"), os.O_WRONLY)
        assert e.value.errno == errno.EROFS
        m.assert_alive()
    # the sharded arrays were read with ranges (206) only: never a whole shard
    shard = re.compile(r"/sub/(sharded|sparse_sharded)/c/\d+/\d+$")
    shard_gets = [
        r
        for r in server.requests
        if r.method == "GET" and shard.search(r.path) and r.outcome != "404"
    ]
    assert shard_gets
    assert all(r.range and r.outcome == "206" for r in shard_gets), shard_gets
    pairs = [(r.path, r.range) for r in shard_gets]
    assert len(pairs) == len(set(pairs)), "a byte range was fetched twice"
    # shards never written are 404s on the wire and the fill value in the file
    missing = {r.path for r in server.requests if r.outcome == "404"}
    assert {p.rsplit("/sparse_sharded/", 1)[-1] for p in missing if "/sparse_sharded/" in p} == {
        "c/0/1",
        "c/1/0",
        "c/1/1",
    }, missing


def test_v2_zmetadata_over_http(site):
    with _mounted_over_http(site, "v2", tag="http2") as (m, server):
        assert m.stats()["store_lists"] == 0
    # v2/sparse has 9 chunks of which 2 were written: the others are absent (404 -> fill)
    sparse = [
        r
        for r in server.requests
        if re.search(r"/v2\.zarr/sparse/\d+\.\d+$", r.path) and r.method == "GET"
    ]
    assert {r.outcome for r in sparse} == {"200", "404"}
    # metadata came from .zmetadata: no .zarray/.zgroup of a child was fetched
    assert not [
        r.path
        for r in server.requests
        if re.search(r"/v2\.zarr/.+/\.z(array|group|attrs)$", r.path)
    ]


def test_random_preads_over_http(site):
    root, server = site
    rng = np.random.default_rng(11)
    with mounted(f"{server.url}/v3.zarr", ["cache_size=256K"], tag="http3r") as m:
        oracle = _oracle(root, "v3.zarr")
        for name in V3_ARRAYS:
            want = expected_bytes(oracle, "v3", name, m.p(name))
            fd = os.open(m.p(name), os.O_RDONLY)
            try:
                for _ in range(30):
                    off = int(rng.integers(0, len(want)))
                    size = int(rng.integers(1, 5000))
                    assert os.pread(fd, size, off) == want[off : off + size], (name, off)
            finally:
                os.close(fd)


def test_missing_source_fails_fast(site):
    """A URL with no Zarr metadata: the mount fails with a message naming the URL."""
    from helpers.mounting import MountFailed

    _, server = site
    with (
        pytest.raises(MountFailed) as e,
        mounted(f"{server.url}/nothing.zarr", ["timeout=5"], tag="http404", timeout=10),
    ):
        pass
    assert "exited" in str(e.value)
    assert "nothing.zarr" in str(e.value)


def test_http_source_is_read_only(site):
    """Writing to an HTTP source must fail up front: the mount refuses ``-o rw`` or opening
    an array for writing fails with EROFS (never an accepted write that cannot be stored)."""
    from helpers.mounting import MountFailed

    _, server = site
    try:
        with mounted(f"{server.url}/v3.zarr", ["rw", "timeout=2"], tag="httprw") as m:
            with pytest.raises(OSError) as e:
                fd = os.open(m.p("bytes_only"), os.O_RDWR)
                try:
                    os.pwrite(fd, b"abc", 0)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            assert e.value.errno == errno.EROFS, e.value
    except MountFailed as e:  # refusing the mount is fine too, if it says why
        assert "read-only" in str(e) or "rw" in str(e), str(e)
