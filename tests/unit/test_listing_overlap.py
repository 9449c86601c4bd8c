"""A group's children's metadata documents are fetched at once from a remote store, at
most ``GATHERED`` at a time, and the children are what fetching them one by one gives:
same order, a bad document hiding only its node, an unreachable store failing the
listing (so the one made before is served), the kernel request's deadline kept."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import zarr

from zarrmount import hierarchy
from zarrmount.format.model import HiddenNode
from zarrmount.store import StoreError, Unreachable, deadline
from zarrmount.store.base import GATHERED
from zarrmount.store.local import LocalStore

WIDE = 24  # arrays in the wide group: more than one gather's worth of requests
DELAY_S = 0.02


class SlowRemote(LocalStore):
    """A directory read as a far store: each get waits DELAY_S; counts what is in flight
    at once, and fails the keys in ``failing`` with their exception."""

    remote = True

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.failing: dict[str, Exception] = {}
        self.failing_lists = False
        self.gets: list[str] = []
        self.deadlines: list[float] = []
        self._lock = threading.Lock()
        self.inflight = self.peak = 0

    def list_dir(self, prefix: str) -> list[str]:
        if self.failing_lists:
            raise StoreError("500 Internal Error")
        return super().list_dir(prefix)

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        with self._lock:
            self.gets.append(key)
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
        self.deadlines.append(deadline.left(60.0))
        try:
            time.sleep(DELAY_S)
            if key in self.failing:
                raise self.failing[key]
            return super().get(key, deadline_s=deadline_s)
        finally:
            with self._lock:
                self.inflight -= 1


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def root(request, tmp_path) -> str:
    """A hierarchy: ``wide`` with WIDE arrays, a subgroup and a stray object."""
    path = str(tmp_path / "data.zarr")
    top = zarr.open_group(path, mode="w", zarr_format=request.param)
    wide = top.create_group("wide")
    for i in range(WIDE):
        wide.create_array(f"a{i:02d}", shape=(i + 1, 3), dtype="<i2", chunks=(4, 3))[:] = 1
    wide.create_group("sub").create_array("x", shape=(5,), dtype="<f8")[:] = np.arange(5)
    (tmp_path / "data.zarr" / "wide" / "stray").write_bytes(b"not a node")
    return path


def _wide(store):
    """The dialect and the group ``wide`` (the root listed to find it)."""
    dialect, top, _ = hierarchy.open_hierarchy(store)
    return dialect, next(c.node for c in dialect.children(top) if c.name == "wide")


def _children(store):
    dialect, group = _wide(store)
    return dialect.children(group)


def _document(store, path: str) -> str:
    """The document that tells what the node at ``path`` is."""
    return f"{path}/{'zarr.json' if store.root_marker == 'zarr.json' else '.zarray'}"


def test_documents_are_fetched_at_once_and_the_children_are_the_same(root):
    store = SlowRemote(root)
    dialect, group = _wide(store)
    store.gets.clear()
    found = dialect.children(group)
    expected = _children(LocalStore(root))
    assert [repr(c) for c in found] == [repr(c) for c in expected]
    assert [c.name for c in found] == [*(f"a{i:02d}" for i in range(WIDE)), "sub"]
    assert 2 <= store.peak <= GATHERED
    assert len(store.gets) == len(set(store.gets)), "a document fetched twice"


def test_a_failing_document_hides_only_its_node(root):
    store = SlowRemote(root)
    dialect, group = _wide(store)
    store.failing[_document(store, "wide/a03")] = StoreError("403 Forbidden")
    found = {c.name: c.node for c in dialect.children(group)}
    assert isinstance(found["a03"], HiddenNode) and "403" in found["a03"].reason
    assert len(found) == WIDE + 1
    assert not any(isinstance(n, HiddenNode) for name, n in found.items() if name != "a03")


def test_an_unreachable_store_fails_the_listing_and_the_rest_is_not_asked(root):
    store = SlowRemote(root)
    dialect, group = _wide(store)
    store.failing[_document(store, "wide/a00")] = Unreachable("no answer")
    store.gets.clear()
    with pytest.raises(Unreachable):
        dialect.children(group)
    assert len(store.gets) < 2 * GATHERED  # those begun before it failed, no more


def test_a_failing_listing_fails_the_children(root):
    store = SlowRemote(root)
    dialect, group = _wide(store)
    store.failing_lists = True
    with pytest.raises(StoreError, match="500"):
        dialect.children(group)


def test_the_requests_keep_the_kernel_requests_deadline(root):
    store = SlowRemote(root)
    dialect, group = _wide(store)
    store.deadlines.clear()
    with deadline.request(5.0):
        dialect.children(group)
    assert store.deadlines and max(store.deadlines) <= 5.0


def test_a_local_store_reads_each_document_when_needed(root):
    store = LocalStore(root)
    assert store.gather(["wide/zarr.json", "wide/.zgroup"]) == {}
