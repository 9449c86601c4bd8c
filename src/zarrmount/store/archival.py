"""Archival files mounted as they are: NetCDF4/HDF5, NetCDF3, FITS and TIFF files parsed
by VirtualiZarr (and virtual-tiff) into a Zarr hierarchy whose chunks are byte ranges of
the file (its ``ManifestStore``), read in place through the adapter of zarr-python's
stores.

The parsers read the file's own structure only; every chunk they point at lies in that
file, read through a store rooted at the file's directory.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from typing import Any

from zarrmount.store.base import StoreError
from zarrmount.store.zarr_store import ZarrPythonStore

log = logging.getLogger(__name__)

PARSERS = "virtualizarr.parsers"
# The first bytes of each kind of file, its parser (module, class) and the format's name
MAGIC = (
    (b"\x89HDF\r\n\x1a\n", PARSERS, "HDFParser", "NetCDF4/HDF5"),
    (b"CDF\x01", PARSERS, "NetCDF3Parser", "NetCDF3"),
    (b"CDF\x02", PARSERS, "NetCDF3Parser", "NetCDF3 (64-bit offsets)"),
    (b"SIMPLE  =", PARSERS, "FITSParser", "FITS"),
    (b"II*\x00", "virtual_tiff", "VirtualTIFF", "TIFF"),
    (b"MM\x00*", "virtual_tiff", "VirtualTIFF", "TIFF"),
    (b"II+\x00", "virtual_tiff", "VirtualTIFF", "BigTIFF"),
    (b"MM\x00+", "virtual_tiff", "VirtualTIFF", "BigTIFF"),
)


def kind_of(path: str) -> tuple[str, str, str] | None:
    """The parser (module, class) and the name of ``path``'s format, by its first bytes;
    None: not one of them."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    found = (entry[1:] for entry in MAGIC if head.startswith(entry[0]))
    return next(found, None)


def open_archival(path: str, deadline_s: float) -> ZarrPythonStore:
    """The variables of the archival file at ``path``, as a read-only zarr store."""
    found = kind_of(path)
    if found is None:
        raise StoreError(f"{path}: not a NetCDF, HDF5, FITS or TIFF file")
    module, parser, name = found
    try:
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore

        parsers = importlib.import_module(module)
    except ImportError:
        raise StoreError(
            f"{path} is {name}: files are mounted through VirtualiZarr: zarrmount[archival] "
            "(Python >= 3.12)"
        ) from None
    path = os.path.realpath(path)
    directory = os.path.dirname(path)
    registry = ObjectStoreRegistry({f"file://{directory}": LocalStore(prefix=directory)})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # of numcodecs codecs in v3 metadata
            manifest = getattr(parsers, parser)()(f"file://{path}", registry=registry)
    except ImportError as e:
        raise StoreError(f"{path} is {name}; its parser needs {e.name}") from None
    except Exception as e:  # a damaged file: the parser says what it could not read
        raise StoreError(f"{path}: not a readable {name} file: {type(e).__name__}: {e}") from None
    log.info("%s: %s, its variables read in place", path, name)
    return ArchivalStore(manifest, path, name, deadline_s)


class ArchivalStore(ZarrPythonStore):
    """A file's manifest: read-only, its arrays' chunk keys not listed (the manifest has
    no listing of them)."""

    def __init__(self, manifest: Any, path: str, name: str, deadline_s: float) -> None:
        super().__init__(manifest, f"file://{path}", deadline_s)
        self.lists_chunks = self.lists_deep = False
        self.read_only_reason = f"{name} files are mounted read-only"
        self.origin = f"{name} file {path}"

    def origins(self, prefix: str) -> list[str]:
        return [self.origin]
