"""One writer per object store: the lease object of rw mounts of an S3 source (moto on
loopback, own process), through real mounts. A second rw mount is refused naming the
first, unless forced; readers are welcome; a SIGKILLed daemon's lease never blocks the
next mount on this host; a clean unmount removes the lease. The store is checked with
s3fs directly, not through zarrmount."""

from __future__ import annotations

import json
import os
import signal
import uuid

import numpy as np
import pytest
import zarr
from helpers import mounting, rw_tools
from helpers.mounting import MountFailed
from helpers.remote_servers import (  # noqa: F401 - fixtures
    BUCKET,
    s3_fixture,
    s3fs_for,
    zarr_s3_store,
)

from zarrmount.store.local import LOCK_NAME

pytestmark = pytest.mark.mount


class Source:
    def __init__(self, url: str, endpoint: str) -> None:
        self.url = url
        self.endpoint = endpoint
        self.fs = s3fs_for(endpoint)
        self.lease_key = f"{url[len('s3://') :]}/{LOCK_NAME}"

    @property
    def options(self) -> list[str]:
        return [f"so.endpoint_url={self.endpoint}"]

    def lease(self) -> dict | None:
        """The lease object as S3 holds it, or None."""
        fs = s3fs_for(self.endpoint)  # fresh: no cache between looks
        if not fs.exists(self.lease_key):
            return None
        return json.loads(fs.cat_file(self.lease_key))


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def source(request, s3):
    """A fresh hierarchy without consolidated metadata: mounts list the store root, where
    the lease object lives beside the root metadata."""
    url = f"s3://{BUCKET}/lease-{uuid.uuid4().hex[:12]}/data.zarr"
    root = zarr.open_group(zarr_s3_store(url, s3.url), mode="w", zarr_format=request.param)
    root.create_array("a", shape=(20, 30), chunks=(8, 8), dtype="<i4", fill_value=0)[:] = np.arange(
        600, dtype="<i4"
    ).reshape(20, 30)
    src = Source(url, s3.url)
    yield src
    src.fs.rm(url[len("s3://") :].rsplit("/", 1)[0], recursive=True)


def test_second_rw_mount_is_refused_naming_the_first(source):
    with mounting.mounted(source.url, source.options, tag="leasero0") as ro:
        assert os.listdir(ro.path) == ["a"]
    assert source.lease() is None  # a read-only mount takes no lease

    with rw_tools.rw_mount(source.url, source.options, tag="lease1") as first:
        held = source.lease()
        assert held is not None and first.path in held["holder"]
        assert held["pid"] == first.proc.pid

        with (
            pytest.raises(MountFailed) as e,
            rw_tools.rw_mount(source.url, source.options, tag="lease2"),
        ):
            pass
        assert "mounted read-write already" in str(e.value)
        assert first.path in str(e.value)  # the holder: who has it and where

        with mounting.mounted(source.url, source.options, tag="leasero") as ro:
            assert os.listdir(ro.path) == ["a"]  # readers welcome; the lease is no node
        with rw_tools.rw_mount(source.url, [*source.options, "nolock"], tag="leaseforce") as f:
            assert os.listdir(f.path) == ["a"]
        assert source.lease()["token"] == held["token"]  # the forced mount left it alone
        first.assert_alive()
    assert source.lease() is None  # a clean unmount removes it


def test_a_killed_writers_lease_does_not_block_the_next_mount(source):
    with rw_tools.rw_mount(source.url, source.options, tag="leasekill") as m:
        killed = source.lease()
        assert killed is not None and killed["pid"] == m.proc.pid
        os.kill(m.proc.pid, signal.SIGKILL)
        assert rw_tools.wait_exit(m.proc, 10) == -signal.SIGKILL
        rw_tools.lazy_unmount_dead(m.path)
    assert source.lease() == killed  # nobody removed it: the daemon died holding it

    with rw_tools.rw_mount(source.url, source.options, tag="leaseagain") as again:
        assert os.listdir(again.path) == ["a"]
        taken = source.lease()
        assert taken["token"] != killed["token"] and again.path in taken["holder"]
        assert "taking over the writer lease" in again.read_log()
    assert source.lease() is None
