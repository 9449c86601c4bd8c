"""Object header messages (and the version 1 object header holding them) of groups and
datasets: dataspace, fill value, contiguous layout, symbol table."""

from __future__ import annotations

from collections.abc import Sequence

from zarrmount.headers.hdf5.binary import UNDEFINED, align8, pad8, u16, u32, u64

DATASPACE, DATATYPE, FILL_VALUE, LAYOUT, ATTRIBUTE, SYMBOL_TABLE = 0x1, 0x3, 0x5, 0x8, 0xC, 0x11
_CONSTANT = 1  # message flag: the message never changes (the datatype's)
PREFIX_SIZE = 16  # a version 1 object header's prefix, padded to 8
MESSAGE_HEADER_SIZE = 8
MAX_MESSAGE = 0xFFF8  # a message's size is 16 bits, a multiple of 8
MAX_MESSAGES = 0xFFFF  # so is the number of an object header's messages
MAX_HEADER = 0xFFFF_FFFF  # and the size of its messages, 32 bits
_LATE, _IF_SET = 2, 2  # fill value message: allocation time, write time (as h5py's)
_CONTIGUOUS = 1

Message = tuple[int, bytes]  # (type, data)


def dataspace(shape: tuple[int, ...] | None) -> bytes:
    """A simple dataspace (version 1) of ``shape``, None (rank 0) for a scalar; its maximum
    sizes are its sizes."""
    dims = () if shape is None else shape
    return bytes([1, len(dims), 0, 0]) + bytes(4) + b"".join(u64(n) for n in dims)


def fill_value(fill: bytes | None) -> bytes:
    """The fill value (version 2): ``fill`` in the dataset's type, or the library's
    default (zeros) for None."""
    value = b"" if fill is None else fill
    return bytes([2, _LATE, _IF_SET, 1]) + u32(len(value)) + value


def contiguous(address: int | None, size: int) -> bytes:
    """A contiguous layout (version 3); None: no storage (an empty array)."""
    return bytes([3, _CONTIGUOUS]) + u64(UNDEFINED if address is None else address) + u64(size)


def symbol_table(btree: int, heap: int) -> bytes:
    """An old-style group's links: its B-tree of symbol table nodes and its local heap."""
    return u64(btree) + u64(heap)


def placed(size: int) -> int:
    """The room a message of ``size`` bytes of data takes in an object header."""
    return MESSAGE_HEADER_SIZE + align8(size)


def header_size(sizes: Sequence[int]) -> int:
    """The size of a version 1 object header of messages of data sizes ``sizes``."""
    return PREFIX_SIZE + sum(map(placed, sizes))


def object_header(messages: Sequence[Message]) -> bytes:
    """A version 1 object header (one link to it) holding ``messages`` in one block."""
    body = b"".join(
        u16(kind)
        + u16(align8(len(data)))
        + bytes([_CONSTANT if kind == DATATYPE else 0])
        + bytes(3)
        + pad8(data)
        for kind, data in messages
    )
    prefix = bytes([1, 0]) + u16(len(messages)) + u32(1) + u32(len(body)) + bytes(4)
    return prefix + body
