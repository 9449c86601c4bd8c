"""A group's links as old-style groups hold them (every reader's): a local heap of the
members' names, symbol table nodes (``SNOD``) of up to 2 x leaf K entries sorted by name,
and a version 1 B-tree (type 0) of up to 2 x internal K children a node over them, as
many levels as it takes, both K values the superblock's.

A key of a B-tree node is the heap offset of a name: key ``i + 1`` the greatest name
under child ``i``, key 0 the greatest before the node (the empty name at offset 0 for
the first); the library finds a name between two keys and bisects a node's entries, so
names are sorted as C strings (by their UTF-8 bytes). The group's area is laid out as::

    [local heap: prefix, then its names][B-tree nodes, root level first][SNODs]

and any byte range of it is made from the names and entries it touches alone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from zarrmount.headers.hdf5.binary import UNDEFINED, align8, u16, u32, u64

HEAP_PREFIX = 32
ENTRY_SIZE = 40
_NO_FREE_BLOCK = 1  # the end of a local heap's free list, as the library writes it
_GROUP_NODES = 0
_CACHED_GROUP = 1  # an entry caching a group's B-tree and heap addresses

# an entry's member -> (object header address, (B-tree, heap) of a group or None)
Entries = Callable[[int], tuple[int, tuple[int, int] | None]]


def entry(name_offset: int, address: int, group: tuple[int, int] | None) -> bytes:
    """A symbol table entry: a name in the heap, the object, what is cached of a group."""
    if group is None:
        return u64(name_offset) + u64(address) + bytes(24)
    btree, heap = group
    return u64(name_offset) + u64(address) + u32(_CACHED_GROUP) + bytes(4) + u64(btree) + u64(heap)


class Links:
    """The layout of a group's links, ``names`` sorted as C strings; places are relative
    to the area's start, addresses made from its ``base``."""

    def __init__(self, names: list[bytes], leaf_k: int, internal_k: int) -> None:
        self.names, self.leaf_k, self.internal_k = names, leaf_k, internal_k
        padded = np.fromiter((align8(len(n) + 1) for n in names), np.int64, len(names))
        # where each name starts in the heap's data (offset 0 holds the empty name)
        self.offsets = np.concatenate(([8], 8 + np.cumsum(padded)))
        self.snods = -(-len(names) // (2 * leaf_k))
        self.levels = [max(1, -(-self.snods // (2 * internal_k)))]  # nodes a level, leaves up
        while self.levels[-1] > 1:
            self.levels.append(-(-self.levels[-1] // (2 * internal_k)))
        self.heap_size = HEAP_PREFIX + int(self.offsets[-1])
        self.node_size = 24 + 8 * (4 * internal_k + 1)
        self.snod_size = 8 + 2 * leaf_k * ENTRY_SIZE
        self.size = self.snod_at(self.snods)

    def node_at(self, level: int, j: int) -> int:
        """Where node ``j`` of ``level`` lies: levels from the root down."""
        return self.heap_size + (sum(self.levels[level + 1 :]) + j) * self.node_size

    def snod_at(self, i: int) -> int:
        return self.heap_size + sum(self.levels) * self.node_size + i * self.snod_size

    @property
    def root(self) -> int:
        return self.node_at(len(self.levels) - 1, 0)

    def heap(self, base: int, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the local heap: its prefix, the empty name, then the
        names, each null-terminated and padded to 8 bytes."""
        rel = start - HEAP_PREFIX
        if rel < 8:
            data = u64(int(self.offsets[-1])) + u64(_NO_FREE_BLOCK) + u64(base + HEAP_PREFIX)
            first, at, parts = 0, 0, [b"HEAP" + bytes(4) + data + bytes(8)]
        else:
            first = int(np.searchsorted(self.offsets, rel, "right")) - 1
            at, parts = HEAP_PREFIX + int(self.offsets[first]), []
        for i in range(first, len(self.names)):
            if HEAP_PREFIX + self.offsets[i] >= stop:
                break
            parts.append(self.names[i].ljust(int(self.offsets[i + 1] - self.offsets[i]), b"\0"))
        return b"".join(parts)[start - at : stop - at]

    def node(self, base: int, level: int, j: int) -> bytes:
        """B-tree node ``j`` of ``level``: its children (SNODs at level 0) and keys."""
        width = 2 * self.internal_k
        below = self.levels[level - 1] if level else self.snods
        children = range(j * width, min((j + 1) * width, below))
        span = width**level  # SNODs under each child
        keys = [self._left_key(children[0] * span)] if children else [0]
        keys += [self._right_key(min((c + 1) * span, self.snods) - 1) for c in children]
        child_at = partial(self.node_at, level - 1) if level else self.snod_at
        left = base + self.node_at(level, j - 1) if j else UNDEFINED
        right = base + self.node_at(level, j + 1) if j + 1 < self.levels[level] else UNDEFINED
        head = b"TREE" + bytes([_GROUP_NODES, level]) + u16(len(children)) + u64(left) + u64(right)
        body = b"".join(
            u64(k) + u64(base + child_at(c)) for k, c in zip(keys[:-1], children, strict=True)
        )
        node = head + body + u64(keys[-1])
        return node + bytes(self.node_size - len(node))

    def snod(self, i: int, entries: Entries) -> bytes:
        """Symbol table node ``i``: its members' entries, sorted, then unused ones."""
        per = 2 * self.leaf_k
        members = range(per * i, min(per * (i + 1), len(self.names)))
        body = b"".join(entry(int(self.offsets[m]), *entries(m)) for m in members)
        node = b"SNOD" + bytes([1, 0]) + u16(len(members)) + body
        return node + bytes(self.snod_size - len(node))

    def _right_key(self, snod: int) -> int:
        """The greatest name in SNOD ``snod``."""
        return int(self.offsets[min(2 * self.leaf_k * (snod + 1), len(self.names)) - 1])

    def _left_key(self, snod: int) -> int:
        return self._right_key(snod - 1) if snod else 0
