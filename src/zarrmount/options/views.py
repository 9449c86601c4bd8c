"""Options of the files shown for other programs: sidecars and views beside array files,
a group's netCDF and HDF5 files, the text of arrays of strings, the byte order of array
files."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from zarrmount.options.option import Option, choice, size
from zarrmount.options.values import OptionError

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions

SIDECAR_KINDS = ("envi", "nrrd", "npy", "tiff", "fits", "nifti", "mrc", "netcdf", "hdf5", "text")
DEFAULT_SIDECARS = ("envi", "text")
BYTE_ORDERS = ("stored", "little", "big", "native")


def _sidecars(o: MountOptions, name: str, text: str) -> None:
    """``envi+npy``: kinds joined with ``+`` (``,`` separates options); ``none``."""
    kinds = [] if text == "none" else text.split("+")
    unknown = [k for k in kinds if k not in SIDECAR_KINDS]
    if unknown:
        raise OptionError(
            f"option {name!r}: unknown kind {unknown[0]!r} (known: {', '.join(SIDECAR_KINDS)})"
        )
    o.sidecars = list(dict.fromkeys(kinds))


def _dataset_name(o: MountOptions, name: str, text: str) -> None:
    if not text or "/" in text or text in (".", "..") or "\0" in text:
        raise OptionError(f"option {name!r}: {text!r} is not a file name")
    o.dataset_name = text


def dataset_name(source: str) -> str:
    """The root group's name for the files that name it: the source's last path
    component without its ``.zarr`` or ``.zip`` suffixes (``era5.zarr.zip``: ``era5``)."""
    path = urlsplit(source).path if "://" in source else source
    name = path.rstrip("/").rpartition("/")[2]
    for suffix in (".zip", ".zarr"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name if name not in ("", ".", "..") else "root"


VIEWS: tuple[Option, ...] = (
    Option(
        "sidecars=LIST",
        "files for other programs: envi, nrrd, npy, tiff, fits, nifti, mrc, text beside "
        "each array, "
        "netcdf and hdf5 in each group, joined with +, or none (default envi+text)",
        _sidecars,
    ),
    Option(
        "dataset_name=NAME",
        "the root group's netCDF and HDF5 files are NAME.nc and NAME.h5 (default: the "
        "source's last component without .zarr or .zip)",
        _dataset_name,
    ),
    Option(
        "text_max=SIZE",
        "arrays of strings with more text than this are not shown (default 64M)",
        size("text_max"),
    ),
    Option(
        "byteorder=ORDER",
        "byte order of array files and views: stored (the default), little, big, native",
        choice("byteorder", BYTE_ORDERS),
    ),
)
