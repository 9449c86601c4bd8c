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
from zarrmount.vfs.sidecarfile import SidecarFile
from zarrmount.vfs.sidecars import Sidecar, header_size
from zarrmount.vfs.xattrs import warn_conventions

log = logging.getLogger(__name__)

ROOT_INODE = 1
# Read-only array files whose engine is kept after their last close, most recent first: a
# file opened again soon keeps its plans. Each may hold a few MiB (see docs/cache.md).
KEEP_CLOSED = 8


class InodeTable:
    def __init__(self, tree: Tree, arrays: Arrays, sidecars: tuple[Sidecar, ...] = ()) -> None:
        self.tree = tree
        self.arrays = arrays
        self.sidecars = sidecars  # shown beside each array file that has them
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

    def adopt(self, parent: Node, children: list[Child]) -> dict[str, int]:
        """The entries (name -> inode) of ``parent`` holding ``children``: their nodes, and
        the sidecars of the array files among them, which never shadow a real node."""
        entries: dict[str, int] = {}
        files: list[tuple[str, ArrayFile]] = []
        for child in children:
            model = child.node
            if isinstance(model, HiddenNode):
                log.warning("not shown: %s %r: %s", model.kind, model.path or "/", model.reason)
                continue
            kind = Directory if isinstance(model, GroupNode) else ArrayFile
            node = self.add(kind(self.next_ino(), parent.ino, model, self))
            entries[child.name] = node.ino
            if isinstance(node, ArrayFile):
                files.append((child.name, node))
        for name, file in files:
            self._add_sidecars(parent, name, file, entries)
        return entries

    def _add_sidecars(self, parent: Node, name: str, file: ArrayFile, entries: dict) -> None:
        meta = file.array.meta
        dtype = self.arrays.dtype(meta)
        for sidecar in self.sidecars:
            size = header_size(sidecar, meta.shape, dtype, name)
            if size is None:
                continue  # --inspect says why
            if name + sidecar.suffix in entries:
                log.warning("%s: no %s sidecar: a node of that name exists", name, sidecar.kind)
                continue
            node = SidecarFile(self.next_ino(), parent.ino, file, name, sidecar, size, self)
            entries[name + sidecar.suffix] = self.add(node).ino

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
