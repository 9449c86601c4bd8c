"""The versions of a mount's store as ``.snapshots/`` shows them (``vfs/snapshots.py``):
its history, read again once older than the mount's metadata TTL, and each snapshot's
hierarchy, opened on first use with engines of its own over the mount's cache, pool and
threads; its chunks are cached under the snapshot's id, never checked again."""

from __future__ import annotations

import datetime
import errno
import json
import logging
import time
from collections.abc import Callable

import trio

from zarrmount.array import Arrays
from zarrmount.codecs import Pipeline
from zarrmount.errors import FsError
from zarrmount.hierarchy import SourceError, open_hierarchy
from zarrmount.hierarchy.tree import Tree
from zarrmount.store import Store, StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.store.versions import History, Snapshot
from zarrmount.vfs.snapshots import Index, Version, View

log = logging.getLogger(__name__)

# A version's session is let go after this long unused (opened again on the next read);
# its hierarchy, engines and cached chunks stay
IDLE_S = 300.0

XATTR = "user.snapshot."
# (store of a snapshot, its root's pipeline, the cache keys' space) -> its engines
Engines = Callable[[Store, Pipeline | None, str], tuple[AsyncStore, Arrays]]


def _version(snapshot: Snapshot) -> Version:
    xattrs = {
        "id": snapshot.id,
        "parent": snapshot.parent or "",
        "message": snapshot.message,
        "written": snapshot.written.isoformat(),
        "metadata": json.dumps(snapshot.metadata, default=str),
    }
    since_epoch = snapshot.written - datetime.datetime.fromtimestamp(0, datetime.UTC)
    return Version(
        snapshot.id,
        since_epoch // datetime.timedelta(microseconds=1) * 1000,  # exact: no float
        {XATTR + name: value.encode() for name, value in xattrs.items()},
    )


def _index(history: History) -> Index:
    versions = {sid: _version(snapshot) for sid, snapshot in history.snapshots.items()}
    return Index({"branches": history.branches, "tags": history.tags}, versions)


def _open(store: Store, snapshot_id: str):
    """The store at ``snapshot_id`` and its hierarchy (None where it holds nothing)."""
    at = store.at(snapshot_id)
    if not at.list_dir(""):
        return at, None
    return at, open_hierarchy(at)


class StoreVersions:
    def __init__(self, store: AsyncStore, ttl: float | None, engines: Engines) -> None:
        self.store = store
        self.ttl = ttl  # seconds the history is trusted (None: for good)
        self.engines = engines
        self._index: Index | None = None
        self._read_at = 0.0
        self._views: dict[str, View | None] = {}
        self._stores: dict[str, Store] = {}  # of the views, to let go of when idle
        self._lock = trio.Lock()  # the history, read once at a time
        self._opening = trio.Lock()  # a version, opened once however many ask at once

    async def index(self) -> Index:
        async with self._lock:
            old = self._index is None or (
                self.ttl is not None and time.monotonic() - self._read_at >= self.ttl
            )
            if old:
                started = time.monotonic()
                try:
                    history = await self.store.run(lambda store: store.history())
                except StoreError as e:
                    log.error("cannot read the store's versions: %s", e)
                    raise FsError(errno.EIO, str(e)) from e
                self._index, self._read_at = _index(history), started
            assert self._index is not None
            return self._index

    async def view(self, snapshot_id: str) -> View | None:
        async with self._opening:
            if snapshot_id not in self._views:
                self._views[snapshot_id] = await self._view(snapshot_id)
            return self._views[snapshot_id]

    async def _view(self, snapshot_id: str) -> View | None:
        try:
            at, opened = await self.store.run(_open, snapshot_id)
        except (StoreError, SourceError) as e:
            log.error("snapshot %s: %s", snapshot_id, e)
            raise FsError(errno.EIO, str(e)) from e
        if opened is None:
            return None
        dialect, root, pipeline = opened
        self._stores[snapshot_id] = at
        store, arrays = self.engines(at, pipeline, f"@{snapshot_id}/")
        log.info("opened snapshot %s", snapshot_id)
        return View(Tree(dialect, store), arrays, root)

    async def keep(self, idle_s: float = IDLE_S) -> None:
        """Let go of the sessions of versions unused for ``idle_s`` (a background task)."""
        while True:
            await trio.sleep(idle_s / 2)
            released = [sid for sid, store in self._stores.items() if store.release_if_idle(idle_s)]
            if released:
                log.info("let go of idle snapshots %s", ", ".join(released))
