"""The same mount, read, write, lease, fault and freshness tests on each cloud's emulator:
S3 (moto), Google Cloud Storage (fake-gcs-server through gcsfs) and Azure Blob (azurite
through adlfs). The expected bytes are zarr-python's, through the same fsspec backend.
The read-only tests run with each client (``-o client=``): fsspec's backends, and
obstore's on S3 and Azure (it lists GCS through an XML API fake-gcs-server lacks).
"""

from __future__ import annotations

import errno
import itertools
import os
import time

import numpy as np
import pytest
import zarr
from helpers.clouds import cloud_fixture  # noqa: F401 - fixture
from helpers.mounting import MountFailed, mounted
from helpers.remote_servers import FaultProxy

pytestmark = pytest.mark.mount

ROWS, COLS = 8, 16384  # chunks of one row: 64 KiB
_names = itertools.count()


def _new_url(cloud, what: str) -> str:
    return cloud.url(f"clouds/{os.getpid()}-{next(_names)}-{what}.zarr")


def _write_group(cloud, url: str) -> dict[str, np.ndarray]:
    """A v3 group of a plain array (zstd) and a sharded one; zarr-python's view of each."""
    group = zarr.open_group(cloud.zarr_store(url), mode="w", zarr_format=3)
    values = np.arange(ROWS * COLS, dtype="<f4").reshape(ROWS, COLS)
    group.create_array("plain", shape=values.shape, chunks=(1, COLS), dtype="<f4")[:] = values
    sharded = group.create_array(
        "sharded", shape=values.shape, chunks=(1, COLS // 4), shards=(4, COLS), dtype="<f4"
    )
    sharded[:] = -values
    oracle = zarr.open_group(cloud.zarr_store(url, read_only=True), mode="r")
    return {name: oracle[name][:] for name in ("plain", "sharded")}


def _read(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), "<f4").reshape(ROWS, COLS)


@pytest.fixture(params=["fsspec", "obstore"])
def client(request, cloud) -> str:
    """``-o client=`` of a read-only mount."""
    if request.param == "obstore" and cloud.name == "gcs":
        pytest.skip("obstore lists GCS through an XML API fake-gcs-server lacks")
    return f"client={request.param}"


def _mount(cloud, url: str, *options: str, endpoint: str | None = None, tag: str = "cloud"):
    return mounted(
        url,
        [*cloud.mount_options(endpoint), *options],
        env=cloud.mount_env(endpoint),
        tag=f"{cloud.name}-{tag}",
    )


def test_a_mount_reads_what_zarr_python_reads(cloud, client):
    url = _new_url(cloud, "read")
    expected = _write_group(cloud, url)
    with _mount(cloud, url, client) as m:
        assert sorted(os.listdir(m.path)) == ["plain", "sharded"]
        for name, values in expected.items():
            assert (_read(m.p(name)) == values).all(), name
        assert m.stats()["store_errors"] == 0
        m.assert_alive()


def test_writes_reach_the_store_under_a_lease(cloud):
    url = _new_url(cloud, "rw")
    zarr.create_array(
        cloud.zarr_store(url), shape=(ROWS, COLS), chunks=(1, COLS), dtype="<f4", fill_value=0
    )
    row = np.linspace(0, 1, COLS, dtype="<f4")
    with _mount(cloud, url, "rw", tag="rw") as m:
        with pytest.raises(MountFailed, match="read-write already"), _mount(cloud, url, "rw"):
            pass  # a second writer is refused while the first holds the lease
        fd = os.open(m.p("array"), os.O_WRONLY)
        try:
            os.pwrite(fd, row.tobytes(), 3 * COLS * 4)
            os.fsync(fd)
        finally:
            os.close(fd)
        stored = zarr.open_array(cloud.zarr_store(url, read_only=True), mode="r")[:]
        assert (stored[3] == row).all() and (np.delete(stored, 3, axis=0) == 0).all()
        m.assert_alive()
    assert not cloud.fs().exists(f"{url.split('://', 1)[1]}/.zarrmount.lock")  # given up


def test_transient_errors_are_retried_and_a_forbidden_chunk_fails_alone(cloud, client):
    url = _new_url(cloud, "faults")
    expected = _write_group(cloud, url)
    with FaultProxy(cloud.endpoint) as proxy, _mount(cloud, url, client, endpoint=proxy.url) as m:
        rule = proxy.set("status", r"plain(/|%2F)c(/|%2F)", count=3, status=503)
        assert (_read(m.p("plain")) == expected["plain"]).all()
        assert rule.applied == 3  # each retried (by zarrmount, or by the backend's SDK)
        proxy.set("status", r"sharded(/|%2F)c(/|%2F)1", status=403, code="AccessDenied")
        start = time.monotonic()
        with pytest.raises(OSError) as e:
            _read(m.p("sharded"))
        assert e.value.errno == errno.EIO
        assert time.monotonic() - start < 10  # no retries of a permanent error
        proxy.set("pass")
        assert (_read(m.p("sharded")) == expected["sharded"]).all()
        m.assert_alive()


def test_another_writer_is_followed_within_the_ttl(cloud, client):
    url = _new_url(cloud, "moves")
    expected = _write_group(cloud, url)
    with _mount(cloud, url, client, "metadata_ttl=1", "negative_ttl=1", tag="ttl") as m:
        assert (_read(m.p("plain")) == expected["plain"]).all()
        writer = zarr.open_array(cloud.zarr_store(f"{url}/plain"), mode="r+")
        writer[2] = 42.0
        time.sleep(1.2)
        now = zarr.open_array(cloud.zarr_store(f"{url}/plain", read_only=True), mode="r")[:]
        assert (now[2] == 42).all()
        assert (_read(m.p("plain")) == now).all()
        stats = m.stats()
        assert stats["cache_revalidated"] >= ROWS - 1 and stats["cache_stale"] >= 1, stats


def test_a_remount_reads_its_chunks_from_the_disk_cache(cloud, client, tmp_path):
    url = _new_url(cloud, "disk")
    expected = _write_group(cloud, url)
    options = (client, f"disk_cache={tmp_path / 'disk'}")
    for round_ in range(2):
        with _mount(cloud, url, *options, tag=f"disk{round_}") as m:
            for name, values in expected.items():
                assert (_read(m.p(name)) == values).all(), name
            stats = m.stats()
    assert stats["disk_cache_hits"] >= 2 * ROWS, stats
    assert stats["store_get_bytes"] < COLS, stats  # metadata alone: no chunk fetched
