"""``-o client=obstore`` against S3 (moto, a fault proxy in front): every array of a v2
and a v3 hierarchy (sharded, sparse, big-endian) reads as zarr-python reads it through
s3fs; transient errors are retried by zarrmount, a 403 fails fast, a 404 is the fill
value, a stall fails within 1.2x the timeout; the disk cache, revalidation and the
refusal of ``rw`` work as with fsspec's client.
"""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest
import zarr
from helpers import mounting
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted
from helpers.remote_servers import (  # noqa: F401 - fixtures
    BUCKET,
    V2_ARRAYS,
    V3_ARRAYS,
    expected_bytes,
    read_all,
    s3_data_fixture,
    s3_fixture,
    zarr_s3_store,
)

pytestmark = pytest.mark.mount

CHUNK_1_0 = r"/v2\.zarr/ints/1\.0$"  # rows 64-127, columns 0-63 of "ints" (200 x 300 <i4)
AT_1_0 = 70 * 300 * 4  # a byte of that chunk

proxy = fault_proxy_fixture()
fault = fault_fixture()


def _opts(fault, timeout: float = 10, *extra: str) -> list[str]:
    return ["client=obstore", f"so.endpoint_url={fault.url}", f"timeout={timeout:g}", *extra]


def _pread(path: str, offset: int, size: int) -> bytes | OSError:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    except OSError as e:
        return e
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", ["v2", "v3", "v3_plain"])
def test_every_array_reads_as_zarr_python_reads_it(s3_data, fault, kind):
    url = getattr(s3_data, kind)
    oracle = s3_data.oracle(url)
    with mounted(url, _opts(fault), tag=f"obs-{kind}") as m:
        for name in V2_ARRAYS if kind == "v2" else V3_ARRAYS:
            want = expected_bytes(oracle, kind[:2], name, m.p(name))
            assert read_all(m.p(name)) == want, name
        stats = m.stats()
        assert stats["store_errors"] == 0 and stats["store_gets"] > 0
        m.assert_alive()


def test_transient_errors_are_retried_by_zarrmount(s3_data, fault):
    ints = np.ascontiguousarray(s3_data.oracle(s3_data.v2)["ints"][:]).tobytes()
    with mounted(s3_data.v2, _opts(fault, 5), tag="obs-503") as m:
        rule = fault.set("status", CHUNK_1_0, status=503, code="SlowDown", count=3)
        assert _pread(m.p("ints"), AT_1_0, 4096) == ints[AT_1_0:][:4096]
        assert rule.applied == 3
        retries = [line for line in m.read_log().splitlines() if "retrying" in line]
        assert len(retries) == 3 and all("ints/1.0" in line for line in retries), retries
        assert m.stats()["store_errors"] == 0


def test_a_403_fails_fast_and_the_rest_reads(s3_data, fault):
    ints = np.ascontiguousarray(s3_data.oracle(s3_data.v2)["ints"][:]).tobytes()
    with mounted(s3_data.v2, _opts(fault, 5), tag="obs-403") as m:
        rule = fault.set("status", CHUNK_1_0, status=403, code="AccessDenied")
        t0 = time.monotonic()
        got = _pread(m.p("ints"), AT_1_0, 100)
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert time.monotonic() - t0 < 2.5, "a permanent error was retried"
        assert 1 <= rule.applied <= 2
        assert m.wait_for_log("ints/1.0", timeout=2)
        assert _pread(m.p("ints"), 0, 1200) == ints[:1200]
        fault.set("pass")
        assert _pread(m.p("ints"), AT_1_0, 100) == ints[AT_1_0:][:100]
        m.assert_alive()


def test_a_404_is_the_fill_value(s3_data, fault):
    oracle = s3_data.oracle(s3_data.v2)["ints"]
    with mounted(s3_data.v2, _opts(fault, 5), tag="obs-404") as m:
        fault.set("status", CHUNK_1_0, status=404, code="NoSuchKey", methods=("GET", "HEAD"))
        want = oracle[:].copy()
        want[64:128, 0:64] = oracle.fill_value
        assert read_all(m.p("ints")) == want.astype("<i4").tobytes()
        assert m.stats()["store_errors"] == 0


def test_a_stalled_read_fails_within_1_2x_the_timeout(s3_data, fault):
    timeout = 6
    with mounted(s3_data.v2, _opts(fault, timeout, "direct_io"), tag="obs-stall") as m:
        fault.set("stall", CHUNK_1_0)
        t0 = time.monotonic()
        got = _pread(m.p("ints"), AT_1_0, 100)
        took = time.monotonic() - t0
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert took < 1.2 * timeout, took
        fault.set("pass")
        assert not isinstance(_pread(m.p("ints"), AT_1_0, 100), OSError)
        m.assert_alive()


def test_rw_is_refused_with_the_reason(s3_data, fault):
    with (
        pytest.raises(mounting.MountFailed, match="obstore client mounts read-only"),
        mounted(s3_data.v2, [*_opts(fault), "rw"], tag="obs-rw"),
    ):
        pass


def test_a_remount_reads_the_disk_cache_without_fetching_chunks(s3_data, fault, tmp_path):
    oracle = s3_data.oracle(s3_data.v3)
    opts = _opts(fault, 10, f"disk_cache={tmp_path / 'disk'}")
    with mounted(s3_data.v3, opts, tag="obs-disk1") as m:
        first = read_all(m.p("sub/sharded"))
    fault.clear()
    with mounted(s3_data.v3, opts, tag="obs-disk2") as m:
        assert read_all(m.p("sub/sharded")) == first
        assert first == expected_bytes(oracle, "v3", "sub/sharded", m.p("sub/sharded"))
        assert m.stats()["disk_cache_hits"] > 0
    assert fault.count("GET", r"/sharded/c/", None) == 0, fault.requests


def test_changes_by_another_writer_are_read_after_the_ttls(s3, fault):
    """Changed and added chunks (validators from one listing) and a grown array."""
    url = f"s3://{BUCKET}/obstore-ttl-{os.getpid()}.zarr"
    zarr.open_group(zarr_s3_store(url, s3.url), mode="w", zarr_format=3)
    writer = zarr.create_array(
        zarr_s3_store(url, s3.url), name="a", shape=(4, 1024), chunks=(1, 1024), dtype="<i4"
    )
    writer[:2] = 1  # rows 2-3 absent: the fill value
    with mounted(url, _opts(fault, 10, "metadata_ttl=1", "negative_ttl=1"), tag="obs-ttl") as m:
        assert read_all(m.p("a")) == writer[:].tobytes()
        writer[0] = 7  # changed
        writer[2] = 9  # added
        writer.resize((6, 1024))
        writer[5] = 5
        time.sleep(1.2)  # both TTLs run out
        assert os.stat(m.p("a")).st_size == 6 * 1024 * 4
        expected = zarr.open_array(zarr_s3_store(url, s3.url, read_only=True), path="a")[:]
        assert read_all(m.p("a")) == expected.tobytes()
        assert m.stats()["cache_stale"] >= 1
