"""Files beside each array file for programs that know nothing of Zarr: a header that
describes ``NAME`` (ENVI ``.hdr``, NRRD ``.nhdr``), or a view that is a header followed by
``NAME``'s own bytes (``.npy``, ``.tif``). Which ones a mount shows is ``-o sidecars``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from zarrmount.headers import NotApplicable, envi_header, npy_header, nrrd_header
from zarrmount.headers.tiff import tiff_header_range, tiff_header_size

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Sidecar:
    kind: str  # as named in -o sidecars
    suffix: str  # appended to the array file's name
    # (shape, dtype of the file's bytes, file name NAME) -> the header's size; raises
    # NotApplicable (with the reason) where the format cannot describe the array
    size: Callable[[Shape, np.dtype, str], int]
    # (shape, dtype, NAME, start, stop) -> bytes [start, stop) of the header
    part: Callable[[Shape, np.dtype, str, int, int], bytes]
    view: bool  # the header is followed by the array's bytes
    writable: bool = False  # on rw mounts, writes to the data part reach the array


def _made_whole(kind: str, suffix: str, make, view: bool = False, writable: bool = False):
    """A sidecar whose header is small: made whole for its size and for each part."""
    return Sidecar(
        kind,
        suffix,
        lambda shape, dtype, name: len(make(shape, dtype, name)),
        lambda shape, dtype, name, start, stop: make(shape, dtype, name)[start:stop],
        view,
        writable,
    )


SIDECARS: dict[str, Sidecar] = {
    s.kind: s
    for s in (
        _made_whole("envi", ".hdr", lambda shape, dtype, _: envi_header(shape, dtype)),
        _made_whole("nrrd", ".nhdr", nrrd_header),
        _made_whole("npy", ".npy", lambda shape, dtype, _: npy_header(shape, dtype), True, True),
        # a TIFF header grows with the pages (100,000 of them: 17 MB): made in parts
        Sidecar(
            "tiff",
            ".tif",
            lambda shape, dtype, _: tiff_header_size(shape, dtype),
            lambda shape, dtype, _, start, stop: tiff_header_range(shape, dtype, start, stop),
            view=True,
        ),
    )
}


def header_size(sidecar: Sidecar, shape: Shape, dtype: np.dtype, name: str) -> int | None:
    """The size of the sidecar's header for the array file ``name``; None where it has none."""
    try:
        return sidecar.size(shape, dtype, name)
    except NotApplicable:
        return None


def reasons(
    shape: tuple[int, ...], dtype: np.dtype, name: str, kinds: list[str]
) -> dict[str, str | None]:
    """For ``--inspect``: for each sidecar kind, None, or why the array has none."""
    found: dict[str, str | None] = {}
    for kind in kinds:
        sidecar = SIDECARS.get(kind)
        if sidecar is None:
            continue
        try:
            sidecar.size(shape, dtype, name)
            found[kind] = None
        except NotApplicable as e:
            found[kind] = str(e)
    return found
