"""Files beside each array file for programs that know nothing of Zarr: a header that
describes ``NAME`` (ENVI ``.hdr``, NRRD ``.nhdr``), or a view that is a header followed by
``NAME``'s own bytes (``.npy``, ``.tif``), or by its elements as another format stores
them (``.fits``: big-endian, zero-padded to whole blocks; ``.nii``: little-endian). Which
ones a mount shows is ``-o sidecars``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrmount.array.byteorder import Convert, swapping, to_big_endian
from zarrmount.format.georef import Place
from zarrmount.format.physical import Space
from zarrmount.headers import NotApplicable, envi_header, npy_header, nrrd_header
from zarrmount.headers.fits import BLOCK, fits_header, flips_sign
from zarrmount.headers.geotiff import geotiff_tags
from zarrmount.headers.imagej import imagej_description, resolution_tags
from zarrmount.headers.mrc import mrc_header
from zarrmount.headers.nifti import nifti_header
from zarrmount.headers.tiff import strip_layout
from zarrmount.headers.tifftags import Tag


@dataclass(frozen=True)
class Subject:
    """What a header describes: the array file ``name`` beside it."""

    shape: tuple[int, ...]
    dtype: np.dtype  # of the file's bytes
    name: str
    attributes: dict[str, Any]
    place: Place | None = None  # where it lies on a map (format/georef.py)
    nodata: int | float | None = None  # the value marking missing data, if one does
    space: Space | None = None  # where its elements lie in physical space (format/physical.py)


@dataclass(frozen=True)
class Sidecar:
    kind: str  # as named in -o sidecars
    suffix: str  # appended to the array file's name
    # the header's size; raises NotApplicable (with the reason) where the format cannot
    # describe the array
    size: Callable[[Subject], int]
    part: Callable[[Subject, int, int], bytes]  # bytes [start, stop) of the header
    view: bool  # the header is followed by the array's bytes
    writable: bool = False  # on rw mounts, writes to the data part reach the array
    # a view whose elements are stored otherwise: the file's dtype -> how they are shown
    # (None: as they are)
    convert: Callable[[np.dtype], Convert | None] | None = None
    block: int = 1  # a view's whole size is a multiple of this (zero-padded)
    placed: bool = False  # the header says where the array lies on a map
    spaced: bool = False  # the header says where its elements lie in physical space
    tiled: bool = False  # tiled where the chunks can be tiles (vfs/tiledtiff.py)


def _made_whole(kind: str, suffix: str, make: Callable[[Subject], bytes], **view: Any):
    """A sidecar whose header is small: made whole for its size and for each part."""
    return Sidecar(
        kind,
        suffix,
        lambda s: len(make(s)),
        lambda s, start, stop: make(s)[start:stop],
        **{"view": False, **view},
    )


def _big_endian(dtype: np.dtype) -> Convert | None:
    """FITS's data: big-endian, the sign bit flipped where BZERO offsets the values."""
    return to_big_endian(dtype, flips_sign(dtype))


def _little_endian(dtype: np.dtype) -> Convert | None:
    """NIfTI's and MRC's data: little-endian (their headers say so), a big-endian array's
    swapped."""
    return swapping(dtype, dtype.newbyteorder("<")) if dtype.byteorder == ">" else None


def _voxels(kind: str, suffix: str, header: Callable[..., bytes]) -> Sidecar:
    """A volume format's view: its header says where the voxels lie, which follow it
    little-endian (NIfTI, MRC)."""
    return _made_whole(
        kind,
        suffix,
        lambda s: header(s.shape, s.dtype, s.space),
        view=True,
        convert=_little_endian,
        spaced=True,
    )


SIDECARS: dict[str, Sidecar] = {
    s.kind: s
    for s in (
        _made_whole(
            "envi",
            ".hdr",
            lambda s: envi_header(s.shape, s.dtype, s.place, s.space),
            placed=True,
            spaced=True,
        ),
        _made_whole(
            "nrrd", ".nhdr", lambda s: nrrd_header(s.shape, s.dtype, s.name, s.space), spaced=True
        ),
        _made_whole(
            "npy", ".npy", lambda s: npy_header(s.shape, s.dtype), view=True, writable=True
        ),
        # a TIFF header grows with the pages (100,000 of them: 17 MB): made in parts
        Sidecar(
            "tiff",
            ".tif",
            lambda s: strip_layout(s.shape, s.dtype, tiff_tags(s)).size,
            lambda s, start, stop: strip_layout(s.shape, s.dtype, tiff_tags(s)).header_range(
                start, stop
            ),
            view=True,
            placed=True,
            tiled=True,
            spaced=True,
        ),
        _made_whole(
            "fits",
            ".fits",
            lambda s: fits_header(s.shape, s.dtype, s.attributes),
            view=True,
            convert=_big_endian,
            block=BLOCK,
        ),
        _voxels("nifti", ".nii", nifti_header),
        _voxels("mrc", ".mrc", mrc_header),
    )
}


def tiff_tags(subject: Subject, imagej: bool = True) -> tuple[Tag, ...]:
    """The ``.tif`` views' own tags: where the image lies (GeoTIFF), its nodata, the
    size of a pixel, and where the pages are planes, ImageJ's calibration."""
    found = geotiff_tags(subject.place, subject.nodata).tags + resolution_tags(subject.space)
    return found + imagej_description(subject.shape, subject.space) if imagej else found


def header_size(sidecar: Sidecar, subject: Subject) -> int | None:
    """The size of the sidecar's header for ``subject``; None where it has none."""
    try:
        return sidecar.size(subject)
    except NotApplicable:
        return None


def reasons(subject: Subject, kinds: list[str]) -> dict[str, str | None]:
    """For ``--inspect``: for each sidecar kind, None, or why the array has none."""
    found: dict[str, str | None] = {}
    for kind in kinds:
        sidecar = SIDECARS.get(kind)
        if sidecar is None:
            continue
        try:
            sidecar.size(subject)
            found[kind] = None
        except NotApplicable as e:
            found[kind] = str(e)
    return found
