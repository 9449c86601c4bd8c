"""Icechunk repositories: every version a mount can pick reads as zarr-python reads that
version, and a wrong name or place fails the mount with one line.

The repository is written by zarr-python through Icechunk over several commits: a tag, a
second branch, a chunk changed, an array added later, an array deleted."""

from __future__ import annotations

import datetime
import errno
import os
import shutil

import numpy as np
import pytest
import zarr
from helpers.common import listed_kinds
from helpers.mounting import run_cli
from helpers.oracle import assert_bytes_equal, read_file

icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
icechunk.set_logs_filter("error")  # not its warnings of local repositories on each open

pytestmark = pytest.mark.mount


def _commit(repo, branch: str, message: str, change) -> str:
    session = repo.writable_session(branch)
    change(zarr.open_group(session.store))
    return session.commit(message)


def _first(root) -> None:
    root.attrs["title"] = "versions"
    temp = root.create_array("temp", shape=(40, 30), chunks=(10, 10), dtype="f4")
    temp[:] = np.arange(1200, dtype="f4").reshape(40, 30)
    counts = root.create_group("grp").create_array(
        "counts", shape=(100,), chunks=(16,), dtype="i2", fill_value=-1
    )
    counts[:50] = np.arange(50, dtype="i2")


def _change_chunk(root) -> None:
    root["temp"][12:18, 3:7] = -5.0
    later = root.create_array("later", shape=(7, 3), chunks=(4, 2), dtype="u8")
    later[:] = np.arange(21, dtype="u8").reshape(7, 3) * 3


def _delete_counts(root) -> None:
    del root["grp"]["counts"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """The repository's path, and each version's name -> (mount options, snapshot id)."""
    path = str(tmp_path_factory.mktemp("icechunk") / "repo")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
    first = _commit(repo, "main", "first", _first)
    repo.create_tag("v1", first)
    repo.create_branch("dev", first)
    dev = _commit(repo, "dev", "on dev", lambda root: root["temp"].__setitem__((0, 0), 99))
    second = _commit(repo, "main", "a chunk changed, an array added", _change_chunk)
    third = _commit(repo, "main", "an array deleted", _delete_counts)
    written = {info.id: info.written_at for info in repo.ancestry(branch="main")}
    between = written[first] + (written[second] - written[first]) / 2
    versions = {
        "default": ([], third),
        "main": (["branch=main"], third),
        "dev": (["branch=dev"], dev),
        "tag": (["tag=v1"], first),
        "snapshot": ([f"snapshot={second}"], second),
        "as_of": ([f"as_of={between.isoformat()}"], first),
    }
    return path, versions


def _expected(path: str, snapshot_id: str) -> dict[str, np.ndarray | None]:
    """Every node zarr-python finds at that snapshot: arrays' data, None for groups."""
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    root = zarr.open_group(repo.readonly_session(snapshot_id=snapshot_id).store, mode="r")
    return {
        name: node[...] if isinstance(node, zarr.Array) else None
        for name, node in root.members(max_depth=None)
    }


@pytest.mark.parametrize("name", ["default", "main", "dev", "tag", "snapshot", "as_of"])
def test_each_version_reads_as_zarr_python_reads_it(repository, mount_factory, name):
    path, versions = repository
    options, snapshot_id = versions[name]
    expected = _expected(path, snapshot_id)
    mount = mount_factory(f"icechunk+file://{path}", options, tag=f"ice-{name}")
    kinds = {p: "dir" if data is None else "file" for p, data in expected.items()}
    assert listed_kinds(mount.path) == kinds
    for node, data in expected.items():
        if data is not None:
            assert_bytes_equal(read_file(mount.p(node)), data.tobytes(), data.dtype)
    assert snapshot_id in mount.read_log()


def test_versions_differ_where_the_commits_changed_them(repository):
    """The versions are not all one: else the test above shows little."""
    path, versions = repository
    data = {name: _expected(path, snapshot) for name, (_, snapshot) in versions.items()}
    assert "grp/counts" in data["tag"] and "grp/counts" not in data["default"]
    assert "later" in data["snapshot"] and "later" not in data["as_of"]
    assert data["dev"]["temp"][0, 0] == 99 and data["tag"]["temp"][0, 0] == 0
    assert not np.array_equal(data["tag"]["temp"], data["snapshot"]["temp"])


@pytest.mark.parametrize(
    "source, options, reason",
    [
        ("missing", [], "no such directory"),
        ("empty", [], "RepositoryNotFound"),
        ("repo", ["branch=nope"], "nope"),
        ("repo", ["tag=nope"], "nope"),
        ("repo", ["snapshot=0000000000000000000A"], "SnapshotNotFound"),
        ("repo", ["as_of=2001-01-01T00:00:00"], "2001"),
        ("repo", ["branch=main,tag=v1"], "pick one version"),
        ("plain", ["tag=v1"], "Icechunk repository"),
        ("relative", [], "icechunk+file:///PATH"),
        ("future", [], "format version 9"),
    ],
)
def test_a_wrong_name_or_place_fails_the_mount_with_one_line(
    repository, tmp_path, source, options, reason
):
    path, _ = repository
    (tmp_path / "empty").mkdir()
    (tmp_path / "mnt").mkdir()
    if source == "future":  # the repository's format version, one byte of its header
        shutil.copytree(path, tmp_path / "future")
        header = bytearray((tmp_path / "future" / "repo").read_bytes())
        assert header[:3] == b"ICE" and header[36] == 2, "Icechunk's header changed"
        header[36] = 9
        (tmp_path / "future" / "repo").write_bytes(bytes(header))
    sources = {
        "missing": f"icechunk+file://{tmp_path}/missing",
        "empty": f"icechunk+file://{tmp_path}/empty",
        "repo": f"icechunk+file://{path}",
        "plain": str(tmp_path / "empty"),
        "relative": "icechunk+file://repo",
        "future": f"icechunk+file://{tmp_path}/future",
    }
    args = [sources[source], str(tmp_path / "mnt")] + (["-o", *options] if options else [])
    res = run_cli(args)
    assert res.returncode != 0
    assert reason in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not os.path.ismount(tmp_path / "mnt")


def _history(path: str) -> tuple[dict[str, str], dict[str, str], dict[str, object]]:
    """Branches, tags and every snapshot they reach, as Icechunk lists them."""
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    branches = {name: repo.lookup_branch(name) for name in repo.list_branches()}
    tags = {name: repo.lookup_tag(name) for name in repo.list_tags()}
    infos = {}
    for tip in {*branches.values(), *tags.values()}:
        infos.update({info.id: info for info in repo.ancestry(snapshot_id=tip)})
    return branches, tags, infos


def _assert_reads_as(mount_dir: str, path: str, snapshot_id: str) -> None:
    expected = _expected(path, snapshot_id)
    kinds = {p: "dir" if data is None else "file" for p, data in expected.items()}
    assert listed_kinds(mount_dir) == kinds, mount_dir
    for node, data in expected.items():
        if data is not None:
            got = read_file(os.path.join(mount_dir, node))
            assert_bytes_equal(got, data.tobytes(), data.dtype)


def test_snapshots_hold_every_version_icechunk_lists(repository, mount_factory):
    path, _ = repository
    branches, tags, infos = _history(path)
    mount = mount_factory(f"icechunk+file://{path}", tag="ice-snapshots")
    assert ".snapshots" not in os.listdir(mount.p())  # hidden, as ZFS's .zfs
    snapshots = mount.p(".snapshots")
    assert set(os.listdir(snapshots)) == {"branches", "tags", *infos}
    assert set(os.listdir(f"{snapshots}/branches")) == set(branches)
    assert set(os.listdir(f"{snapshots}/tags")) == set(tags)
    for name, sid in branches.items():
        _assert_reads_as(f"{snapshots}/branches/{name}", path, sid)
    for name, sid in tags.items():
        _assert_reads_as(f"{snapshots}/tags/{name}", path, sid)
    for sid, info in infos.items():
        where = f"{snapshots}/{sid}"
        if info.parent_id is None:  # the repository's first snapshot holds nothing
            assert os.listdir(where) == []
        else:
            _assert_reads_as(where, path, sid)
        since_epoch = info.written_at - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        micros = since_epoch // datetime.timedelta(microseconds=1)
        assert os.stat(where).st_mtime_ns == micros * 1000
        assert os.getxattr(where, "user.snapshot.message").decode() == info.message
        assert os.getxattr(where, "user.snapshot.parent").decode() == (info.parent_id or "")


def test_show_snapshots_lists_it_and_a_version_mount_has_its_own(repository, mount_factory):
    path, versions = repository
    options, _ = versions["tag"]
    mount = mount_factory(f"icechunk+file://{path}", [*options, "show_snapshots"], tag="ice-show")
    assert ".snapshots" in os.listdir(mount.p())
    branches, _, _ = _history(path)
    _assert_reads_as(mount.p(".snapshots/branches/main"), path, branches["main"])
    with pytest.raises(OSError) as raised:
        os.open(mount.p(".snapshots/branches/main/temp"), os.O_RDWR)
    assert raised.value.errno == errno.EROFS


def test_a_plain_store_has_no_snapshots(tmp_path, mount_factory):
    root = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    root.create_array("x", shape=(4,), dtype="i1")[:] = 1
    mount = mount_factory(tmp_path / "plain.zarr", tag="ice-plain")
    assert not os.path.exists(mount.p(".snapshots"))


def test_virtual_chunks_are_read_from_authorized_prefixes_only(tmp_path, mount_factory):
    """A chunk of an Icechunk array that is a byte range of a NetCDF file: read with
    ``-o virtual_prefix`` naming its container, EIO with the reason without."""
    netCDF4 = pytest.importorskip("netCDF4")
    kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
    files = tmp_path / "files"
    files.mkdir()
    data = files / "data.nc"
    with netCDF4.Dataset(data, "w") as ds:
        ds.createDimension("y", 6)
        ds.createDimension("x", 8)
        ds.createVariable("mask", "<i2", ("y", "x"))[:] = np.arange(48).reshape(6, 8) - 9
    with netCDF4.Dataset(data) as ds:
        expected = np.asarray(ds["mask"][...])
    where, offset, length = kerchunk_hdf.SingleHdf5ToZarr(
        str(data), inline_threshold=0
    ).translate()["refs"]["mask/0.0"]
    container = f"file://{files}/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.local_filesystem_store(str(files))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(container, store))
    path = str(tmp_path / "repo")
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(path),
        config,
        {container: icechunk.credentials.LocalFileSystemAccess},
    )
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="mask", shape=(6, 8), dtype="<i2", compressors=None)
    session.store.set_virtual_ref("mask/c/0/0", f"file://{where}", offset=offset, length=length)
    session.commit("a virtual chunk")
    refused = mount_factory(f"icechunk+file://{path}", tag="ice-virtual-no")
    with pytest.raises(OSError) as failed:
        read_file(refused.p("mask"))
    assert failed.value.errno == errno.EIO
    assert "mask/c/0/0" in refused.read_log() and "authorize" in refused.read_log()
    allowed = mount_factory(
        f"icechunk+file://{path}", [f"virtual_prefix={files}"], tag="ice-virtual"
    )
    assert_bytes_equal(read_file(allowed.p("mask")), expected.tobytes(), expected.dtype)
