"""Files beside each array file for programs that know nothing of Zarr: a header that
describes ``NAME`` (ENVI ``.hdr``, NRRD ``.nhdr``), or a view that is a header followed by
``NAME``'s own bytes (``.npy``, ``.tif``). Which ones a mount shows is ``-o sidecars``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from zarrmount.headers import NotApplicable, envi_header, npy_header, nrrd_header, tiff_header


@dataclass(frozen=True)
class Sidecar:
    kind: str  # as named in -o sidecars
    suffix: str  # appended to the array file's name
    # (shape, dtype of the file's bytes, file name NAME) -> the header, or NotApplicable
    header: Callable[[tuple[int, ...], np.dtype, str], bytes]
    view: bool  # the header is followed by the array's bytes
    writable: bool = False  # on rw mounts, writes to the data part reach the array


SIDECARS: dict[str, Sidecar] = {
    s.kind: s
    for s in (
        Sidecar("envi", ".hdr", lambda shape, dtype, _: envi_header(shape, dtype), view=False),
        Sidecar("nrrd", ".nhdr", nrrd_header, view=False),
        Sidecar("npy", ".npy", lambda shape, dtype, _: npy_header(shape, dtype), True, True),
        Sidecar("tiff", ".tif", lambda shape, dtype, _: tiff_header(shape, dtype), view=True),
    )
}


def header_of(sidecar: Sidecar, shape: tuple[int, ...], dtype: np.dtype, name: str) -> bytes | None:
    """The sidecar's header for the array file ``name``; None where it has none."""
    try:
        return sidecar.header(shape, dtype, name)
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
            sidecar.header(shape, dtype, name)
            found[kind] = None
        except NotApplicable as e:
            found[kind] = str(e)
    return found
