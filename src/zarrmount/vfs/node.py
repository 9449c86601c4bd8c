"""What every kind of node offers the handlers: a new kind of file is a new module with a
subclass of :class:`Node` (and of :class:`Handle` if it can be opened), never a branch in
``fs.py``."""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from zarrmount.array import Arrays
from zarrmount.errors import FsError
from zarrmount.hierarchy.base import Child
from zarrmount.hierarchy.tree import Tree
from zarrmount.vfs.listing import Listing


class Handle:
    """An open file: what read, write, flush, fsync and release reach."""

    # Reads reach the handle as the reader asked them, past the kernel's page cache and
    # its read-ahead: for files whose pages map to chunks otherwise than in order.
    direct_io = False

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        raise FsError(errno.EBADF)

    async def write(self, offset: int, data: bytes) -> int:
        raise FsError(errno.EBADF)

    async def flush(self) -> None:
        """On close and fsync: report what could not be stored."""

    async def fsync(self) -> None:
        """Make this file's data durable where the store can."""

    async def release(self) -> None:
        """The last reference to the handle is gone."""


class Node:
    """One file or directory of the mount; subclasses hold little (100,000 per group)."""

    __slots__ = ("ino", "parent")
    is_dir = False
    nlink = 1
    model: object | None = None  # the group or array a child of a group shows (reloads)

    def __init__(self, ino: int, parent: int) -> None:
        self.ino = ino
        self.parent = parent

    def mode(self, read_only: bool) -> int:
        """File type and permission bits, before the mount's umask."""
        raise NotImplementedError

    def size(self) -> int:
        return 0

    def mtime_ns(self) -> int | None:
        """The node's own modification time; None: the mount's."""
        return None

    async def children(self, max_age: float | None = None) -> dict[str, int]:
        """A directory's entries (name -> inode), listed again if older than ``max_age``."""
        raise FsError(errno.ENOTDIR)

    def open(self, flags: int) -> Handle:
        raise FsError(errno.EISDIR)

    def truncate(self, size: int) -> None:
        raise FsError(errno.EINVAL, "this node has a fixed size")

    def set_mtime(self, mtime_ns: int) -> None:
        """Times of nodes that keep none are accepted and forgotten."""

    def xattrs(self) -> dict[str, bytes]:
        return {}

    async def warm_up(self, budget: int) -> int:
        """Get ready for a first read within ``budget`` bytes; returns the bytes used."""
        return 0

    async def ready(self) -> None:
        """Work out what the node's attributes need before the kernel is first told them
        (a file whose size depends on the groups below it)."""

    async def revalidate(self) -> None:
        """Check what the node caches against the store, if its TTL has run out."""

    def fresh_for(self) -> float | None:
        """Seconds what the node shows stays trusted (None: as long as its listing)."""
        return None

    def shown_files(self) -> list[Node]:
        """The array files whose bytes this node shows (the kernel forgets its pages when
        theirs change)."""
        return []


class Context(Protocol):
    """What nodes share (the inode table, ``vfs/table.py``)."""

    tree: Tree  # groups' children
    arrays: Arrays  # array engines
    read_only: bool
    mtime_ns: int  # of the mount

    def __getitem__(self, ino: int) -> Node:
        """The node ``ino`` (ENOENT if none)."""

    async def adopt(self, parent: Node, children: list[Child], kept: Listing | None = None):
        """The listing of ``parent`` holding ``children`` (and sidecars), after ``kept``."""

    def model(self, listing: Listing, name: str) -> object | None:
        """What the child ``name`` of ``listing`` showed, if shown."""

    def noticed(self, path: str, attributes: dict, nbytes: int | None = None) -> None:
        """A node was added (statistics, warnings)."""

    def forget(self, ino: int, names: set[str]) -> None:
        """The names of directory ``ino`` that changed: the kernel forgets what it kept."""

    def retire(self, inos: Iterable[int]) -> None:
        """Nodes no listing shows any more: dropped once nothing references them."""

    def reopened(self, node: Node) -> None:
        """A file let go after its last close is open again."""

    def closed(self, node: Node) -> None:
        """A file's last handle is closed: it may let go of its engine later."""
