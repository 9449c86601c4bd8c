"""Datatype messages (version 1, the oldest, every reader's): the class and version, 24
class bits, the element size, then the class's properties.

NumPy dtypes map as h5py writes them, the byte order carried by the type: integers as
fixed-point, float16/32/64 as IEEE floating-point, bool as an 8-bit enum (FALSE 0, TRUE
1) over int8, complex as a compound of two floats ``r`` and ``i``, fixed-length bytes
(``S``) as null-padded ASCII strings. NumPy's ``U`` (UTF-32) has no HDF5 type.
"""

from __future__ import annotations

import sys
from functools import cache

import numpy as np

from zarrmount.headers.base import NotApplicable, type_name
from zarrmount.headers.hdf5.binary import name_bytes, u16, u32

_FIXED, _FLOAT, _STRING, _COMPOUND, _REFERENCE, _ENUM, _VLEN = 0, 1, 3, 6, 7, 8, 9
# IEEE formats by size: exponent location and size, mantissa size, exponent bias
_IEEE = {2: (10, 5, 10, 15), 4: (23, 8, 23, 127), 8: (52, 11, 52, 1023)}
_UTF8 = 1
VLEN_SIZE = 16  # a variable-length element: its length (4), global heap collection, index (4)
REFERENCE_SIZE = 8  # an object reference: the object header's address


def _header(cls: int, bits: int, size: int) -> bytes:
    return bytes([0x10 | cls]) + bits.to_bytes(3, "little") + u32(size)


def fixed_point(size: int, signed: bool, big: bool) -> bytes:
    """An integer of ``size`` bytes, every bit significant."""
    return _header(_FIXED, big | signed << 3, size) + u16(0) + u16(8 * size)


def floating_point(size: int, big: bool) -> bytes:
    """An IEEE binary16/32/64 number (implied leading mantissa bit)."""
    exp_at, exp_bits, mant_bits, bias = _IEEE[size]
    bits = big | 2 << 4 | (8 * size - 1) << 8  # normalization "implied", sign bit position
    props = u16(0) + u16(8 * size) + bytes([exp_at, exp_bits, 0, mant_bits]) + u32(bias)
    return _header(_FLOAT, bits, size) + props


def fixed_string(size: int, terminated: bool = False) -> bytes:
    """An ASCII string of ``size`` bytes padded with NULs (NumPy's ``S``), or
    ``terminated`` by one (C strings, as the dimension scale API writes them)."""
    return _header(_STRING, 0 if terminated else 1, size)


@cache
def vlen_string() -> bytes:
    """A UTF-8 string of any length, kept in the global heap (bytes of a uchar parent)."""
    return _header(_VLEN, 1 | _UTF8 << 8, VLEN_SIZE) + fixed_point(1, False, False)


def vlen_sequence(base: bytes) -> bytes:
    """A sequence of any length of elements of type ``base``, kept in the global heap."""
    return _header(_VLEN, 0, VLEN_SIZE) + base


@cache
def object_reference() -> bytes:
    """A reference to an object of the file: the address of its object header."""
    return _header(_REFERENCE, 0, REFERENCE_SIZE)


def compound(size: int, members: list[tuple[str, int, bytes]]) -> bytes:
    """A record of ``members`` (name, byte offset, datatype), each a scalar member in
    version 1's layout (its unused array dimensions zero)."""
    props = b"".join(
        name_bytes(name.encode()) + u32(offset) + bytes(28) + member
        for name, offset, member in members
    )
    return _header(_COMPOUND, len(members), size) + props


def enum(base: bytes, size: int, members: list[tuple[str, int]]) -> bytes:
    """Named values of the integer type ``base`` (``size`` bytes)."""
    names = b"".join(name_bytes(name.encode()) for name, _ in members)
    values = b"".join(value.to_bytes(size, "little", signed=True) for _, value in members)
    return _header(_ENUM, len(members), size) + base + names + values


def _big(dtype: np.dtype) -> bool:
    order = dtype.byteorder
    return order == ">" or (order == "=" and sys.byteorder == "big")


@cache
def of_dtype(dtype: np.dtype) -> bytes:
    """The datatype of ``dtype``'s elements; NotApplicable where HDF5 (or this writer)
    has none."""
    kind, size, big = dtype.kind, dtype.itemsize, _big(dtype)
    plain = dtype.names is None and dtype.subdtype is None
    if plain and kind in "iu" and size in (1, 2, 4, 8):
        return fixed_point(size, kind == "i", big)
    if plain and kind == "f" and size in _IEEE:
        return floating_point(size, big)
    if plain and kind == "c" and size // 2 in _IEEE:
        half = floating_point(size // 2, big)
        return compound(size, [("r", 0, half), ("i", size // 2, half)])
    if plain and kind == "b":
        return enum(fixed_point(1, True, False), 1, [("FALSE", 0), ("TRUE", 1)])
    if plain and kind == "S" and size:
        return fixed_string(size)
    if kind == "U":
        raise NotApplicable("HDF5 has no UTF-32 strings (NumPy's U)")
    raise NotApplicable(f"the HDF5 file holds no {type_name(dtype)}")
