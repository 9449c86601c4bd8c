"""NIfTI single-file headers (``.nii``): FSL, SPM, AFNI, FreeSurfer, ANTs and nibabel read
an array as this header, the 4-byte extension flag (none), then its elements
little-endian with NIfTI's first index fastest: the array's C-order bytes with its axes
reversed (C axes ``..., z, y, x`` are NIfTI's ``i = x, j = y, k = z``, then the others).
NIfTI-1 (348 bytes, data at 352) holds axes of up to 32,767; NIfTI-2 (540 bytes, data at
544) the longer ones.

Where the voxels lie comes from the array's physical space (OME-Zarr's scales and
translations, ``index * scale + translation``): ``pixdim`` holds each axis's scale in the
NIfTI unit (metre, millimetre, micron; second, millisecond, microsecond) nearest below
the axis's own, micron and microsecond for smaller ones (nanometres and Ångström become
microns), the units those of the first axis of each kind. The sform and qform (code 2,
"aligned") are diagonal: OME-Zarr's x, y and z (NIfTI's i, j, k) taken as NIfTI's right,
anterior and superior, ``x = pixdim[1] * i + translation_x``, no rotation nor flip. Without
a space every pixdim is 1, the codes 0 (unknown) and the sform the identity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from zarrmount.format.physical import Space, length_in, time_in
from zarrmount.headers.base import NotApplicable, plain_type

NIFTI1_MAX = 32_767  # an axis's length in NIfTI-1 (int16 dim)
_MAX_AXES = 7
_ALIGNED = 2  # NIFTI_XFORM_ALIGNED_ANAT: coordinates of the store's own space
_EXTENSION_FLAG = bytes(4)  # no extensions follow the header

# (NumPy kind, item size) -> NIfTI datatype code; bool as uint8 (its bytes are 0 and 1)
_TYPES: dict[tuple[str, int], int] = {
    ("b", 1): 2,
    ("u", 1): 2,
    ("i", 2): 4,
    ("i", 4): 8,
    ("f", 4): 16,
    ("c", 8): 32,
    ("f", 8): 64,
    ("i", 1): 256,
    ("u", 2): 512,
    ("u", 4): 768,
    ("i", 8): 1024,
    ("u", 8): 1280,
    ("c", 16): 1792,
}

# The fields both versions share have the same names; NIfTI-2 widens them to 64 bits.
_NIFTI1 = np.dtype(
    [
        ("sizeof_hdr", "<i4"),
        ("data_type", "S10"),
        ("db_name", "S18"),
        ("extents", "<i4"),
        ("session_error", "<i2"),
        ("regular", "S1"),
        ("dim_info", "u1"),
        ("dim", "<i2", (8,)),
        ("intent_p", "<f4", (3,)),
        ("intent_code", "<i2"),
        ("datatype", "<i2"),
        ("bitpix", "<i2"),
        ("slice_start", "<i2"),
        ("pixdim", "<f4", (8,)),
        ("vox_offset", "<f4"),
        ("scl_slope", "<f4"),
        ("scl_inter", "<f4"),
        ("slice_end", "<i2"),
        ("slice_code", "u1"),
        ("xyzt_units", "u1"),
        ("cal_max", "<f4"),
        ("cal_min", "<f4"),
        ("slice_duration", "<f4"),
        ("toffset", "<f4"),
        ("glmax", "<i4"),
        ("glmin", "<i4"),
        ("descrip", "S80"),
        ("aux_file", "S24"),
        ("qform_code", "<i2"),
        ("sform_code", "<i2"),
        ("quatern", "<f4", (3,)),
        ("qoffset", "<f4", (3,)),
        ("srow", "<f4", (3, 4)),
        ("intent_name", "S16"),
        ("magic", "S4"),
    ]
)
_NIFTI2 = np.dtype(
    [
        ("sizeof_hdr", "<i4"),
        ("magic", "S8"),
        ("datatype", "<i2"),
        ("bitpix", "<i2"),
        ("dim", "<i8", (8,)),
        ("intent_p", "<f8", (3,)),
        ("pixdim", "<f8", (8,)),
        ("vox_offset", "<i8"),
        ("scl_slope", "<f8"),
        ("scl_inter", "<f8"),
        ("cal_max", "<f8"),
        ("cal_min", "<f8"),
        ("slice_duration", "<f8"),
        ("toffset", "<f8"),
        ("slice_start", "<i8"),
        ("slice_end", "<i8"),
        ("descrip", "S80"),
        ("aux_file", "S24"),
        ("qform_code", "<i4"),
        ("sform_code", "<i4"),
        ("quatern", "<f8", (3,)),
        ("qoffset", "<f8", (3,)),
        ("srow", "<f8", (3, 4)),
        ("slice_code", "<i4"),
        ("xyzt_units", "<i4"),
        ("intent_code", "<i4"),
        ("intent_name", "S16"),
        ("dim_info", "u1"),
        ("unused_str", "S15"),
    ]
)
_MAGIC = {_NIFTI1: b"n+1\0", _NIFTI2: b"n+2\0\r\n\x1a\n"}

# NIfTI's units of each kind, largest first: (xyzt_units code, UDUNITS-2 name)
_KINDS = (
    (length_in, ((1, "meter"), (2, "millimeter"), (3, "micrometer"))),
    (time_in, ((8, "second"), (16, "millisecond"), (24, "microsecond"))),
)
_Convert = Callable[[float, str | None, str], float | None]


def nifti_type(dtype: np.dtype) -> int:
    """NIfTI's datatype code of ``dtype``."""
    return plain_type(_TYPES, dtype, "NIfTI")


def _nifti_unit(
    convert: _Convert, codes: tuple[tuple[int, str], ...], units: list[str | None]
) -> tuple[int, str] | None:
    """NIfTI's unit for the first of ``units`` of this kind: the largest not larger than
    it, the smallest for smaller ones; None where no unit is of this kind."""
    for unit in units:
        if convert(1.0, unit, codes[0][1]) is not None:
            return next((c for c in codes if convert(1.0, unit, c[1]) >= 1), codes[-1])
    return None


def _placed(space: Space) -> tuple[int, list[float], list[float]]:
    """``xyzt_units`` and each axis's scale and translation (NIfTI's order) in NIfTI's
    units; axes of other units (or none) keep their numbers."""
    units = [a.unit for a in reversed(space.axes)]
    scale, shift = list(reversed(space.scale)), list(reversed(space.translation))
    code = 0
    for convert, codes in _KINDS:
        found = _nifti_unit(convert, codes, units)
        if found is None:
            continue
        code |= found[0]
        for i, unit in enumerate(units):
            if convert(1.0, unit, found[1]) is not None:
                scale[i] = convert(scale[i], unit, found[1])
                shift[i] = convert(shift[i], unit, found[1])
    return code, scale, shift


def _layout(shape: tuple[int, ...]) -> np.dtype:
    """NIfTI-1, or NIfTI-2 where an axis is too long for it."""
    if not 2 <= len(shape) <= _MAX_AXES:
        raise NotApplicable(f"NIfTI views are of 2-D to {_MAX_AXES}-D arrays")
    if 0 in shape:
        raise NotApplicable("NIfTI has no empty axes")
    return _NIFTI2 if max(shape) > NIFTI1_MAX else _NIFTI1


def nifti_header(shape: tuple[int, ...], dtype: np.dtype, space: Space | None) -> bytes:
    """The header and extension flag of the C-order array of ``shape`` and ``dtype`` lying
    in ``space`` (None: not known): the array's bytes follow, little-endian."""
    dtype = np.dtype(dtype)
    layout, code = _layout(shape), nifti_type(dtype)
    n = len(shape)
    units, scale, shift = _placed(space) if space else (0, [1.0] * n, [0.0] * n)
    head = np.zeros((), layout)
    head["sizeof_hdr"], head["magic"] = layout.itemsize, _MAGIC[layout]
    head["datatype"], head["bitpix"] = code, 8 * dtype.itemsize
    head["dim"] = (n, *reversed(shape), *[1] * (_MAX_AXES - n))
    head["pixdim"] = (1.0, *scale, *[1.0] * (_MAX_AXES - n))
    head["vox_offset"] = layout.itemsize + len(_EXTENSION_FLAG)
    head["xyzt_units"] = units
    steps, origin = (scale + [1.0])[:3], (shift + [0.0])[:3]  # of i, j, k (2-D: k of 1)
    head["srow"][:, :3], head["srow"][:, 3] = np.diag(steps), origin
    head["qoffset"] = origin  # and no rotation: quatern b, c, d = 0, qfac = pixdim[0] = 1
    if space:
        head["qform_code"] = head["sform_code"] = _ALIGNED
        head["descrip"] = space.convention.encode("ascii", "replace")[:80]
    return head.tobytes() + _EXTENSION_FLAG
