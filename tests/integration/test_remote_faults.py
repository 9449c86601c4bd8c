"""Faults between the daemon and S3, injected by a proxy on loopback (moto behind it).

Each test mounts afresh (no page cache or chunk cache left from another test) with a
small ``-o timeout=`` and checks: transient errors (5xx, 429, resets mid-body) are retried
and the read succeeds; permanent ones (403; 404 of metadata) fail fast and are named in
the log; a stalled request is abandoned and the read fails with EIO in about the timeout,
never hangs; the mount stays up and serves normal reads after every fault.

``NO_BACKEND_RETRIES`` turns botocore's own retries off, so that what is retried is
retried by zarrmount (s3fs still retries resets and "SlowDown" a few times on its own).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
import time

import numpy as np
import pytest
from helpers import mounting
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted
from helpers.remote_servers import (  # noqa: F401 - fixtures
    V3_ARRAYS,
    expected_bytes,
    read_all,
    s3_data_fixture,
    s3_fixture,
)

pytestmark = pytest.mark.mount

NO_BACKEND_RETRIES = 'so.config_kwargs={"retries":{"max_attempts":0}}'
ROW = 300 * 4  # bytes per row of v2 "ints" (200 x 300 <i4, chunks 64 x 64)
CHUNK_1_0 = r"/v2\.zarr/ints/1\.0$"  # rows 64-127, columns 0-63
CHUNK_1_0_OFFSET = 70 * ROW  # an element of chunk 1.0


proxy = fault_proxy_fixture()
fault = fault_fixture()


@pytest.fixture(scope="module")
def ints(s3_data) -> bytes:
    """The bytes of v2 "ints" (<i4, little-endian: the file's own byte order)."""
    arr = s3_data.oracle(s3_data.v2)["ints"][:]
    assert arr.dtype == np.dtype("<i4")
    return np.ascontiguousarray(arr).tobytes()


def _opts(fault, timeout: float, *extra: str) -> list[str]:
    return [f"so.endpoint_url={fault.url}", f"timeout={timeout:g}", *extra]


def _pread(m, name: str, offset: int, size: int) -> bytes:
    fd = os.open(m.p(name), os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def _timed_pread(m, name, offset, size) -> tuple[bytes | OSError, float]:
    t0 = time.monotonic()
    try:
        result: bytes | OSError = _pread(m, name, offset, size)
    except OSError as e:
        result = e
    return result, time.monotonic() - t0


def _assert_normal_read(m, ints: bytes) -> None:
    """The mount is alive and a read of other chunks, and of the faulty one, is right."""
    m.assert_alive()
    assert _pread(m, "ints", 0, 4 * ROW) == ints[: 4 * ROW]
    assert _pread(m, "ints", CHUNK_1_0_OFFSET, 100) == ints[CHUNK_1_0_OFFSET:][:100]
    m.assert_alive()


def _log_lines(m, needle: str, level: str | None = None) -> list[str]:
    return [
        line
        for line in m.read_log().splitlines()
        if needle in line and (level is None or f" {level} " in line)
    ]


# -- transient errors ----------------------------------------------------------------


def test_503_twice_default_backend(s3_data, fault, ints):
    """Realistic settings (botocore retries on): two 503 SlowDown, then the object."""
    with mounted(s3_data.v2, _opts(fault, 10), tag="f503") as m:
        rule = fault.set("status", CHUNK_1_0, status=503, count=2)
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 4096)
        assert got == ints[CHUNK_1_0_OFFSET:][:4096]
        assert rule.applied == 2
        assert fault.count("GET", CHUNK_1_0, "200") >= 1
        assert m.stats()["store_errors"] == 0
        _assert_normal_read(m, ints)


@pytest.mark.parametrize(
    "status,code", [(500, "InternalError"), (503, "ServiceUnavailable"), (429, "TooManyRequests")]
)
def test_transient_status_retried_by_zarrmount(s3_data, fault, ints, status, code):
    """Backend retries off: zarrmount itself retries 5xx/429 with backoff, logs each retry
    naming the key, and the read returns the right bytes."""
    with mounted(s3_data.v2, _opts(fault, 5, NO_BACKEND_RETRIES), tag="fretry") as m:
        rule = fault.set("status", CHUNK_1_0, status=status, code=code, count=3)
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 4096)
        assert got == ints[CHUNK_1_0_OFFSET:][:4096], got
        assert rule.applied == 3
        retries = _log_lines(m, "ints/1.0", "WARNING")
        assert len(retries) == 3 and all("retrying" in line for line in retries), retries
        assert took < 5
        assert m.stats()["store_errors"] == 0
        _assert_normal_read(m, ints)


def test_persistent_5xx_fails_within_the_timeout(s3_data, fault, ints):
    """Retried until ``timeout``, then EIO (one FUSE request: direct_io); the log names the
    key and the cause."""
    timeout = 2
    opts = _opts(fault, timeout, NO_BACKEND_RETRIES, "direct_io")
    with mounted(s3_data.v2, opts, tag="f5xx") as m:
        rule = fault.set("status", CHUNK_1_0, status=500, code="InternalError")
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 4096)
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert rule.applied >= 3, "not retried"
        assert took < timeout + 2, took
        errors = _log_lines(m, "ints/1.0", "ERROR")
        assert errors, m.read_log()[-2000:]
        assert m.stats()["store_errors"] >= 1
        fault.set("pass")
        _assert_normal_read(m, ints)


@pytest.mark.parametrize("backend_retries", [True, False], ids=["backend", "zarrmount"])
def test_reset_mid_body(s3_data, fault, ints, backend_retries):
    """The connection drops halfway through the body: retried, never a truncated chunk.

    Seven resets are more than s3fs retries on its own (5): zarrmount must retry too."""
    extra = () if backend_retries else (NO_BACKEND_RETRIES,)
    count = 3 if backend_retries else 7
    with mounted(s3_data.v2, _opts(fault, 10, *extra), tag="freset") as m:
        rule = fault.set("reset", CHUNK_1_0, count=count)
        assert read_all(m.p("ints")) == ints
        assert rule.applied == count
        _assert_normal_read(m, ints)


def test_reset_mid_body_of_range_requests(s3_data, fault):
    """Resets on the range requests of a sharded array (index and inner chunks)."""
    with mounted(s3_data.v3, _opts(fault, 10), tag="fresetsh") as m:
        rule = fault.set("reset", r"/v3\.zarr/sub/sharded/c/0/0$", count=4)
        want = expected_bytes(s3_data.oracle(s3_data.v3), "v3", "sub/sharded", m.p("sub/sharded"))
        assert read_all(m.p("sub/sharded")) == want
        assert rule.applied == 4
        assert all(r.range for r in fault.requests if r.outcome == "reset")
        m.assert_alive()


# -- permanent errors ----------------------------------------------------------------


def test_403_on_a_chunk_fails_fast(s3_data, fault, ints):
    timeout = 5
    with mounted(s3_data.v2, _opts(fault, timeout), tag="f403") as m:
        rule = fault.set("status", CHUNK_1_0, status=403)
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 100)
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert took < timeout / 2, f"permanent error took {took:.1f} s (retried?)"
        # one GET per FUSE request (the kernel may ask twice), not retried
        assert 1 <= rule.applied <= 2, rule.applied
        errors = _log_lines(m, "ints/1.0", "ERROR")
        assert errors, m.read_log()[-2000:]
        assert m.stats()["store_errors"] >= 1
        # the rest of the array reads fine meanwhile
        assert _pread(m, "ints", 0, ROW) == ints[:ROW]
        fault.set("pass")
        _assert_normal_read(m, ints)


def test_404_on_a_chunk_reads_the_fill_value(s3_data, fault, ints):
    """A chunk the store says is missing is the fill value (Zarr): no error, no retry."""
    oracle = s3_data.oracle(s3_data.v2)
    with mounted(s3_data.v2, _opts(fault, 5), tag="f404") as m:
        fault.set("status", CHUNK_1_0, status=404, methods=("GET", "HEAD"))
        t0 = time.monotonic()
        got = read_all(m.p("ints"))
        assert time.monotonic() - t0 < 5  # never waited for the deadline (timeout=5)
        want = oracle["ints"][:].copy()
        want[64:128, 0:64] = oracle["ints"].fill_value
        assert got == want.astype("<i4").tobytes()
        assert m.stats()["store_errors"] == 0
        assert 1 <= fault.count(None, CHUNK_1_0, "404") <= 2, fault.requests  # not retried
        m.assert_alive()


def test_403_on_child_metadata_is_named_in_the_log(s3_data, fault):
    """Metadata the store refuses: the node is left out (or its group fails) quickly, the
    log names the key, the rest of the tree is there."""
    with mounted(s3_data.v2, _opts(fault, 5), tag="fmeta") as m:
        fault.set("status", r"/v2\.zarr/grp/\.z(array|group|attrs)$", status=403)
        t0 = time.monotonic()
        try:
            names = set(os.listdir(m.path))
        except OSError as e:
            assert e.errno == errno.EIO
            names = None
        assert time.monotonic() - t0 < 5  # never waited for the deadline (timeout=5)
        if names is not None:
            assert names == {"ints", "fortran", "bigend", "sparse"}
        assert m.wait_for_log("grp/.z", timeout=2), m.read_log()[-2000:]
        fault.set("pass")
        assert _pread(m, "bigend", 0, 8) != b""
        m.assert_alive()


@pytest.mark.parametrize("case", ["403", "missing"])
def test_root_metadata_errors_fail_the_mount_fast(s3_data, fault, case):
    if case == "403":
        source = s3_data.v2
        fault.set(
            "status",
            r"/v2\.zarr/(zarr\.json|\.zarray|\.zgroup)$",
            status=403,
            methods=("GET", "HEAD"),
        )
        needle = "zarr.json"
    else:
        source = s3_data.v2.replace("v2.zarr", "no-such.zarr")
        needle = "does not exist"  # the prefix: no such bucket, prefix or directory
    t0 = time.monotonic()
    with (
        pytest.raises(mounting.MountFailed) as e,
        mounted(source, _opts(fault, 10), tag="froot", timeout=20),
    ):
        pass
    took = time.monotonic() - t0
    assert "exited with status" in str(e.value), str(e.value)
    assert needle in str(e.value), str(e.value)
    assert took < 5, took


def test_transient_errors_on_root_metadata_at_mount(s3_data, fault):
    """The root metadata fails twice with 500: the mount retries and comes up."""
    rule = fault.set(
        "status",
        r"/v2\.zarr/(zarr\.json|\.zarray|\.zgroup)$",
        status=500,
        code="InternalError",
        count=2,
    )
    t0 = time.monotonic()
    with mounted(s3_data.v2, _opts(fault, 5, NO_BACKEND_RETRIES), tag="frootretry") as m:
        assert time.monotonic() - t0 < 5
        assert rule.applied == 2
        assert set(os.listdir(m.path)) == {"ints", "fortran", "bigend", "sparse", "grp"}


def test_failed_write_back_fails_fsync_and_is_retried(s3, fault):
    """``-o rw`` and every PUT refused with 503: fsync fails with EIO within about the
    timeout, the log names the keys, the data stays in memory; once S3 accepts PUTs again
    the next fsync stores it, one successful PUT per chunk."""
    import zarr
    from helpers.remote_servers import BUCKET, zarr_s3_store

    url = f"s3://{BUCKET}/rwfault/v3.zarr"
    zarr.create_array(
        zarr_s3_store(url, s3.url),
        shape=(40,),
        chunks=(10,),
        dtype="<i4",
        zarr_format=3,
        fill_value=0,
    )
    data = np.arange(1, 41, dtype="<i4")
    timeout = 2
    with mounted(url, ["rw", *_opts(fault, timeout, NO_BACKEND_RETRIES)], tag="frw") as m:
        fault.set("status", r"/rwfault/", status=503, code="ServiceUnavailable", methods=("PUT",))
        fd = os.open(m.p("array"), os.O_RDWR)
        try:
            assert os.pwrite(fd, data.tobytes(), 0) == data.nbytes
            t0 = time.monotonic()
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno == errno.EIO
            assert time.monotonic() - t0 < timeout + 3
            assert m.wait_for_log("c/0", timeout=2), m.read_log()[-2000:]
            assert os.pread(fd, data.nbytes, 0) == data.tobytes()  # still there
            fault.set("pass")
            os.fsync(fd)
        finally:
            os.close(fd)
        stored = [r.path for r in fault.data_requests if r.method == "PUT" and r.outcome == "200"]
        assert sorted(stored) == sorted(set(stored)) and len(stored) == 4, stored
    got = zarr.open_array(zarr_s3_store(url, s3.url, read_only=True), mode="r")[:]
    np.testing.assert_array_equal(got, data)


# -- stalls ----------------------------------------------------------------------------


def test_stall_abandoned_within_the_timeout_direct_io(s3_data, fault, ints):
    """One FUSE request (direct_io): a stalled GET gives EIO in about timeout + 1 s; other
    chunks are served meanwhile; once the stall is gone the same read works."""
    timeout = 2
    with mounted(s3_data.v2, _opts(fault, timeout, "direct_io"), tag="fstall") as m:
        rule = fault.set("stall", CHUNK_1_0)
        box: list = []
        reader = threading.Thread(
            target=lambda: box.append(_timed_pread(m, "ints", CHUNK_1_0_OFFSET, 100))
        )
        reader.start()
        assert _wait(lambda: rule.applied >= 1, 5), "the stalled request never arrived"
        t0 = time.monotonic()
        assert _pread(m, "ints", 0, 4 * ROW) == ints[: 4 * ROW]  # not blocked by the stall
        assert time.monotonic() - t0 < 2
        reader.join(timeout + 10)
        assert not reader.is_alive(), "the read hangs"
        got, took = box[0]
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert timeout - 0.5 < took < timeout + 2.5, took
        assert m.wait_for_log("ints/1.0", timeout=2), m.read_log()[-2000:]
        fault.set("pass")
        _assert_normal_read(m, ints)


def test_stall_read_fails_within_about_the_timeout(s3_data, fault, ints):
    """Default mount options: a plain read of a stalled chunk fails with EIO within about
    the timeout plus a few seconds."""
    timeout = 2
    with mounted(s3_data.v2, _opts(fault, timeout), tag="fstallpc") as m:
        fault.set("stall", CHUNK_1_0)
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 100)
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        fault.set("pass")
        _assert_normal_read(m, ints)
        assert took < timeout + 3, f"EIO after {took:.1f} s with timeout={timeout}"


@pytest.mark.parametrize("extra", [(), ("direct_io",)], ids=["page-cache", "direct-io"])
def test_a_stalled_read_fails_within_1_2x_the_timeout(s3_data, fault, ints, extra):
    """The deadline bounds what a reader waits: the fetch's own deadline, a little slack to
    abandon it, and with the page cache the kernel's re-send of the failed read (a short
    try, as the key failed a moment ago), together within 1.2x ``timeout``."""
    timeout = 10
    with mounted(s3_data.v2, _opts(fault, timeout, *extra), tag="fstall12") as m:
        fault.set("stall", CHUNK_1_0)
        got, took = _timed_pread(m, "ints", CHUNK_1_0_OFFSET, 100)
        assert isinstance(got, OSError) and got.errno == errno.EIO, got
        assert took < 1.2 * timeout, f"EIO after {took:.2f} s with timeout={timeout}"
        fault.set("pass")
        _assert_normal_read(m, ints)


def test_stall_on_a_group_listing(s3_data, fault):
    """Listing a group (no consolidated metadata) that stalls: EIO, then it works."""
    timeout = 2
    with mounted(s3_data.v2, _opts(fault, timeout), tag="fstalllist") as m:
        fault.set("stall", r"list-type=2")
        t0 = time.monotonic()
        with pytest.raises(OSError) as e:
            os.listdir(m.path)
        assert e.value.errno == errno.EIO
        assert time.monotonic() - t0 < timeout + 2.5
        fault.set("pass")
        assert set(os.listdir(m.path)) == {"ints", "fortran", "bigend", "sparse", "grp"}
        m.assert_alive()


def test_stall_on_root_metadata_fails_the_mount_within_the_timeout(s3_data, fault, tmp_path):
    """The mount command gives up on a store that does not answer within about the timeout
    (plus the start of the process) and says why in one line."""
    timeout = 2
    fault.set("stall", r"/v2\.zarr/(zarr\.json|\.zarray|\.zgroup)$", methods=("GET", "HEAD"))
    mnt = mounting.new_mountpoint("fstallroot")
    args = [mounting.zarrmount_exe(), s3_data.v2, mnt, "-f", "-o", ",".join(_opts(fault, timeout))]
    stderr = tmp_path / "stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        t0 = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout + 5)
        took = time.monotonic() - t0
        assert proc.poll() is not None, f"no mount and no failure after {took:.0f} s"
        assert proc.returncode != 0
        assert not os.path.ismount(mnt)
        last = stderr.read_text().strip().splitlines()[-1]
        assert last.startswith("zarrmount: cannot open ") and "no answer" in last, last
        assert f"within {timeout} s" in last, last
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 9)  # only the daemon this test started, by PID
        proc.wait(10)
        fault.set("pass")
        mounting.stop_mount(mnt, None)


# -- latency and concurrency -----------------------------------------------------------


def test_latency_still_correct(s3_data, fault):
    """50 ms on every request: every array of the v3 hierarchy (sharded too) is right."""
    fault.latency = 0.05
    with mounted(s3_data.v3, _opts(fault, 10), tag="flat") as m:
        oracle = s3_data.oracle(s3_data.v3)
        for name in V3_ARRAYS:
            want = expected_bytes(oracle, "v3", name, m.p(name))
            assert read_all(m.p(name)) == want, name
        assert m.stats()["store_errors"] == 0


@pytest.mark.parametrize("max_fetches", [2, 16])
def test_max_fetches_bounds_concurrent_requests(s3_data, fault, max_fetches):
    """One read touching 15 chunks: never more than ``max_fetches`` requests in flight."""
    fault.latency = 0.1
    opts = _opts(fault, 10, f"max_fetches={max_fetches}", "direct_io")
    with mounted(s3_data.v3, opts, tag="ffetch") as m:
        fault.clear()
        fault.latency = 0.1
        want = expected_bytes(s3_data.oracle(s3_data.v3), "v3", "plain", m.p("plain"))
        assert _pread(m, "plain", 0, len(want)) == want
        assert fault.max_inflight <= max_fetches
        if max_fetches > 2:
            assert fault.max_inflight > 2, "reads of independent chunks were not concurrent"


def test_more_requests_overlap_than_the_s3_clients_own_pool(s3_data, fault, ints):
    """One read touching 20 chunks of v2 "ints": more than the 10 connections botocore
    pools by default are in flight at once (the pool follows our own bound)."""
    opts = _opts(fault, 10, "max_fetches=32", "direct_io")
    with mounted(s3_data.v2, opts, tag="fpool") as m:
        fault.clear()
        fault.latency = 0.1
        assert _pread(m, "ints", 0, len(ints)) == ints
        assert 10 < fault.max_inflight <= 32, fault.max_inflight


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
