"""Icechunk stores without FUSE, on in-memory repositories written by zarr-python: a
version's keys and history as Icechunk gives them, a session let go while idle and opened
again, and the arrays another writer changed, told once after a rebased commit."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from zarrmount.store.base import StoreError
from zarrmount.store.versions import Commits

icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
icechunk_repo = pytest.importorskip("zarrmount.store.icechunk_repo")
icechunk_branch = pytest.importorskip("zarrmount.store.icechunk_branch")


@pytest.fixture
def repo():
    repository = icechunk.Repository.create(icechunk.in_memory_storage())
    session = repository.writable_session("main")
    root = zarr.open_group(session.store, mode="w")
    for name in ("a", "b"):
        root.create_array(name, shape=(4,), chunks=(2,), dtype="<i2")[:] = np.arange(4)
    session.commit("made")
    return repository


def _version(repo, **version) -> icechunk_repo.IcechunkStore:
    found = icechunk_repo.resolve(repo, version)
    return icechunk_repo.IcechunkStore("icechunk+memory://x", repo, found, 5.0)


def test_a_version_reads_what_zarr_python_wrote_and_tells_its_history(repo):
    store = _version(repo)
    try:
        assert store.list_dir("") == ["a", "b", "zarr.json"]
        session = repo.readonly_session("main")
        raw = zarr.open_array(session.store, path="a", mode="r")
        assert store.get("a/zarr.json") is not None and raw.shape == (4,)
        history = store.history()
        tip = repo.lookup_branch("main")
        assert history.branches == {"main": tip} and tip in history.snapshots
        assert history.snapshots[tip].message == "made"
        assert store.identity.endswith(f"@{tip}") and store.fixed
        first = history.snapshots[tip].parent
        assert store.at(first).list_dir("") == []  # the repository's empty first snapshot
        with pytest.raises(StoreError, match="SnapshotNotFound"):
            store.at("0000000000000000000A")
    finally:
        store.close()


def test_an_idle_session_is_let_go_and_opened_again(repo):
    store = _version(repo)
    try:
        before = store.get("b/c/1")
        assert not store.release_if_idle(3600.0)  # used a moment ago
        assert store.release_if_idle(0.0) and store.inner is None
        assert not store.release_if_idle(0.0)  # nothing left to let go of
        assert store.get("b/c/1") == before and store.inner is not None
    finally:
        store.close()


def test_a_rebased_commit_tells_once_which_arrays_the_others_changed(repo):
    mine = icechunk_branch.IcechunkBranch("icechunk+memory://x", repo, "main", 5.0, Commits())
    other = repo.writable_session("main")
    try:
        zarr.open_array(other.store, path="b")[0:2] = 9
        mine.set("a/c/1", mine.get("a/c/0"))  # another chunk of another array
        other.commit("theirs")
        mine.sync([])
        assert mine.counters() == {"commits": 1, "rebases": 1, "conflicts": 0, "uncommitted": 0}
        assert mine.changed_by_others() == {"b"}
        assert mine.changed_by_others() == set()
    finally:
        mine.close()
