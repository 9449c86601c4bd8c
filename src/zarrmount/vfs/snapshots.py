"""``.snapshots/``: every version of a versioned store (an Icechunk repository) as a
read-only directory, as ZFS's ``.zfs/snapshot``: ``branches/NAME/``, ``tags/NAME/`` and
``ID/`` for each snapshot a branch or tag reaches. A version's hierarchy is opened on
first use, with engines of its own over the mount's cache; its contents never change.
"""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass, field
from typing import Protocol

import trio

from zarrmount.array import Arrays
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.hierarchy.base import Child
from zarrmount.hierarchy.tree import Tree
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.fs import ROOT_ARRAY_NAME
from zarrmount.vfs.listing import Listing
from zarrmount.vfs.node import Node
from zarrmount.vfs.table import ROOT_INODE, InodeTable

NAME = ".snapshots"
KINDS = ("branches", "tags")


@dataclass(frozen=True)
class Version:
    """One snapshot as the directories show it."""

    snapshot_id: str
    written_ns: int  # its commit time: the directory's mtime
    xattrs: dict[str, bytes] = field(default_factory=dict)  # message, parent, metadata


@dataclass(frozen=True)
class Index:
    refs: dict[str, dict[str, str]]  # "branches"/"tags" -> name -> snapshot id
    versions: dict[str, Version]  # every snapshot they reach, by id


@dataclass
class View:
    """A version's hierarchy, ready to list."""

    tree: Tree
    arrays: Arrays
    root: GroupNode | ArrayNode


class Versions(Protocol):
    """The store's versions (made by the mount's assembly: nothing here knows a store)."""

    async def index(self) -> Index:
        """Branches, tags and snapshots, read again once older than the mount's TTL."""

    async def view(self, snapshot_id: str) -> View | None:
        """The hierarchy at ``snapshot_id``, opened once; None where it holds nothing."""


class _Folder(Node):
    """A directory of the history (``.snapshots``, ``branches``, ``tags``)."""

    __slots__ = ("table", "versions", "entries")
    is_dir = True
    nlink = 2

    def __init__(self, ino: int, parent: int, table: InodeTable, versions: Versions) -> None:
        super().__init__(ino, parent)
        self.table, self.versions = table, versions
        self.entries: dict[str, Node] = {}

    def mode(self, read_only: bool) -> int:
        return stat.S_IFDIR | 0o555

    def _root(self, name: str, version: Version) -> VersionRoot:
        """The entry ``name``, showing ``version``: kept while it shows the same one."""
        node = self.entries.get(name)
        if not isinstance(node, VersionRoot) or node.version != version:
            node = VersionRoot(self.table.next_ino(), self.ino, self.table, self.versions, version)
            self.entries[name] = self.table.add(node)
        return node

    def _keep(self, names: dict[str, Node]) -> dict[str, int]:
        """Entries now ``names``; the kernel forgets those that went or changed."""
        changed = {n for n, node in self.entries.items() if names.get(n) is not node}
        self.entries = names
        self.table.forget(self.ino, changed)
        return {name: node.ino for name, node in names.items()}


class SnapshotsDir(_Folder):
    """``.snapshots``: ``branches``, ``tags``, and a directory per snapshot id."""

    __slots__ = ()

    async def children(self, max_age: float | None = None) -> dict[str, int]:
        index = await self.versions.index()
        names: dict[str, Node] = {}
        for kind in KINDS:
            node = self.entries.get(kind) or self.table.add(
                RefsDir(self.table.next_ino(), self.ino, self.table, self.versions, kind)
            )
            names[kind] = node
        for snapshot_id, version in index.versions.items():
            names[snapshot_id] = self._root(snapshot_id, version)
        return self._keep(names)


class RefsDir(_Folder):
    """``branches`` or ``tags``: a directory per name, at the snapshot it names now."""

    __slots__ = ("kind",)

    def __init__(
        self, ino: int, parent: int, table: InodeTable, versions: Versions, kind: str
    ) -> None:
        super().__init__(ino, parent, table, versions)
        self.kind = kind

    async def children(self, max_age: float | None = None) -> dict[str, int]:
        index = await self.versions.index()
        refs = index.refs[self.kind]
        found = {name: index.versions[sid] for name, sid in refs.items() if sid in index.versions}
        return self._keep({name: self._root(name, version) for name, version in found.items()})


class VersionRoot(Directory):
    """One version's root group (or root array), listed once its hierarchy is opened."""

    __slots__ = ("versions", "version", "opening")

    def __init__(
        self, ino: int, parent: int, table: InodeTable, versions: Versions, version: Version
    ) -> None:
        super().__init__(ino, parent, None, table)
        self.versions, self.version = versions, version
        self.opening = trio.Lock()

    def mtime_ns(self) -> int | None:
        return self.version.written_ns

    async def children(self, max_age: float | None = None) -> dict[str, int]:
        """Its entries; its contents never change, whatever the mount's TTLs."""
        async with self.opening:
            if self.listing is None and self.held is None:
                await self._open()
        return await super().children(None)

    async def _open(self) -> None:
        view = await self.versions.view(self.version.snapshot_id)
        if view is None:  # a snapshot holding nothing (a repository's first)
            self.listing, self.listed_at = Listing(), time.monotonic()
            return
        self.table = self.table.view(view.tree, view.arrays)
        if isinstance(view.root, GroupNode):
            self.group = view.root
            self.table.noticed(view.root.path, view.root.attributes)
        else:
            self.hold(Child(ROOT_ARRAY_NAME, view.root))

    async def reload(self) -> tuple[set[str], set[str], set[str]]:
        return set(), set(), set()  # a snapshot never changes

    def xattrs(self) -> dict[str, bytes]:
        return {**super().xattrs(), **self.version.xattrs}


def attach(table: InodeTable, versions: Versions, shown: bool) -> None:
    """``.snapshots`` in the root: found by name, listed only when ``shown``."""
    node = SnapshotsDir(table.next_ino(), ROOT_INODE, table, versions)
    table.add_extra(ROOT_INODE, NAME, table.add(node), shown)
