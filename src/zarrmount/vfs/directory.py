"""Directories: a group's children, listed on first use (lookup or readdir), so mounting a
large hierarchy costs one metadata read, and a bad node hides only itself."""

from __future__ import annotations

import stat

import trio

from zarrmount.format.model import GroupNode
from zarrmount.hierarchy.base import Child
from zarrmount.vfs.listing import Listing
from zarrmount.vfs.node import Context, Node
from zarrmount.vfs.xattrs import group_xattrs


def _same(old: object | None, new: object) -> bool:
    """The same description (metadata, attributes): dataclasses holding NumPy arrays, so
    compared by their text (only when reloading)."""
    return old is not None and repr(old) == repr(new)


class Directory(Node):
    """A group (or, with no group, the directory holding a root array)."""

    __slots__ = ("group", "table", "listing", "lock", "held")
    is_dir = True
    nlink = 2

    def __init__(self, ino: int, parent: int, group: GroupNode | None, table: Context):
        super().__init__(ino, parent)
        self.group = group
        self.table = table
        self.listing: Listing | None = None  # once listed
        self.lock: trio.Lock | None = None  # while being listed
        self.held: list[Child] | None = None  # the children of a directory with no group
        if group is not None:
            table.noticed(group.path, group.attributes)

    def mode(self, read_only: bool) -> int:
        return stat.S_IFDIR | 0o555

    @property
    def listed(self) -> bool:
        return self.listing is not None

    async def children(self) -> dict[str, int]:
        if self.listing is not None:
            return self.listing.entries
        if self.lock is None:
            self.lock = trio.Lock()
        async with self.lock:
            if self.listing is None:
                found = self.held or await self.table.tree.children(self.group)
                self.listing = await self.table.adopt(self, found)
                self.lock = None  # listed for good: nobody waits on it again
            return self.listing.entries

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
        before, after = old.entries, new.entries
        replaced = {n for n in before.keys() & after.keys() if before[n] != after[n]}
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
