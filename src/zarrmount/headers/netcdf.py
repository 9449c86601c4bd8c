"""The netCDF classic formats (CDF-1, CDF-2 with 64-bit offsets, CDF-5 with 64-bit counts;
Unidata's "NetCDF file format specifications"): a header, then each variable's elements,
big-endian, C order, each padded to 4 bytes, at the offset (``begin``) the header gives.

The header of a group of 10,000 arrays is made in parts: its layout keeps each variable
entry's size and offset, and an entry's bytes are made when a read reaches them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# nc_type codes; CDF-5 adds the unsigned and 64-bit types
NC_BYTE, NC_CHAR, NC_SHORT, NC_INT, NC_FLOAT, NC_DOUBLE = 1, 2, 3, 4, 5, 6
NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64 = 7, 8, 9, 10, 11
CDF5_TYPES = frozenset((NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64))
# the big-endian NumPy type of each nc_type's values
NC_DTYPES: dict[int, np.dtype] = {
    code: np.dtype(text)
    for code, text in (
        (NC_BYTE, ">i1"),
        (NC_CHAR, "S1"),
        (NC_SHORT, ">i2"),
        (NC_INT, ">i4"),
        (NC_FLOAT, ">f4"),
        (NC_DOUBLE, ">f8"),
        (NC_UBYTE, ">u1"),
        (NC_USHORT, ">u2"),
        (NC_UINT, ">u4"),
        (NC_INT64, ">i8"),
        (NC_UINT64, ">u8"),
    )
}
_DIMENSION, _VARIABLE, _ATTRIBUTE = 10, 11, 12
# CDF-1/2 counts are signed 32-bit; a variable's vsize, unsigned 32-bit in CDF-2
_MAX_COUNT = (1 << 31) - 1
_MAX_VSIZE = (1 << 32) - 4
_MAX_CDF1 = (1 << 31) - 1  # every offset, hence the whole file, of a CDF-1 file
# headers from this size on are followed by _GAP zeros: a sequential reader of the header
# has the kernel read up to two windows ahead (read_ahead_kb 1024 as mounted: 2 MiB)
_GAP_FROM, _GAP = 64 << 10, 4 << 20


@dataclass(frozen=True)
class Attribute:
    name: str
    nc_type: int
    values: bytes  # big-endian, unpadded
    count: int


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    dimids: tuple[int, ...]
    nc_type: int
    nbytes: int  # of its elements
    source: Any  # what its attributes are made from, when needed (Classic's ``attributes``)


# (a variable's source, format version) -> its attributes
Attributes = Callable[[Any, int], list[Attribute]]


def _pad4(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


class _Encoder:
    """The header's pieces in one format version."""

    def __init__(self, version: int, attributes: Attributes) -> None:
        self.version = version
        self.attributes_of = attributes
        self.count = ">Q" if version == 5 else ">I"  # NON_NEG
        self.offset = ">i" if version == 1 else ">q"  # a variable's begin

    def non_neg(self, n: int) -> bytes:
        return struct.pack(self.count, n)

    def name(self, text: str) -> bytes:
        raw = text.encode("utf-8")
        return self.non_neg(len(raw)) + _pad4(raw)

    def attributes(self, attributes: Sequence[Attribute]) -> bytes:
        if not attributes:
            return bytes(4) + self.non_neg(0)  # ABSENT
        parts = [struct.pack(">i", _ATTRIBUTE), self.non_neg(len(attributes))]
        for a in attributes:
            parts += [self.name(a.name), struct.pack(">i", a.nc_type), self.non_neg(a.count)]
            parts.append(_pad4(a.values))
        return b"".join(parts)

    def dimensions(self, dims: Sequence[tuple[str, int]]) -> bytes:
        if not dims:
            return bytes(4) + self.non_neg(0)
        parts = [struct.pack(">i", _DIMENSION), self.non_neg(len(dims))]
        parts += [self.name(name) + self.non_neg(length) for name, length in dims]
        return b"".join(parts)

    def variable(self, var: Variable, begin: int) -> bytes:
        return b"".join(
            (
                self.name(var.name),
                self.non_neg(len(var.dimids)),
                b"".join(self.non_neg(d) for d in var.dimids),
                self.attributes(self.attributes_of(var.source, self.version)),
                struct.pack(">i", var.nc_type),
                self.non_neg(_vsize(var.nbytes)),
                struct.pack(self.offset, begin),
            )
        )


def _vsize(nbytes: int) -> int:
    return -(-nbytes // 4) * 4


class Classic:
    """A netCDF classic file's layout: its header (made in parts), each variable's data
    offset and the file's size, in one format version (:func:`classic`)."""

    def __init__(
        self,
        version: int,
        dims: Sequence[tuple[str, int]],
        attributes: Callable[[int], list[Attribute]],
        variables: Sequence[Variable],
        of_variable: Attributes,
    ) -> None:
        self.version = version
        self.variables = list(variables)
        enc = self.encoder = _Encoder(version, of_variable)
        self.start = b"".join(
            (
                b"CDF" + bytes([version]),
                enc.non_neg(0),  # numrecs: no record variables
                enc.dimensions(dims),
                enc.attributes(attributes(version)),
                struct.pack(">i", _VARIABLE if variables else 0),
                enc.non_neg(len(self.variables)),
            )
        )
        sizes = np.fromiter((len(enc.variable(v, 0)) for v in self.variables), np.int64)
        # offsets of the variables' entries in the header, and the end of the last
        self.entries = len(self.start) + np.concatenate(([0], np.cumsum(sizes)))
        self.header_size = int(self.entries[-1])
        self.data_start = _data_start(self.header_size)
        vsizes = np.fromiter((_vsize(v.nbytes) for v in self.variables), np.int64)
        self.begins = self.data_start + np.concatenate(([0], np.cumsum(vsizes)))
        self.size = int(self.begins[-1])

    def header(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` before the data: the header, of which only the entries
        they reach are made, then zeros."""
        stop = min(stop, self.data_start)
        if stop > self.header_size:
            return self.header(start, self.header_size) + bytes(stop - max(start, self.header_size))
        if start >= stop:
            return b""
        first = max(int(np.searchsorted(self.entries, start, "right")) - 1, 0)
        if start < len(self.start):
            parts, at = [self.start], 0
        else:
            parts, at = [], int(self.entries[first])
        for i in range(first, len(self.variables)):
            if self.entries[i] >= stop:
                break
            parts.append(self.encoder.variable(self.variables[i], int(self.begins[i])))
        return b"".join(parts)[start - at : stop - at]

    def find(self, offset: int) -> int:
        """The variable whose data (or padding) holds byte ``offset`` of the file."""
        return int(np.searchsorted(self.begins, offset, "right")) - 1


def _data_start(header_size: int) -> int:
    """Where the data begins: after a large header (many variables), a gap as long as the
    kernel may read ahead of a reader of the header, so that opening the file reads no
    variable; readers go by each variable's ``begin``, netCDF-C leaves such space too."""
    if header_size < _GAP_FROM:
        return header_size
    return -(-header_size // 4096) * 4096 + _GAP


def classic(
    dims: Sequence[tuple[str, int]],
    attributes: Callable[[int], list[Attribute]],
    variables: Sequence[Variable],
    of_variable: Attributes,
) -> Classic:
    """The layout in the least version that holds it: CDF-5 for its types, or counts and
    variables past the 32-bit fields; CDF-2 when offsets pass 2 GiB; else CDF-1.
    ``attributes``: the global ones, ``of_variable``: a variable's, for a version."""
    wide = any(v.nc_type in CDF5_TYPES or v.nbytes > _MAX_VSIZE for v in variables)
    if wide or any(length > _MAX_COUNT for _, length in dims):
        return Classic(5, dims, attributes, variables, of_variable)
    layout = Classic(1, dims, attributes, variables, of_variable)
    if layout.size > _MAX_CDF1:
        return Classic(2, dims, attributes, variables, of_variable)
    return layout
