"""Header files that let tools knowing nothing of Zarr open an array's raw C-order file.

Each generator is pure: from an array's shape and dtype it makes the bytes of one header
(ENVI ``.hdr``, detached NRRD ``.nhdr``) or the prefix that turns the raw bytes into a
NumPy ``.npy`` or a TIFF file, or raises :class:`NotApplicable` saying why the format cannot
describe that array.
"""

from zarrmount.headers.base import NotApplicable
from zarrmount.headers.envi import envi_header
from zarrmount.headers.npy import npy_header
from zarrmount.headers.nrrd import nrrd_header
from zarrmount.headers.tiff import tiff_header

__all__ = ["NotApplicable", "envi_header", "npy_header", "nrrd_header", "tiff_header"]
