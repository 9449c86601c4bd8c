"""Directories: a group's children, listed on first use (lookup or readdir), so mounting a
large hierarchy costs one metadata read, and a bad node hides only itself; listed again
when used after the listing's TTL (other writers), as a reload would list it."""

from __future__ import annotations

import errno
import logging
import stat
import time

import trio

from zarrmount.array import Pipeline
from zarrmount.errors import FsError, Unavailable
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.format.model import Node as Model
from zarrmount.hierarchy.base import Child
from zarrmount.vfs.listing import Listing
from zarrmount.vfs.node import Context, Node
from zarrmount.vfs.xattrs import group_xattrs

log = logging.getLogger(__name__)


def _same(old: object | None, new: object) -> bool:
    """The same description (metadata, attributes): dataclasses holding NumPy arrays, so
    compared by their text (only when reloading)."""
    return old is not None and repr(old) == repr(new)


class Directory(Node):
    """A group (or, with no group, the directory holding a root array)."""

    __slots__ = ("group", "table", "listing", "listed_at", "lock", "held")
    is_dir = True
    nlink = 2

    def __init__(self, ino: int, parent: int, group: GroupNode | None, table: Context):
        super().__init__(ino, parent)
        self.group = group
        self.table = table
        self.listing: Listing | None = None  # once listed
        self.listed_at = 0.0  # monotonic time the listing was made
        self.lock: trio.Lock | None = None  # while being listed
        self.held: list[Child] | None = None  # the children of a directory with no group
        if group is not None:
            table.noticed(group.path, group.attributes)

    def mode(self, read_only: bool) -> int:
        return stat.S_IFDIR | 0o555

    @property
    def listed(self) -> bool:
        return self.listing is not None

    def age(self) -> float:
        """Seconds since the listing was made."""
        return time.monotonic() - self.listed_at

    async def children(self, max_age: float | None = None) -> dict[str, int]:
        """The entries, listed first if never listed, or listed again (with the kernel
        told what changed) if the listing is older than ``max_age`` seconds."""
        if self.listing is not None and (max_age is None or self.age() < max_age):
            return self.listing.entries
        if self.lock is None:
            self.lock = trio.Lock()
        async with self.lock:
            if self.listing is None:
                found = self.held or await self.table.tree.children(self.group)
                self.listing = await self.table.adopt(self, found)
                self.listed_at = time.monotonic()  # made: a slow listing is used a whole TTL
            elif max_age is not None and self.age() >= max_age:
                try:
                    await self._refresh(max_age)
                except Unavailable:  # an outage: the listing is served past its TTL
                    log.debug("%s: listed as before, the store unreachable", self.ino)
            self.lock = None  # listed: nobody waits on it until it is stale
            return self.listing.entries

    async def _refresh(self, max_age: float) -> None:
        """List again, the hierarchy opened again first if it is as old."""
        tree = self.table.tree
        await tree.refresh(max_age)
        if self.ino == self.parent and tree.root is not None:
            try:
                self.take_root(*tree.root)
            except FsError as e:
                log.error("the root is not shown: %s", e)
                raise
        added, removed, replaced = await self.reload()
        self.table.forget(self.ino, added | removed | replaced)

    def take_root(self, root: Model, pipeline: Pipeline | None) -> None:
        """Show ``root`` as the hierarchy was opened again: the group this directory is, or
        the array it holds (and that array's pipeline, where built); EIO when the root
        changed between a group and an array."""
        if (self.group is None) != isinstance(root, ArrayNode):
            raise FsError(errno.EIO, "the root changed between a group and an array")
        if isinstance(root, GroupNode):
            self.group = root
        elif self.held:
            self.held = [Child(self.held[0].name, root)]
            if pipeline is not None:
                self.table.arrays.root_pipeline = pipeline

    async def reload(self) -> tuple[set[str], set[str], set[str]]:
        """List the group again (the tree reads the store anew): children described as
        before keep their nodes, the rest are made again. Returns the names added,
        removed and replaced; nodes of removed ones live on for handles still open."""
        old = self.listing
        if old is None:
            return set(), set(), set()
        found = self.held or await self.table.tree.children(self.group)
        same = {c.name for c in found if _same(self.table.model(old, c.name), c.node)}
        kept = old.kept(same, {c.name for c in found})
        fresh = [child for child in found if child.name not in same]
        self.listing = new = await self.table.adopt(self, fresh, kept)
        self.listed_at = time.monotonic()
        before, after = old.entries, new.entries
        replaced = {n for n in before.keys() & after.keys() if before[n] != after[n]}
        self.table.retire(set(before.values()) - set(after.values()))
        return after.keys() - before.keys(), before.keys() - after.keys(), replaced

    @property
    def model(self) -> GroupNode | None:
        return self.group

    def hold(self, child: Child) -> None:
        """Hold ``child`` without listing a group (the root array's directory)."""
        self.held = [child]

    def xattrs(self) -> dict[str, bytes]:
        group = self.group
        return group_xattrs("", {}) if group is None else group_xattrs(group.path, group.attributes)
