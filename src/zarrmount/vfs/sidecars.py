"""Files beside each array file for programs that know nothing of Zarr: a header that
describes ``NAME`` (ENVI ``.hdr``, NRRD ``.nhdr``), or a view that is a header followed by
``NAME``'s own bytes (``.npy``, ``.tif``). Which ones a mount shows is ``-o sidecars``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zarrmount.format.model import ArrayMeta
from zarrmount.headers import NotApplicable, envi_header, npy_header, nrrd_header, tiff_header


@dataclass(frozen=True)
class Sidecar:
    kind: str  # as named in -o sidecars
    suffix: str  # appended to the array file's name
    # the header of the array file NAME, or NotApplicable (with the reason)
    header: Callable[[ArrayMeta, str], bytes]
    view: bool  # the header is followed by the array's bytes
    writable: bool = False  # on rw mounts, writes to the data part reach the array


SIDECARS: dict[str, Sidecar] = {
    s.kind: s
    for s in (
        Sidecar("envi", ".hdr", lambda m, _name: envi_header(m.shape, m.dtype), view=False),
        Sidecar("nrrd", ".nhdr", lambda m, name: nrrd_header(m.shape, m.dtype, name), view=False),
        Sidecar("npy", ".npy", lambda m, _name: npy_header(m.shape, m.dtype), True, True),
        Sidecar("tiff", ".tif", lambda m, _name: tiff_header(m.shape, m.dtype), view=True),
    )
}


def header_of(sidecar: Sidecar, meta: ArrayMeta, name: str) -> bytes | None:
    """The sidecar's header for the array file ``name``; None where it has none."""
    try:
        return sidecar.header(meta, name)
    except NotApplicable:
        return None


def reasons(meta: ArrayMeta, name: str, kinds: list[str]) -> dict[str, str | None]:
    """For ``--inspect``: each sidecar kind's file name, or why the array has none."""
    found: dict[str, str | None] = {}
    for kind in kinds:
        sidecar = SIDECARS.get(kind)
        if sidecar is None:
            continue
        try:
            sidecar.header(meta, name)
            found[kind] = None
        except NotApplicable as e:
            found[kind] = str(e)
    return found
