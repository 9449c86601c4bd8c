"""HDF5 files of Zarr trees made from metadata: a group and everything below it as one
file whose datasets are contiguous, each dataset's data region exactly its array file's
bytes (its own byte order: the datatype carries it, nothing is swapped).

**Use**: ``layout = hdf5_layout(Group(...))``; the file is ``layout.size`` bytes:
``layout.header_range(start, stop)`` gives any bytes of ``[0, layout.header_size)``,
``layout.data_regions`` (path, offset, size) place each array file's bytes, in file
order; every other byte is zero. The tree must not change once laid out (attributes
are read again whenever bytes are made): a block whose size changed raises
:class:`TreeChanged`, never a corrupt file.

**Structures** (the HDF5 File Format Specification's oldest, which HDF5 1.8 and
netCDF-Java read; checked with h5py, h5dump 1.10 and netCDF-C): superblock version 0,
8-byte addresses and lengths; version 1 object headers, each one block (no
continuation: a block holds 4 GiB of messages of at most 64 KiB each); old-style groups
(a symbol table message, a local heap of the names, symbol table nodes of 2 x leaf K
entries under a version 1 B-tree of 2 x internal K children a node, as many levels as
the members need; HDF5's K values 4 and 16 unless given, declared in the superblock);
datasets with a dataspace (version 1), a datatype (version 1: fixed-point, IEEE
floating-point, bool as h5py's int8 enum FALSE/TRUE, complex as h5py's compound of
``r`` and ``i``, ``S`` as null-padded strings), a fill value (version 2: the Zarr fill
value; the library's zeros where there is none, and for ``S`` and float16, whose fill
value netCDF-C frees as a string's pointer) and a contiguous layout (version 3; the
undefined address for an empty array or one with no storage); attributes (version 1:
numbers, lists of them, variable-length UTF-8 text, else JSON text, see
:mod:`.attributes`), their text in global heap collections after the objects.

**Left out, with the reason** (in :attr:`Hdf5Layout.omitted` and the owning object's
``zarrmount_omitted`` attribute): members whose names HDF5 refuses or that collide
(empty, ``.``, with ``/`` or NUL, text UTF-8 cannot carry, two members of one name),
arrays of types it has not (``U`` UTF-32 text, records, datetimes, objects) or of more
than 32 dimensions, groups nested more than 100 deep, attributes with such names, the
dimension scale API's values no message holds (a ``REFERENCE_LIST`` of 4,000 users:
never JSON text), and those past 65,535 messages or 4 GiB of one object header; the
text of a ``zarrmount_omitted`` attribute the caller gives comes first.

**Made in parts** (:mod:`.layout`): the layout keeps sizes and places only; any range
of the header makes the object headers, links and collections it touches.

**References and dimension scales**: an attribute value may be a :class:`Reference` (or
a list of them): an object reference (class 7, the referenced object header's 8-byte
address, resolved from the layout's addresses when the header is made); the dimension
scale API's values are typed too (:mod:`.tree`): :class:`FixedText` (a null-terminated
ASCII string of a fixed size: ``CLASS``, ``NAME``, ``_NCProperties``),
:class:`DimensionList` (``DIMENSION_LIST``: a variable-length sequence of references a
dimension, its items in the global heap as the paths they are made from) and
:class:`ReferenceList` (``REFERENCE_LIST``: records of a reference and a uint32); an
array may have no storage (``stored=False``: netCDF-C's dimension-only datasets). Every
address is known before any byte is made, and no item's size depends on one.
:func:`.netcdf4.netcdf4` lays a tree out as netCDF-4: named dimensions as scales
(coordinates, or datasets with no storage), ``_Netcdf4Dimid``, ``_NCProperties``.
"""

from zarrmount.headers.hdf5.layout import Hdf5Layout, Region, TreeChanged, hdf5_layout
from zarrmount.headers.hdf5.objects import OMITTED
from zarrmount.headers.hdf5.tree import (
    Array,
    DimensionList,
    FixedText,
    Group,
    Reference,
    ReferenceList,
)
from zarrmount.headers.hdf5.walk import Omission

__all__ = [
    "OMITTED",
    "Array",
    "DimensionList",
    "FixedText",
    "Group",
    "Hdf5Layout",
    "Omission",
    "Reference",
    "ReferenceList",
    "Region",
    "TreeChanged",
    "hdf5_layout",
]
