"""The global heap: collections (``GCOL``) holding the variable-length items of attribute
values (text), each found by a heap ID (collection address, object index).

Items are packed in file order into collections of at least 4 KiB (the least the
library reads) and, unless one value's items are more, at most ``TARGET`` bytes: the
library reads a whole collection to read one item, so a read of one object's text reads
a few KiB, not every object's. One value's items stay in one collection; the rest of a
collection is free space (object 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zarrmount.headers.hdf5.binary import align8, pad8, u16, u32, u64

HEADER = 16  # a collection's signature, version, size
ITEM_HEADER = 16  # an object's index, reference count, size
MIN_SIZE = 4096
TARGET = 16 << 10
_MAX_ITEMS = 0xFFFF  # object indices are 16 bits


def item_size(size: int) -> int:
    """The room an object of ``size`` bytes takes in a collection."""
    return ITEM_HEADER + align8(size)


class Collections:
    """Collections of ``units`` (each a value's items: their bytes needed and count), in
    order: ``collection[u]`` holds unit ``u`` from object index ``first[u]``."""

    def __init__(self, units: Sequence[tuple[int, int]]) -> None:
        self.collection = np.zeros(len(units), np.int64)
        self.first = np.ones(len(units), np.int64)
        starts: list[int] = []
        self.sizes: list[int] = []
        used = items = 0
        for u, (need, count) in enumerate(units):
            if not starts or used + need > TARGET or items + count > _MAX_ITEMS:
                if starts:
                    self.sizes.append(max(MIN_SIZE, HEADER + used))
                starts.append(u)
                used = items = 0
            self.collection[u], self.first[u] = len(starts) - 1, items + 1
            used, items = used + need, items + count
        if starts:
            self.sizes.append(max(MIN_SIZE, HEADER + used))
        self.units = np.array([*starts, len(units)], np.int64)  # each collection's first unit


def collection(size: int, items: Sequence[bytes]) -> bytes:
    """A collection of ``size`` bytes holding ``items`` as objects 1, 2, ..., then free
    space (its object 0 header where it fits)."""
    body = b"".join(
        u16(k) + u16(1) + u32(0) + u64(len(item)) + pad8(item) for k, item in enumerate(items, 1)
    )
    free = size - HEADER - len(body)
    if free < 0:
        return body  # more than its place: the caller finds the size differs
    tail = u16(0) + u16(0) + u32(0) + u64(free) if free >= ITEM_HEADER else b""
    return b"GCOL" + bytes([1, 0, 0, 0]) + u64(size) + body + tail + bytes(free - len(tail))
