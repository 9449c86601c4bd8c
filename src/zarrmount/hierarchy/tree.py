"""A hierarchy's groups listed on demand, in worker threads within the store's limits."""

from __future__ import annotations

import errno
import logging

from zarrmount.errors import FsError
from zarrmount.format.model import GroupNode
from zarrmount.hierarchy.base import Child, Dialect
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore

log = logging.getLogger(__name__)


class Tree:
    def __init__(self, dialect: Dialect, store: AsyncStore) -> None:
        self.dialect = dialect
        self.store = store

    async def children(self, group: GroupNode) -> list[Child]:
        """The nodes directly below ``group``; EIO when the store cannot list it."""
        try:
            return await self.store.run(lambda _store: self.dialect.children(group))
        except StoreError as e:
            log.error("cannot list group %r: %s", group.path or "/", e)
            raise FsError(errno.EIO, str(e)) from e
