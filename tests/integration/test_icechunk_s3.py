"""An Icechunk repository in S3 (moto on loopback), where many hosts mount one repository:
read through ``icechunk+s3://`` with the usual storage options and the credentials of
the environment, and written by several ``rw`` mounts at once, whose commits Icechunk's
conditional writes order. Expected values come from zarr-python reading through Icechunk."""

from __future__ import annotations

import os
import threading
import uuid

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted
from helpers.oracle import assert_bytes_equal, read_file
from helpers.remote_servers import BUCKET, s3_fixture  # noqa: F401 - fixtures

icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
icechunk.set_logs_filter("error")

pytestmark = pytest.mark.mount

SHAPE, CHUNKS = (12, 6), (4, 6)  # three chunks of rows 0-3, 4-7, 8-11
ROW = SHAPE[1] * 4


@pytest.fixture
def repository(s3):
    """A repository under a fresh prefix of the moto bucket: its URL and its storage."""
    prefix = f"ice-{uuid.uuid4().hex[:12]}"
    storage = icechunk.s3_storage(
        bucket=BUCKET,
        prefix=prefix,
        endpoint_url=s3.url,
        allow_http=True,
        force_path_style=True,
        from_env=True,
    )
    session = icechunk.Repository.create(storage).writable_session("main")
    grid = zarr.create_array(session.store, name="grid", shape=SHAPE, chunks=CHUNKS, dtype="<i4")
    grid[...] = np.arange(72, dtype="<i4").reshape(SHAPE)
    session.commit("made")
    return f"icechunk+s3://{BUCKET}/{prefix}", storage, [f"so.endpoint_url={s3.url}"]


def _grid(storage) -> np.ndarray:
    repo = icechunk.Repository.open(storage)
    return zarr.open_array(repo.readonly_session("main").store, path="grid", mode="r")[...]


def test_a_repository_in_s3_reads_as_zarr_python_reads_it(repository):
    url, storage, options = repository
    with mounted(url, options, tag="ice-s3") as mount:
        expected = _grid(storage)
        assert_bytes_equal(read_file(mount.p("grid")), expected.tobytes(), expected.dtype)
        assert len(os.listdir(mount.p(".snapshots"))) == 2 + 2  # branches, tags, 2 snapshots
        with open("/proc/mounts") as f:
            line = next(line for line in f if mount.path in line)
        assert "AWS" not in line and "secret" not in line


def test_several_mounts_commit_to_one_branch_at_once(repository, tmp_path):
    """Three mounts (as on three hosts) each write their own chunk and fsync at the same
    moment: every commit lands, rebased by Icechunk onto the others'."""
    url, storage, options = repository
    expected = np.arange(72, dtype="<i4").reshape(SHAPE)
    errors: list[BaseException] = []
    with (
        rw_tools.rw_mount(url, [*options, f"journal={tmp_path / 'j0'}"], tag="ice-s3-0") as m0,
        rw_tools.rw_mount(url, [*options, f"journal={tmp_path / 'j1'}"], tag="ice-s3-1") as m1,
        rw_tools.rw_mount(url, [*options, f"journal={tmp_path / 'j2'}"], tag="ice-s3-2") as m2,
    ):
        mounts = [m0, m1, m2]
        start = threading.Barrier(len(mounts))

        def write(i: int) -> None:
            try:
                fd = os.open(mounts[i].p("grid"), os.O_RDWR)
                try:
                    rows = np.full((4, SHAPE[1]), 100 + i, dtype="<i4").tobytes()
                    rw_tools.pwrite_all(fd, rows, 4 * i * ROW)
                    start.wait(30)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(mounts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        stats = [rw_tools.stats(m.p()) for m in mounts]
        assert [s["store_commits"] for s in stats] == [1, 1, 1]
        assert sum(s["store_conflicts"] for s in stats) == 0
    for i in range(len(mounts)):
        expected[4 * i : 4 * i + 4] = 100 + i
    assert np.array_equal(_grid(storage), expected)
