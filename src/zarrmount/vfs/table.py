"""The inode table: every node listed so far, by number, and what nodes share (the
hierarchy to list, the array engines to open, the mount's settings)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from zarrmount.array import Arrays
from zarrmount.errors import enoent
from zarrmount.format.model import GroupNode, HiddenNode
from zarrmount.hierarchy.base import Child
from zarrmount.hierarchy.tree import Tree
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.node import Node
from zarrmount.vfs.xattrs import warn_conventions

log = logging.getLogger(__name__)

ROOT_INODE = 1
# Read-only array files whose engine is kept after their last close, most recent first: a
# file opened again soon keeps its plans. Each may hold a few MiB (see docs/cache.md).
KEEP_CLOSED = 8


class InodeTable:
    def __init__(self, tree: Tree, arrays: Arrays) -> None:
        self.tree = tree
        self.arrays = arrays
        self.read_only = arrays.read_only
        self.mtime_ns = time.time_ns()  # of the mount: every node's until written
        self.total_bytes = 0  # of every array file (statfs)
        self._nodes: dict[int, Node] = {}
        self._closed: OrderedDict[int, Node] = OrderedDict()  # see KEEP_CLOSED

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, ino: int) -> Node:
        node = self._nodes.get(ino)
        if node is None:
            raise enoent(f"inode {ino}")
        return node

    def add(self, node: Node) -> Node:
        self._nodes[node.ino] = node
        return node

    def next_ino(self) -> int:
        return len(self._nodes) + 1

    def adopt(self, parent: Node, child: Child, entries: dict[str, int]) -> None:
        """Add the node of ``child`` below ``parent``, in ``entries`` under its name."""
        model = child.node
        if isinstance(model, HiddenNode):
            log.warning("not shown: %s %r: %s", model.kind, model.path or "/", model.reason)
            return
        kind = Directory if isinstance(model, GroupNode) else ArrayFile
        node = self.add(kind(self.next_ino(), parent.ino, model, self))
        entries[child.name] = node.ino

    def noticed(self, path: str, attributes: dict, nbytes: int = 0) -> None:
        """A node was added: count its bytes, warn of malformed conventions once."""
        self.total_bytes += nbytes
        warn_conventions(path, attributes)

    def reopened(self, node: ArrayFile) -> None:
        self._closed.pop(node.ino, None)

    def closed(self, node: ArrayFile) -> None:
        """``node``'s last handle is closed: keep its engine among the KEEP_CLOSED most
        recent, then let go of the oldest's."""
        self._closed[node.ino] = node
        self._closed.move_to_end(node.ino)
        while len(self._closed) > KEEP_CLOSED:
            _, old = self._closed.popitem(last=False)
            old.let_go()
