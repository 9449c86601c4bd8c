"""Remote sources through real mounts: S3 (moto on loopback), HTTP with ranges, zip, and
faults injected between the daemon and S3 (503s, resets mid-body, 403, stalls, latency).

Expected bytes always come from zarr-python reading the same data.
"""

from __future__ import annotations

import errno
import json
import os
import time
import zipfile

import numcodecs
import numpy as np
import pytest
import zarr
from helpers.mounting import mounted
from helpers.net_servers import S3_ENV, FaultProxy, moto_server, range_http_server

pytestmark = pytest.mark.mount

RNG = np.random.default_rng(3)
DATA = {
    "a": RNG.integers(0, 1000, (200, 300), dtype="<i4"),
    "plain": RNG.random((130, 70)).astype("<f8"),
    "sharded": RNG.integers(0, 60000, (100, 90), dtype="<u2"),
}


def _write_hierarchies(v2_store, v3_store) -> None:
    g2 = zarr.open_group(v2_store, mode="w", zarr_format=2)
    g2.create_array(
        "a",
        shape=(200, 300),
        chunks=(64, 64),
        dtype="<i4",
        compressors=numcodecs.Blosc(cname="lz4"),
    )[:] = DATA["a"]
    zarr.consolidate_metadata(v2_store)
    g3 = zarr.open_group(v3_store, mode="w", zarr_format=3)
    g3.create_array("plain", shape=(130, 70), chunks=(32, 32), dtype="<f8")[:] = DATA["plain"]
    g3.create_array("sub/sharded", shape=(100, 90), chunks=(16, 16), shards=(64, 64), dtype="<u2")[
        :
    ] = DATA["sharded"]
    zarr.consolidate_metadata(v3_store)


def _expected(name: str) -> bytes:
    return np.ascontiguousarray(DATA[name]).tobytes()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def s3():
    os.environ.update(S3_ENV)
    with moto_server() as url:
        import s3fs

        s3fs.S3FileSystem(endpoint_url=url).mkdir("bkt")
        opts = {"endpoint_url": url}
        _write_hierarchies(
            zarr.storage.FsspecStore.from_url("s3://bkt/v2.zarr", storage_options=opts),
            zarr.storage.FsspecStore.from_url("s3://bkt/v3.zarr", storage_options=opts),
        )
        proxy = FaultProxy(url)
        try:
            yield url, proxy
        finally:
            proxy.close()


def test_s3_v2_and_v3_read_equal_zarr(s3):
    url, _ = s3
    with mounted("s3://bkt/v2.zarr", [f"so.endpoint_url={url}"], tag="s3v2") as m:
        assert _read(m.p("a")) == _expected("a")
    with mounted("s3://bkt/v3.zarr", [f"so.endpoint_url={url}"], tag="s3v3") as m:
        assert _read(m.p("plain")) == _expected("plain")
        assert _read(m.p("sub/sharded")) == _expected("sharded")
        assert m.group_lists() == 0  # consolidated metadata: no listing of groups


def test_s3_read_write_reaches_the_store(s3):
    url, _ = s3
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=url)
    zarr.create_array(
        zarr.storage.FsspecStore.from_url(
            "s3://bkt/rw.zarr", storage_options={"endpoint_url": url}
        ),
        shape=(40, 50),
        chunks=(16, 16),
        dtype="<i2",
        zarr_format=3,
        fill_value=0,
    )
    new = np.arange(2000, dtype="<i2").reshape(40, 50)
    with mounted("s3://bkt/rw.zarr", ["rw", f"so.endpoint_url={url}"], tag="s3rw") as m:
        fd = os.open(m.p("array"), os.O_RDWR)
        try:
            os.pwrite(fd, new.tobytes(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        fs.invalidate_cache()
        got = zarr.open_array(
            zarr.storage.FsspecStore.from_url(
                "s3://bkt/rw.zarr", storage_options={"endpoint_url": url}, read_only=True
            )
        )[:]
        assert np.array_equal(got, new)
        chunk_keys = [k for k in fs.find("bkt/rw.zarr") if "/c/" in k]
        assert len(chunk_keys) == 12  # 3 x 4 chunks, one PUT each, none all fill


@pytest.mark.parametrize("client", ["fsspec", "obstore"])
def test_http_source_with_ranges(tmp_path, client):
    root = tmp_path / "srv"
    _write_hierarchies(str(root / "v2.zarr"), str(root / "v3.zarr"))
    with range_http_server(str(root)) as url:
        with mounted(f"{url}/v3.zarr", [f"client={client}"], tag="http3") as m:
            assert _read(m.p("plain")) == _expected("plain")
            assert _read(m.p("sub/sharded")) == _expected("sharded")
        with mounted(f"{url}/v2.zarr", [f"client={client}"], tag="http2") as m:
            assert _read(m.p("a")) == _expected("a")


def test_zip_source(tmp_path):
    src = tmp_path / "d.zarr"
    _write_hierarchies(str(tmp_path / "unused.zarr"), str(src))
    path = tmp_path / "d.zip"
    with zipfile.ZipFile(path, "w") as z:
        for dirpath, _, files in os.walk(src):
            for name in files:
                full = os.path.join(dirpath, name)
                z.write(full, os.path.relpath(full, src))
    with mounted(str(path), tag="zip") as m:
        assert _read(m.p("plain")) == _expected("plain")
        assert _read(m.p("sub/sharded")) == _expected("sharded")


@pytest.fixture
def faulty(s3):
    url, proxy = s3
    opts = [f"so.endpoint_url={proxy.url}", "timeout=4", "cache_size=64K"]
    with mounted("s3://bkt/v2.zarr", opts, tag="fault") as m:
        yield m, proxy
        proxy.set("pass")


def _pread_chunk(m, row: int) -> tuple[bytes, bytes]:
    """One row of array ``a`` through the mount (O_DIRECT-free: a fresh fd each time)."""
    width = 300 * 4
    fd = os.open(m.p("a"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.pread(fd, width, row * width), _expected("a")[row * width : (row + 1) * width]
    finally:
        os.close(fd)


def _seconds_to_eio(m, row: int) -> float:
    """Reads ``row`` through the mount, which must fail with EIO; the seconds the failure
    took, which the tests bound (a store fault must not hang the reader)."""
    t0 = time.monotonic()
    with pytest.raises(OSError) as e:
        _pread_chunk(m, row)
    assert e.value.errno == errno.EIO
    return time.monotonic() - t0


@pytest.mark.parametrize("mode", ["fail503", "reset"])
def test_transient_faults_are_retried(faulty, mode):
    m, proxy = faulty
    proxy.set(mode, match="/a/1.0", count=2)
    got, want = _pread_chunk(m, 70)
    assert got == want
    assert proxy.hits >= 1
    got, want = _pread_chunk(m, 0)  # the mount is fine afterwards
    assert got == want


def test_permanent_error_fails_fast_and_is_logged(faulty):
    m, proxy = faulty
    proxy.set("forbid", match="/a/2.1")
    assert _seconds_to_eio(m, 130) < 4.0  # not retried up to the deadline
    assert m.wait_for_log("a/2.1") is not None
    proxy.set("pass")
    assert _pread_chunk(m, 130)[0] == _pread_chunk(m, 130)[1]


def test_stall_gives_eio_within_the_deadline(faulty):
    m, proxy = faulty
    proxy.set("stall", match="/a/3.2")
    assert _seconds_to_eio(m, 195) < 4 + 8
    proxy.set("pass")
    got, want = _pread_chunk(m, 10)
    assert got == want


def test_latency_still_correct_and_each_chunk_fetched_once(faulty):
    m, proxy = faulty
    proxy.set("latency", delay=0.02)
    before = json.loads(os.getxattr(m.path, "user.zarrmount.stats"))["store_gets"]
    assert _read(m.p("a")) == _expected("a")
    after = json.loads(os.getxattr(m.path, "user.zarrmount.stats"))["store_gets"]
    assert after - before <= 4 * 5  # 20 chunks, each fetched once
