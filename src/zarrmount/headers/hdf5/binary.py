"""The few field encodings every HDF5 structure here is made of: little-endian integers,
8-byte addresses and lengths (the superblock declares both sizes as 8), zero padding to
the 8-byte alignment that version 1 object headers, heaps and names keep."""

from __future__ import annotations

import struct

#: The undefined address: all bits set (no storage, no sibling, no free-space info).
UNDEFINED = (1 << 64) - 1


def align8(n: int) -> int:
    return -(-n // 8) * 8


def pad8(data: bytes) -> bytes:
    return data + bytes(-len(data) % 8)


def u16(n: int) -> bytes:
    return struct.pack("<H", n)


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def u64(n: int) -> bytes:
    """An address or a length (both 8 bytes)."""
    return struct.pack("<Q", n)


def name_bytes(name: bytes) -> bytes:
    """A name as HDF5 stores it in messages: null-terminated, padded to 8 bytes."""
    return pad8(name + b"\0")
