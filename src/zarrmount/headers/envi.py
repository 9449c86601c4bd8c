"""ENVI ``.hdr`` headers: GDAL opens ``a.raw`` as a raster when ``a.raw.hdr`` lies beside it.

ENVI describes one to many bands of a 2-D image; a 3-D C-order array is exactly band
sequential (``bsq``) storage, so no element needs moving.
"""

from __future__ import annotations

import numpy as np

from zarrmount.format.georef import Place
from zarrmount.format.physical import Space, length_in
from zarrmount.headers.base import NotApplicable, plain_type

# ENVI ``data type`` codes by (NumPy kind, item size). ENVI defines 14 and 15 (64-bit
# integers) though older GDAL refuses them: the header stays right for other readers.
_DATA_TYPES: dict[tuple[str, int], int] = {
    ("u", 1): 1,
    ("i", 2): 2,
    ("i", 4): 3,
    ("f", 4): 4,
    ("f", 8): 5,
    ("c", 8): 6,
    ("c", 16): 9,
    ("u", 2): 12,
    ("u", 4): 13,
    ("i", 8): 14,
    ("u", 8): 15,
}

# Readers (GDAL among them) hold sizes in signed 32-bit integers.
_MAX_SIZE = 2**31 - 1


def envi_data_type(dtype: np.dtype) -> int:
    """The ENVI ``data type`` code of ``dtype``."""
    return plain_type(_DATA_TYPES, dtype, "ENVI")


def _bands_lines_samples(shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(shape) not in (2, 3):
        raise NotApplicable(f"ENVI describes 2-D and 3-D arrays only (this one is {len(shape)}-D)")
    bands, lines, samples = (1, *shape) if len(shape) == 2 else shape
    if min(shape) < 1:
        raise NotApplicable(f"ENVI has no empty images (shape {tuple(shape)})")
    if max(shape) > _MAX_SIZE:
        raise NotApplicable(f"ENVI readers take sizes up to {_MAX_SIZE} only")
    return int(bands), int(lines), int(samples)


def map_lines(place: Place) -> list[str]:
    """Where the image lies, as GDAL's ENVI reader takes it: ``map info`` with the top left
    corner of pixel (1, 1) and the pixel sizes (y positive going north), the CRS as WKT1
    in ``coordinate system string`` (the reader takes no WKT2 there)."""
    x0, dx, _, y0, _, dy = place.transform
    numbers = ", ".join(repr(v) for v in (x0, y0, dx, -dy))
    return [
        f"map info = {{Arbitrary, 1, 1, {numbers}}}",
        f"coordinate system string = {{{place.crs.wkt}}}",
    ]


def pixel_size(space: Space) -> tuple[float, float] | None:
    """The samples' and lines' size in metres (the last two axes', of space, each with a
    length unit), None where the space gives no such size."""
    if len(space.axes) < 2 or any(axis.type != "space" for axis in space.axes[-2:]):
        return None
    y, x = (length_in(space.scale[d], space.axes[d].unit, "meter") for d in (-2, -1))
    return None if x is None or y is None else (x, y)


def pixel_lines(space: Space, place: Place | None) -> list[str]:
    """``pixel size`` (ENVI's form: x, y and the unit), which ENVI reads only where no
    ``map info`` gives the pixels' size: with a ``place`` it is left out, saying so (an
    array on a map and in a physical space is odd; the map wins, as GDAL reads it)."""
    size = pixel_size(space)
    if size is None:
        return []
    numbers = ", ".join(repr(v) for v in size)
    if place is not None:
        return [f"; the pixel size of {space.convention} ({numbers} metres) left out: map info"]
    return [f"pixel size = {{{numbers}, units=Meters}}"]


def envi_header(
    shape: tuple[int, ...],
    dtype: np.dtype,
    place: Place | None = None,
    space: Space | None = None,
) -> bytes:
    """The ENVI header of a raw C-order file of ``shape`` and ``dtype``: a 2-D array is one
    band of (lines, samples), a 3-D one is (bands, lines, samples); placed on a map where
    ``place`` says, its pixel size given where ``space`` has one."""
    dtype = np.dtype(dtype)
    bands, lines, samples = _bands_lines_samples(tuple(shape))
    code = envi_data_type(dtype)
    # dtype.str names the byte order explicitly ('<', '>', or '|' for single bytes).
    big = dtype.str[0] == ">"
    lines_out = [
        "ENVI",
        f"samples = {samples}",
        f"lines = {lines}",
        f"bands = {bands}",
        "header offset = 0",
        "file type = ENVI Standard",
        f"data type = {code}",
        "interleave = bsq",
        f"byte order = {int(big)}",
        *(map_lines(place) if place else ()),
        *(pixel_lines(space, place) if space and len(space.axes) == len(shape) else ()),
    ]
    return ("\n".join(lines_out) + "\n").encode()
