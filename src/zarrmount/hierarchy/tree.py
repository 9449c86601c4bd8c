"""A hierarchy's groups listed on demand, in worker threads within the store's limits, and
the hierarchy opened again when its metadata may have changed (a reload, a TTL)."""

from __future__ import annotations

import errno
import logging
import time

from zarrmount.codecs import Pipeline
from zarrmount.errors import FsError, Unavailable
from zarrmount.format.model import GroupNode, Node
from zarrmount.hierarchy import open_hierarchy
from zarrmount.hierarchy.base import Child, Dialect, SourceError
from zarrmount.store import Store, StoreError, Unreachable
from zarrmount.store.aio import AsyncStore

log = logging.getLogger(__name__)

Opened = tuple[Dialect, Node, Pipeline | None]


def _validators(store: Store, keys: tuple[str, ...]) -> tuple[str | None, ...]:
    return tuple(store.validator(key) for key in keys)


def _reopen(store: Store, previous: Dialect) -> Opened:
    store.forget_listings()
    return open_hierarchy(store, previous)


class Tree:
    def __init__(self, dialect: Dialect, store: AsyncStore) -> None:
        self.dialect = dialect
        self.store = store
        self.opened_at = time.monotonic()
        self.root: tuple[Node, Pipeline | None] | None = None  # as last opened again
        self._validators: tuple[str | None, ...] | None = None  # of its documents, then

    def use(self, dialect: Dialect, root: Node, pipeline: Pipeline | None) -> None:
        """List with ``dialect`` from now on (the hierarchy as opened again)."""
        self.dialect, self.root = dialect, (root, pipeline)

    async def reopen(self) -> Opened:
        """The hierarchy as the store holds it now (SourceError, StoreError); what the
        current dialect parsed is used again where its document did not change."""
        started = time.monotonic()
        found = await self.store.run(_reopen, self.dialect)
        self.opened_at = started
        return found

    async def refresh(self, max_age: float) -> None:
        """Open the hierarchy again if it was opened more than ``max_age`` seconds ago
        and its documents (the root's metadata, consolidated metadata) changed since, as
        their validators tell; EIO when its root is gone."""
        started = time.monotonic()
        if started - self.opened_at < max_age:
            return
        try:
            found = await self.store.run(_validators, self.dialect.documents())
            if found == self._validators and found[0] is not None:
                self.opened_at = started  # unchanged: nothing to read again
                return
            self.use(*await self.reopen())
            self._validators = found
        except Unreachable as e:
            raise Unavailable(str(e)) from e  # the outage is logged once, by the store
        except (SourceError, StoreError) as e:
            log.error("cannot read the hierarchy's root again: %s", e)
            raise FsError(errno.EIO, str(e)) from e

    async def children(self, group: GroupNode) -> list[Child]:
        """The nodes directly below ``group``; EIO when the store cannot list it, or lists
        nothing and its root metadata is gone (a deleted store is no empty group)."""
        try:
            found = await self.store.run(lambda _store: self.dialect.children(group))
            if not found:
                await self.store.check_root()
        except Unreachable as e:
            raise Unavailable(str(e)) from e
        except StoreError as e:
            log.error("cannot list group %r: %s", group.path or "/", e)
            raise FsError(errno.EIO, str(e)) from e
        return found
