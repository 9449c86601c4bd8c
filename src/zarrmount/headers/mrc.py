"""MRC2014 headers (the CCP-EM standard that IMOD, RELION, cryoSPARC, ChimeraX and mrcfile
read): 1024 bytes, no extended header, then the voxels little-endian with the columns
fastest, so a C-order array's (z, y, x) is MRC's (sections, rows, columns) as it lies.

Nothing in the header needs a voxel: DMIN, DMAX, DMEAN and RMS say "not computed" the way
the standard allows (DMAX < DMIN, DMEAN below both, RMS negative), and the cell and origin
come from the array's physical space in Ångström (a voxel of 1 Å at 0 where unknown).
"""

from __future__ import annotations

import struct

import numpy as np

from zarrmount.format.physical import Space, length_in
from zarrmount.headers.base import NotApplicable, plain_type

HEADER = 1024
_VERSION = 20141
# IMOD reads mode 0 as unsigned unless its stamp and flag 1 say the bytes are signed;
# flag 8: a negative RMS means not computed
_IMOD_STAMP, _IMOD_FLAGS = 1146047817, 1 | 8
_LITTLE_ENDIAN = bytes((0x44, 0x44, 0, 0))
_MAX_SIDE = 2**31 - 1  # NX, NY and NZ are int32

# (NumPy kind, item size) -> MRC mode; bool is 0 and 1, the same signed or not
_MODES: dict[tuple[str, int], int] = {
    ("i", 1): 0,
    ("b", 1): 0,
    ("i", 2): 1,
    ("f", 4): 2,
    ("c", 8): 4,
    ("u", 2): 6,
    ("f", 2): 12,
}


def _mode(dtype: np.dtype) -> int:
    """The MRC mode of ``dtype``'s elements."""
    if dtype.kind == "u" and dtype.itemsize == 1:
        raise NotApplicable(
            "MRC2014 has no uint8: mode 0 is int8, so mrcfile, RELION and ChimeraX would "
            "read 128-255 as negative (mrcfile itself widens uint8 to mode 6, uint16)"
        )
    try:
        return plain_type(_MODES, dtype, "MRC2014")
    except NotApplicable as e:
        modes = "int8, int16, uint16, float16, float32 and complex64"
        raise NotApplicable(f"{e} (its modes hold {modes})") from None


def _sides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions MRC shows, (z,) y, x: an image or a volume, any leading dimensions
    of length 1 (an OME-Zarr image's single time point and channel) dropped."""
    sides = tuple(shape)
    while len(sides) > 3 and sides[0] == 1:
        sides = sides[1:]
    if not 2 <= len(sides) <= 3:
        raise NotApplicable(
            f"MRC2014 holds images (2-D) and volumes (3-D), not {len(shape)}-D arrays "
            "(leading dimensions of length 1 aside)"
        )
    if not all(0 < n <= _MAX_SIDE for n in sides):
        raise NotApplicable(f"MRC2014's dimensions hold 1 to {_MAX_SIDE} elements")
    return sides


def _voxel_and_origin(space: Space | None, ndim: int) -> tuple[list[float], list[float]]:
    """Voxel size and origin in Å of the last ``ndim`` axes, x first; 1 and 0 on an axis
    whose unit is not a length (or where the space is unknown)."""
    voxel, origin = [1.0] * ndim, [0.0] * ndim
    if space is None or len(space.axes) < ndim:
        return voxel, origin
    for i in range(ndim):
        at = len(space.axes) - 1 - i
        factor = length_in(1.0, space.axes[at].unit, "angstrom")
        if factor is not None:
            voxel[i], origin[i] = space.scale[at] * factor, space.translation[at] * factor
    return voxel, origin


def mrc_header(shape: tuple[int, ...], dtype: np.dtype, space: Space | None = None) -> bytes:
    """The header of an array of ``shape`` and ``dtype`` lying in ``space``: 2-D arrays
    an image (ISPG 0, one section), 3-D a volume (ISPG 1)."""
    mode = _mode(np.dtype(dtype))
    sides = _sides(shape)
    n = [*reversed(sides), 1][:3]  # NX, NY, NZ
    voxel, origin = _voxel_and_origin(space, len(sides))
    voxel, origin = [*voxel, 1.0][:3], [*origin, 0.0][:3]
    cell = [v * side for v, side in zip(voxel, n, strict=True)]
    ispg = 1 if len(sides) == 3 else 0
    head = bytearray(HEADER)
    # NX..MODE, NXSTART.., MX.., CELLA, CELLB, MAPC.., DMIN DMAX DMEAN (not computed),
    # ISPG, NSYMBT
    struct.pack_into(
        "<4i3i3i3f3f3i3f2i", head, 0,
        *n, mode, 0, 0, 0, *n, *cell, 90.0, 90.0, 90.0, 1, 2, 3, 0.0, -1.0, -2.0, ispg, 0,
    )  # fmt: skip
    struct.pack_into("<i", head, 108, _VERSION)  # NVERSION
    struct.pack_into("<2i", head, 152, _IMOD_STAMP, _IMOD_FLAGS)
    # ORIGIN, MAP, MACHST, RMS (not computed), NLABL
    struct.pack_into("<3f4s4sfi", head, 196, *origin, b"MAP ", _LITTLE_ENDIAN, -1.0, 0)
    return bytes(head)
