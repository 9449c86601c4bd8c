"""Detached NRRD headers (``x.nhdr`` naming ``x``): ITK, SimpleITK, 3D Slicer and pynrrd
read any dimension count this way.

NRRD lists sizes fastest axis first, so a C-order shape is written reversed.

Where the array has a physical space (``format/physical.py``), every axis but the channel
ones is an axis of the world space (time too, as NRRD's named spaces with time have it):
ITK takes an image's dimensions from the domain axes and refuses a header whose ``space
dimension`` is not their number, so a time axis outside the space would make ITK refuse
the file. Channel axes are ``list`` (range) axes: ITK reads the first as the pixels'
components.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from zarrmount.format.physical import Space
from zarrmount.headers.base import NotApplicable, plain_type

# NRRD type names by (NumPy kind, item size); Teem's reference reader and pynrrd accept
# all of them.
_TYPES: dict[tuple[str, int], str] = {
    ("i", 1): "signed char",
    ("u", 1): "uchar",
    ("i", 2): "short",
    ("u", 2): "ushort",
    ("i", 4): "int",
    ("u", 4): "uint",
    ("i", 8): "longlong",
    ("u", 8): "ulonglong",
    ("f", 4): "float",
    ("f", 8): "double",
}

# NRRD kinds by OME-Zarr axis type; others (space, custom, none) are "domain", as ITK
# and Slicer write a spatial axis.
_KINDS = {"time": "time", "channel": "list"}

# Teem (hence ITK) reads at most this many axes.
_MAX_DIM = 16

# Teem reads a data file name with a '%' then digits then 'd' as a numbered template.
_TEMPLATE = re.compile(r"%[0-9]*d")


def nrrd_type(dtype: np.dtype) -> str:
    """The NRRD ``type`` of ``dtype``."""
    return plain_type(_TYPES, dtype, "NRRD")


def check_data_file(name: str) -> None:
    """Refuse a data file name readers would take for something else: NRRD has no escapes,
    readers strip spaces around a value, pynrrd drops non-ASCII bytes and Teem gives
    ``LIST`` and ``%d`` special meanings."""
    why = None
    if "\n" in name or "\r" in name:
        why = "contains a line break"
    elif name in ("", ".", "..") or "/" in name:
        why = "is not a file name in the header's directory"
    elif name != name.strip():
        why = "begins or ends with white space"
    elif not name.isascii() or not name.isprintable():
        why = "has characters other than printable ASCII"
    elif name.startswith("LIST"):
        why = "begins with LIST, which means a list of files"
    elif _TEMPLATE.search(name):
        why = "contains %d, which means numbered files"
    if why:
        raise NotApplicable(f"NRRD cannot name the data file {name!r}: it {why}")


def _check_shape(shape: tuple[int, ...]) -> None:
    if not shape:
        raise NotApplicable("NRRD has no 0-d (scalar) arrays")
    if len(shape) > _MAX_DIM:
        raise NotApplicable(f"NRRD readers take at most {_MAX_DIM} dimensions")
    if min(shape) < 1:
        raise NotApplicable(f"NRRD has no empty axes (shape {tuple(shape)})")


def _vector(values: Iterable[float]) -> str:
    return "(" + ",".join(repr(float(v)) for v in values) + ")"


def space_lines(space: Space) -> list[str]:
    """The space fields of ``space``: a world axis for each non-channel axis (fastest
    first), its scale along it, the translation as the first sample's centre, the
    units where every world axis has one, and every axis's kind."""
    order = range(len(space.axes) - 1, -1, -1)  # NRRD's: fastest first
    world = [d for d in order if space.axes[d].type != "channel"]
    if not world:
        return []
    directions = []
    for dim in order:
        along = [space.scale[dim] if d == dim else 0.0 for d in world]
        directions.append(_vector(along) if dim in world else "none")
    units = [space.axes[d].unit for d in world]
    lines = [
        f"space dimension: {len(world)}",
        "space directions: " + " ".join(directions),
        "kinds: " + " ".join(_KINDS.get(space.axes[d].type or "", "domain") for d in order),
        "space origin: " + _vector(space.translation[d] for d in world),
    ]
    if None not in units:
        lines.append("space units: " + " ".join(f'"{u}"' for u in units))
    return lines


def nrrd_header(
    shape: tuple[int, ...], dtype: np.dtype, data_file: str, space: Space | None = None
) -> bytes:
    """The detached NRRD header of the raw C-order file ``data_file`` (a name in the same
    directory) holding an array of ``shape`` and ``dtype``, with its physical ``space``
    where it has one."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    _check_shape(shape)
    kind = nrrd_type(dtype)
    check_data_file(data_file)
    lines = [
        "NRRD0004",
        f"type: {kind}",
        f"dimension: {len(shape)}",
        "sizes: " + " ".join(map(str, reversed(shape))),
    ]
    if space is not None and len(space.axes) == len(shape):
        lines += space_lines(space)
    if dtype.itemsize > 1:
        lines.append("endian: " + ("big" if dtype.str[0] == ">" else "little"))
    # Last, where Teem's writer puts it (its LIST form must end the header).
    lines += ["encoding: raw", f"data file: {data_file}"]
    return ("\n".join(lines) + "\n").encode("ascii")
