"""The superblock, version 0 (every reader's): the signature, 8-byte addresses and
lengths, the K values of group B-trees, the end of the file and the root group's symbol
table entry (caching its B-tree and local heap, as the library writes it)."""

from __future__ import annotations

from zarrmount.headers.hdf5.binary import UNDEFINED, u16, u32, u64
from zarrmount.headers.hdf5.symbols import entry

SIGNATURE = b"\x89HDF\r\n\x1a\n"
SIZE = 96


def superblock(leaf_k: int, internal_k: int, end: int, root: int, stab: tuple[int, int]) -> bytes:
    """The superblock of a file of ``end`` bytes whose root group's object header lies at
    ``root``, its (B-tree, local heap) at ``stab``."""
    versions = bytes([0, 0, 0, 0, 0, 8, 8, 0])  # superblock, free space, root entry, -, shared
    ks = u16(leaf_k) + u16(internal_k) + u32(0)  # no consistency flags: closed cleanly
    places = u64(0) + u64(UNDEFINED) + u64(end) + u64(UNDEFINED)  # base, free space, end, driver
    return SIGNATURE + versions + ks + places + entry(0, root, stab)
