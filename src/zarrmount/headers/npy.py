"""The NumPy ``.npy`` header that, put before an array's raw C-order bytes, makes a file
``np.load`` reads (also with ``mmap_mode``) without a copy of the data.

The format: magic ``\\x93NUMPY``, a version, the header's length, then a Python dict
literal padded with spaces and a newline so that the data starts at a multiple of 64
bytes. Versions differ only in the length field (2 bytes in 1.0, 4 in 2.0) and the
encoding (latin-1, or UTF-8 in 3.0 for field names latin-1 cannot carry). ``np.load``
refuses headers over 10000 bytes (records of some hundreds of fields) unless given
``max_header_size`` or ``allow_pickle=True``.
"""

from __future__ import annotations

import struct

import numpy as np

from zarrmount.headers.base import NotApplicable

_MAGIC = b"\x93NUMPY"
_ALIGN = 64


def npy_descr(dtype: np.dtype) -> object:
    """The ``descr`` of ``dtype``, refused unless NumPy rebuilds the same dtype from it."""
    if dtype.hasobject:
        raise NotApplicable(f"the dtype {dtype} refers to Python objects: it has no raw bytes")
    if dtype.itemsize == 0:
        raise NotApplicable(f"the dtype {dtype} has no fixed item size")
    try:
        descr = np.lib.format.dtype_to_descr(dtype)
        same = np.lib.format.descr_to_dtype(descr) == dtype
    except (TypeError, ValueError) as e:
        raise NotApplicable(f"NumPy cannot describe the dtype {dtype} in a .npy file: {e}") from e
    if not same:
        raise NotApplicable(f"a .npy header cannot describe the dtype {dtype} exactly")
    return descr


def _prefixed(body: bytes, version: int) -> bytes | None:
    """Magic, version and length before ``body`` padded to the alignment; None when the
    length does not fit the version's field."""
    fmt = "<H" if version == 1 else "<I"
    fixed = len(_MAGIC) + 2 + struct.calcsize(fmt)
    pad = -(fixed + len(body) + 1) % _ALIGN
    length = len(body) + pad + 1
    if length >= 1 << (8 * struct.calcsize(fmt)):
        return None
    return _MAGIC + bytes((version, 0)) + struct.pack(fmt, length) + body + b" " * pad + b"\n"


def _wrap(text: str) -> bytes:
    """The dict literal in the oldest version that can hold it."""
    try:
        body = text.encode("latin-1")
    except UnicodeEncodeError:
        found = _prefixed(text.encode("utf-8"), 3)
    else:
        found = _prefixed(body, 1) or _prefixed(body, 2)
    if found is None:
        raise NotApplicable("the .npy header would be longer than 4 GiB")
    return found


def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The ``.npy`` header of a C-order array of ``shape`` and ``dtype``; its length is a
    multiple of 64."""
    dtype = np.dtype(dtype)
    descr = npy_descr(dtype)
    dims = tuple(int(n) for n in shape)
    # repr of a tuple of ints is the literal NumPy expects: "()", "(3,)", "(2, 3)".
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {dims!r}, }}"
    return _wrap(text)
