"""Where everything of the file lies, and any byte range of its header made from the
objects it touches alone.

The file::

    [superblock][for each object in file order: its object header, and a group's links
    (local heap, B-tree nodes, SNODs)][global heap collections][zeros up to the data]
    [each array's data region, in file order, zeros between]

The layout keeps each object's header size and heap items' places, never their bytes: a
read of the header makes the objects, links and collections it reaches (converting their
attributes again), so a tree of 10,000 arrays is never held whole.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from zarrmount.headers.hdf5 import attributes, global_heap, messages, objects
from zarrmount.headers.hdf5.attributes import HeapIds
from zarrmount.headers.hdf5.superblock import SIZE as SUPERBLOCK_SIZE
from zarrmount.headers.hdf5.superblock import superblock
from zarrmount.headers.hdf5.symbols import Links
from zarrmount.headers.hdf5.tree import Array, Group
from zarrmount.headers.hdf5.walk import Omission, Planned, walk

LEAF_K, INTERNAL_K = 4, 16  # the library's defaults: 8 entries a SNOD, 32 children a node
_PAGE = 4096
# a region of this size or more starts on a multiple of it: the kernel's reads of the
# file (1 MiB as mounted) then fall on the array file's own read boundaries
_READ = 1 << 20
# a header from this size on is followed by _GAP zeros: a reader of the header has the
# kernel read ahead up to two windows (2 MiB as mounted), which should load no array
_GAP_FROM, _GAP = 64 << 10, 4 << 20

Maker = Callable[[int, int], bytes]  # bytes [a, b) of a block, relative to its start


class Region(NamedTuple):
    """An array's data in the file: its path from the root, offset and size."""

    path: str
    offset: int
    size: int


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _data_start(metadata_end: int) -> int:
    start = _align(metadata_end, _PAGE)
    return start + _GAP if metadata_end >= _GAP_FROM else start


def _region_alignment(nbytes: int) -> int:
    return _READ if nbytes >= _READ else _PAGE if nbytes >= _PAGE else 16


class TreeChanged(RuntimeError):
    """A block made again differs in size from its place: the tree (its attributes, read
    again for every block) changed after the layout was made; a new layout is needed."""


def _whole(make: Callable[[], bytes], size: int, a: int, b: int) -> bytes:
    made = make()
    if len(made) != size:
        raise TreeChanged(f"a block of {size} bytes is now {len(made)}")
    return made[a:b]


def _block(start: int, size: int, make: Callable[[], bytes]) -> tuple[int, int, Maker]:
    """A block made whole (and cut) on every read of it."""
    return start, start + size, partial(_whole, make, size)


class Hdf5Layout:
    """The HDF5 file of a tree (:func:`hdf5_layout`): ``header_size`` bytes made from
    metadata (``header_range``), then ``data_regions``; ``size`` bytes in all."""

    def __init__(self, root: Group, leaf_k: int = LEAF_K, internal_k: int = INTERNAL_K) -> None:
        self.leaf_k, self.internal_k = leaf_k, internal_k
        self._objects, self.omitted = walk(root)
        self._index = {o.path: i for i, o in enumerate(self._objects)}
        self._links: dict[int, Links] = {}
        self._area: dict[int, int] = {}  # where a group's links lie
        self._sizes, units, owners = self._measure()
        self._heap = global_heap.Collections(units)
        self._unit_owner = np.array(owners, np.int64)
        self._place()
        self._blocks()

    # -- measuring and placing -----------------------------------------------------------

    def _measure(self) -> tuple[list[int], list[tuple[int, int]], list[int]]:
        """Each object's header size, then every heap unit (a value's items: bytes, count)
        and the object owning it; groups' links are laid out."""
        sizes: list[int] = []
        units: list[tuple[int, int]] = []
        owners: list[int] = []
        self._first_unit = np.zeros(len(self._objects) + 1, np.int64)
        for i, planned in enumerate(self._objects):
            if isinstance(planned.node, Group):
                names = [name for name, _ in planned.members]
                self._links[i] = Links(names, self.leaf_k, self.internal_k)
            fixed = [len(data) for _, data in self._fixed(i, 0)]
            held, left_out = self._attributes(i, fixed)
            self.omitted += [Omission(planned.path, n, why) for n, why in left_out]
            sizes.append(messages.header_size(fixed + [attributes.message_size(*a) for a in held]))
            for _, value in held:
                if value.heap:
                    need = sum(global_heap.item_size(attributes.heap_size(h)) for h in value.heap)
                    units.append((need, len(value.heap)))
                    owners.append(i)
            self._first_unit[i + 1] = len(units)
        return sizes, units, owners

    def _place(self) -> None:
        """Objects (each group's links after its header), collections, then the data."""
        at = SUPERBLOCK_SIZE
        self._address = np.zeros(len(self._objects), np.int64)
        for i, size in enumerate(self._sizes):
            self._address[i], at = at, at + size
            if i in self._links:
                self._area[i], at = at, at + self._links[i].size
        self._collections = at + np.concatenate(([0], np.cumsum(self._heap.sizes, dtype=np.int64)))
        self.header_size = _data_start(int(self._collections[-1]))
        self._data: dict[int, int] = {}  # an array's data region
        self.data_regions: list[Region] = []
        at = self.header_size
        for i, planned in enumerate(self._objects):
            node = planned.node
            if isinstance(node, Array) and node.stored and node.nbytes:
                # a region of a page or more starts on a page: reading it touches no other
                at = _align(at, _region_alignment(node.nbytes))
                self._data[i] = at
                self.data_regions.append(Region(planned.path, at, node.nbytes))
                at += node.nbytes
        self.size = at

    def _blocks(self) -> None:
        """Every block of the header in order: its start, end and maker."""
        blocks = [_block(0, SUPERBLOCK_SIZE, self._superblock)]
        for i, size in enumerate(self._sizes):
            start = int(self._address[i])
            blocks.append(_block(start, size, partial(self._header, i)))
            if i in self._links:
                blocks += self._link_blocks(i)
        for c, size in enumerate(self._heap.sizes):
            start = int(self._collections[c])
            blocks.append(_block(start, size, partial(self._collection, c)))
        self._starts = np.array([b[0] for b in blocks], np.int64)
        self._ends = np.array([b[1] for b in blocks], np.int64)
        self._makers = [b[2] for b in blocks]

    def _link_blocks(self, i: int) -> list[tuple[int, int, Maker]]:
        links, base = self._links[i], self._area[i]
        blocks: list[tuple[int, int, Maker]] = [
            (base, base + links.heap_size, partial(links.heap, base))
        ]
        for level in reversed(range(len(links.levels))):  # the root's level first
            for j in range(links.levels[level]):
                at = base + links.node_at(level, j)
                blocks.append(_block(at, links.node_size, partial(links.node, base, level, j)))
        entries = partial(self._entry, i)
        for s in range(links.snods):
            at = base + links.snod_at(s)
            blocks.append(_block(at, links.snod_size, partial(links.snod, s, entries)))
        return blocks

    # -- making --------------------------------------------------------------------------

    def header_range(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the header (zeros past the metadata), making only the
        blocks they touch."""
        start, stop = max(start, 0), min(stop, self.header_size)
        if start >= stop:
            return b""
        k = max(int(np.searchsorted(self._starts, start, "right")) - 1, 0)
        parts, at = [], start
        while k < len(self._makers) and self._starts[k] < stop:
            lo = int(self._starts[k])
            a, b = max(lo, start), min(int(self._ends[k]), stop)
            if a < b:
                parts += [bytes(a - at), self._makers[k](a - lo, b - lo)]
                at = b
            k += 1
        parts.append(bytes(stop - at))
        return b"".join(parts)

    def _header(self, i: int) -> bytes:
        """The object header of object ``i``."""
        fixed = self._fixed(i, self._data.get(i))
        held, _ = self._attributes(i, [len(data) for _, data in fixed])
        unit = int(self._first_unit[i])
        made = []
        for name, value in held:
            ids: HeapIds = []
            if value.heap:
                ids, unit = self._heap_ids(unit, len(value.heap)), unit + 1
            made.append(
                (messages.ATTRIBUTE, attributes.message(name, value, ids, self._address_of))
            )
        return messages.object_header(fixed + made)

    def _fixed(self, i: int, data: int | None) -> list[messages.Message]:
        """Object ``i``'s messages besides its attributes (its data at ``data``)."""
        node = self._objects[i].node
        if isinstance(node, Array):
            return objects.dataset_messages(node, data)
        return [(messages.SYMBOL_TABLE, messages.symbol_table(*self._stab(i)))]

    def _attributes(self, i: int, fixed: list[int]) -> tuple[objects.Named, list[tuple[str, str]]]:
        planned: Planned = self._objects[i]
        given = planned.node.attributes
        return objects.named_attributes(given, planned.left_out, self._index.__contains__, fixed)

    def _stab(self, i: int) -> tuple[int, int]:
        """Group ``i``'s B-tree root and local heap (the start of its links)."""
        base = self._area.get(i, 0)
        return base + self._links[i].root, base

    def _address_of(self, path: str) -> int:
        return int(self._address[self._index[path]])

    def _entry(self, i: int, m: int) -> tuple[int, tuple[int, int] | None]:
        """Member ``m`` of group ``i``: its address, and a group's B-tree and heap."""
        j = self._objects[i].members[m][1]
        return int(self._address[j]), (self._stab(j) if j in self._links else None)

    def _heap_ids(self, unit: int, count: int) -> list[tuple[int, int]]:
        address = int(self._collections[self._heap.collection[unit]])
        first = int(self._heap.first[unit])
        return [(address, first + k) for k in range(count)]

    def _collection(self, c: int) -> bytes:
        """Global heap collection ``c``: the items of its units' values, remade."""
        first, last = int(self._heap.units[c]), int(self._heap.units[c + 1])
        items: list[bytes] = []
        for owner in sorted(set(self._unit_owner[first:last].tolist())):
            fixed = [len(data) for _, data in self._fixed(owner, 0)]
            held, _ = self._attributes(owner, fixed)
            values = [value for _, value in held if value.heap]
            own, end = int(self._first_unit[owner]), int(self._first_unit[owner + 1])
            if len(values) != end - own:
                raise TreeChanged(f"{self._objects[owner].path!r} has other text attributes")
            for u in range(max(first, own), min(last, end)):
                items += [attributes.heap_bytes(h, self._address_of) for h in values[u - own].heap]
        return global_heap.collection(self._heap.sizes[c], items)

    def _superblock(self) -> bytes:
        return superblock(
            self.leaf_k, self.internal_k, self.size, int(self._address[0]), self._stab(0)
        )


def hdf5_layout(root: Group, leaf_k: int = LEAF_K, internal_k: int = INTERNAL_K) -> Hdf5Layout:
    """The HDF5 file of ``root`` and everything below it; ``leaf_k`` and ``internal_k``
    bound the entries of a symbol table node (2 x leaf_k) and the children of a B-tree node
    (2 x internal_k), as its superblock declares."""
    return Hdf5Layout(root, leaf_k, internal_k)
