"""Writing to the tip of an Icechunk branch through ``rw`` mounts: an fsync commits, two
mounts writing other chunks of one array both land, the same chunk is a conflict (EIO, the
log names it, the data stays in the mount) unless ``on_conflict=ours``, and a killed
daemon's acknowledged writes are committed by the next mount. Every expected value comes
from zarr-python reading the branch through Icechunk, or from NumPy."""

from __future__ import annotations

import contextlib
import errno
import os
import signal

import numpy as np
import pytest
import zarr
from helpers import rw_tools

icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
icechunk.set_logs_filter("error")

pytestmark = pytest.mark.mount

SHAPE, CHUNKS = (8, 6), (4, 3)  # four chunks of 12 int32 (48 bytes each)
ROW = SHAPE[1] * 4  # bytes of a row in the array file


@pytest.fixture
def repo(tmp_path):
    """A repository with one int32 array ``grid`` on main: 0, 1, ... in C order."""
    path = str(tmp_path / "repo")
    repository = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
    session = repository.writable_session("main")
    grid = zarr.create_array(session.store, name="grid", shape=SHAPE, chunks=CHUNKS, dtype="<i4")
    grid[...] = np.arange(48, dtype="<i4").reshape(SHAPE)
    session.commit("made")
    return path


def _main(path: str) -> tuple[np.ndarray, list]:
    """``grid`` at the tip of main, and main's ancestry (newest first)."""
    repository = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    grid = zarr.open_array(repository.readonly_session("main").store, path="grid", mode="r")
    return grid[...], list(repository.ancestry(branch="main"))


def _mount(path: str, tmp_path, tag: str, *options: str):
    journal = tmp_path / f"journal-{tag}"
    return rw_tools.rw_mount(
        f"icechunk+file://{path}", [f"journal={journal}", *options], tag=f"ice-{tag}"
    )


def _write_rows(mount, rows: slice, value: int, fd: int | None = None) -> None:
    """Rows ``rows`` of ``grid`` set to ``value`` through the array file, then fsync;
    into ``fd`` where given, neither synced nor closed."""
    data = np.full((rows.stop - rows.start, SHAPE[1]), value, dtype="<i4").tobytes()
    if fd is not None:
        rw_tools.pwrite_all(fd, data, rows.start * ROW)
        return
    fd = os.open(mount.p("grid"), os.O_RDWR)
    try:
        rw_tools.pwrite_all(fd, data, rows.start * ROW)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_fsync_commits_what_zarr_python_then_reads(repo, tmp_path):
    expected = np.arange(48, dtype="<i4").reshape(SHAPE)
    expected[0:4] = -7
    with _mount(repo, tmp_path, "fsync") as mount:
        _write_rows(mount, slice(0, 4), -7)
        found, history = _main(repo)
        assert np.array_equal(found, expected)
        assert history[0].message == "zarrmount: wrote grid"
        stats = rw_tools.stats(mount.p())
        assert stats["store_commits"] == 1 and stats["store_uncommitted"] == 0
    found, history = _main(repo)
    assert np.array_equal(found, expected) and len(history) == 3  # nothing more to commit


def test_sigterm_commits_what_was_written(repo, tmp_path):
    expected = np.arange(48, dtype="<i4").reshape(SHAPE)
    expected[0:4] = 6
    with _mount(repo, tmp_path, "term", "writeback_delay=600") as mount:
        fd = os.open(mount.p("grid"), os.O_RDWR)
        try:
            _write_rows(mount, slice(0, 4), 6, fd)  # neither synced nor closed
            mount.proc.send_signal(signal.SIGTERM)
            assert rw_tools.wait_exit(mount.proc, 30) == 0
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    found, history = _main(repo)
    assert np.array_equal(found, expected) and history[0].message == "zarrmount: wrote grid"


def test_the_commit_message_is_the_options(repo, tmp_path):
    with _mount(repo, tmp_path, "message", "commit_message=nightly fix") as mount:
        _write_rows(mount, slice(4, 8), 3)
    assert _main(repo)[1][0].message == "nightly fix"


def test_two_mounts_writing_other_chunks_both_land(repo, tmp_path):
    expected = np.arange(48, dtype="<i4").reshape(SHAPE)
    expected[0:4], expected[4:8] = 1, 2
    with _mount(repo, tmp_path, "one") as one, _mount(repo, tmp_path, "two") as two:
        _write_rows(one, slice(0, 4), 1)
        _write_rows(two, slice(4, 8), 2)  # its session began before one's commit: rebased
        assert rw_tools.stats(two.p())["store_rebases"] == 1
    assert np.array_equal(_main(repo)[0], expected)


def test_a_commit_onto_others_shows_their_chunks_in_this_mount(repo, tmp_path):
    """A mount that read the array, then commits onto another writer's commit: reads
    through it (page cache included) now show the other writer's chunks too."""
    with _mount(repo, tmp_path, "reader") as mine, _mount(repo, tmp_path, "other") as other:
        before = np.fromfile(mine.p("grid"), dtype="<i4").reshape(SHAPE)  # cached now
        assert (before[0:4] == np.arange(24).reshape(4, 6)).all()
        _write_rows(other, slice(0, 4), 1)
        _write_rows(mine, slice(4, 8), 2)  # rebased onto other's commit
        shown = np.fromfile(mine.p("grid"), dtype="<i4").reshape(SHAPE)
        assert (shown[0:4] == 1).all() and (shown[4:8] == 2).all()
        assert np.array_equal(shown, _main(repo)[0])


def test_the_same_chunk_fails_the_later_fsync_and_keeps_its_data(repo, tmp_path):
    with _mount(repo, tmp_path, "first") as first, _mount(repo, tmp_path, "later") as later:
        _write_rows(first, slice(0, 4), 1)
        with pytest.raises(OSError) as failed:
            _write_rows(later, slice(2, 4), 9)  # chunks (0, 0) and (0, 1) again
        assert failed.value.errno == errno.EIO
        log = later.read_log()
        assert "another writer changed the same chunks" in log and "grid chunks [0, 0]" in log
        shown = np.fromfile(later.p("grid"), dtype="<i4").reshape(SHAPE)
        assert (shown[2:4] == 9).all()  # still there, in this mount
        stats = rw_tools.stats(later.p())
        assert stats["store_conflicts"] == 1 and stats["store_uncommitted"] == 1
        assert (_main(repo)[0][0:4] == 1).all()  # the first writer's commit stands


def test_on_conflict_ours_lands_over_the_other(repo, tmp_path):
    # ours read its chunks (rows 0-3) before theirs landed and wrote rows 2-3 into them:
    # its chunks win whole, rows 0-1 as ours read them
    expected = np.arange(48, dtype="<i4").reshape(SHAPE)
    expected[2:4] = 9
    with (
        _mount(repo, tmp_path, "theirs") as theirs,
        _mount(repo, tmp_path, "ours", "on_conflict=ours") as ours,
    ):
        _write_rows(theirs, slice(0, 4), 1)
        _write_rows(ours, slice(2, 4), 9)
        assert rw_tools.stats(ours.p())["store_conflicts"] == 0
    assert np.array_equal(_main(repo)[0], expected)


def test_a_killed_daemons_acknowledged_writes_are_committed_by_the_next_mount(repo, tmp_path):
    expected = np.arange(48, dtype="<i4").reshape(SHAPE)
    expected[4:8] = 5
    journal = f"journal={tmp_path / 'journal-killed'}"
    source = f"icechunk+file://{repo}"
    with rw_tools.killed_after(source, "grid", [journal], "ice-killed") as (mount, fd):
        _write_rows(mount, slice(4, 8), 5, fd)
    assert len(_main(repo)[1]) == 2  # nothing was committed
    with _mount(repo, tmp_path, "killed") as again:
        assert "replayed" in again.read_log()
        assert np.array_equal(_main(repo)[0], expected)


def test_other_versions_of_an_rw_mount_are_read_only(repo, tmp_path):
    with _mount(repo, tmp_path, "views") as mount:
        old = mount.p(".snapshots/branches/main/grid")
        assert os.stat(old).st_mode & 0o222 == 0
        with pytest.raises(OSError) as refused:
            os.open(old, os.O_WRONLY)
        assert refused.value.errno == errno.EROFS
        assert os.stat(mount.p("grid")).st_mode & 0o200


def test_a_fixed_version_refuses_rw_with_the_reason(repo, tmp_path):
    from helpers.mounting import run_cli

    repository = icechunk.Repository.open(icechunk.local_filesystem_storage(repo))
    tip = repository.lookup_branch("main")
    repository.create_tag("v1", tip)
    (tmp_path / "mnt").mkdir()
    for version in ("tag=v1", f"snapshot={tip}", "as_of=2100-01-01"):
        res = run_cli([f"icechunk+file://{repo}", str(tmp_path / "mnt"), "-o", f"rw,{version}"])
        assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
        assert "fixed version" in res.stderr, res.stderr
    assert len(_main(repo)[1]) == 2
