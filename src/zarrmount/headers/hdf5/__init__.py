"""HDF5 files of Zarr trees made from metadata: every group and array below a group as
one file whose datasets are contiguous, each dataset's data region exactly its array
file's bytes (its own byte order: the datatype carries it, nothing is swapped).

**Structures** (the HDF5 File Format Specification, versions every reader knows, HDF5
1.8 and netCDF-Java included): superblock version 0 with 8-byte addresses and lengths;
version 1 object headers, one block each (no continuation: a block holds 4 GiB of
messages, each message at most 64 KiB); old-style groups (a symbol table message, a
local heap of names, symbol table nodes of 2 x leaf K entries under a version 1 B-tree
of 2 x internal K children a node, as many levels as the members need: HDF5's 4 and 16
by default, declared in the superblock); datasets with a dataspace (version 1), a
datatype (version 1: fixed-point, IEEE floating-point, bool as an int8 enum FALSE/TRUE,
complex as a compound ``r``/``i``, ``S`` as null-padded strings), a fill value (version
2: the Zarr fill value, the library's zeros when there is none) and a contiguous layout
(version 3; the undefined address for an empty array); attributes (version 1: numbers,
lists of numbers, variable-length UTF-8 text, else JSON text, see
:mod:`.attributes`), the text in global heap collections after the objects.

**Left out, with the reason** (in :attr:`Hdf5Layout.omitted` and the owning object's
``zarrmount_omitted`` attribute): members whose names HDF5 refuses or that collide
(empty, ``.``, with ``/`` or NUL, text UTF-8 cannot carry, two members of one name),
arrays of types it has not (``U`` UTF-32 text, records, datetimes, objects) or of more
than 32 dimensions, groups nested more than 100 deep, attributes with such names,
attributes past 65,535 messages or 4 GiB of one object header.

**Made in parts** (:mod:`.layout`): the layout keeps sizes and places only; any range
of the header makes the object headers, links and collections it touches.

**References and dimension scales** (netCDF-4): an attribute value may be a
:class:`Reference` (or a list of them): an object reference (class 7, the referenced
object header's 8-byte address, resolved when its header is made, from the layout's
addresses). ``DIMENSION_LIST``, a variable-length sequence of references a dimension,
is a :class:`~.attributes.Value` whose heap items hold references: give ``heap`` items
paths to resolve like ``references`` (in ``Value.data`` and the collection maker), its
datatype a sequence (class 9, type 0) of ``object_reference()``; ``REFERENCE_LIST``, a
compound of a reference and an int32 (``datatypes.compound``), a value whose fixed bytes
interleave addresses: both fit the layout as it is, since every address is known before
any byte is made and an item's size does not depend on it.
"""

from zarrmount.headers.hdf5.layout import Hdf5Layout, Region, hdf5_layout
from zarrmount.headers.hdf5.objects import OMITTED
from zarrmount.headers.hdf5.tree import Array, Group, Reference
from zarrmount.headers.hdf5.walk import Omission

__all__ = [
    "OMITTED",
    "Array",
    "Group",
    "Hdf5Layout",
    "Omission",
    "Reference",
    "Region",
    "hdf5_layout",
]
