"""Directories: a group's children, listed on first use (lookup or readdir), so mounting a
large hierarchy costs one metadata read, and a bad node hides only itself."""

from __future__ import annotations

import stat

import trio

from zarrmount.format.model import GroupNode
from zarrmount.hierarchy.base import Child
from zarrmount.vfs.node import Context, Node
from zarrmount.vfs.xattrs import group_xattrs


class Directory(Node):
    """A group (or, with no group, the directory holding a root array)."""

    __slots__ = ("group", "table", "entries", "lock", "held")
    is_dir = True
    nlink = 2

    def __init__(self, ino: int, parent: int, group: GroupNode | None, table: Context):
        super().__init__(ino, parent)
        self.group = group
        self.table = table
        self.entries: dict[str, int] | None = None  # once listed
        self.lock: trio.Lock | None = None  # while being listed
        self.held: list[Child] | None = None  # the children of a directory with no group
        if group is not None:
            table.noticed(group.path, group.attributes)

    def mode(self, read_only: bool) -> int:
        return stat.S_IFDIR | 0o555

    async def children(self) -> dict[str, int]:
        if self.entries is not None:
            return self.entries
        if self.lock is None:
            self.lock = trio.Lock()
        async with self.lock:
            if self.entries is None:
                found = self.held or await self.table.tree.children(self.group)
                self.entries = await self.table.adopt(self, found)
                self.lock = None  # listed for good: nobody waits on it again
            return self.entries

    def hold(self, child: Child) -> None:
        """Hold ``child`` without listing a group (the root array's directory)."""
        self.held = [child]

    def xattrs(self) -> dict[str, bytes]:
        group = self.group
        return group_xattrs("", {}) if group is None else group_xattrs(group.path, group.attributes)
