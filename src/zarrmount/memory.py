"""Memory for bulk data: page-aligned, populated up front, and reused.

Fresh memory is slow on these machines (the first touch of a page costs more than a fast
decode), and copies into buffers at 16 mod 32 bytes are several times slower than into
page-aligned ones.
"""

from __future__ import annotations

import mmap
import threading

import numpy as np

_local = threading.local()


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 array of ``nbytes`` starting on a page boundary.

    Anonymous mmap with its pages populated up front, rather than ``np.empty``: on these
    VMs a page fault costs microseconds, so faulting in a 4 MiB buffer page by page takes
    about 2 ms against 1 ms for MAP_POPULATE; and NumPy asks for transparent huge pages
    on large arrays, which are slower still to touch here.
    """
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1), flags=flags), dtype=np.uint8)[:nbytes]


def scratch(slot: str, size: int) -> np.ndarray:
    """This thread's page-aligned buffer named ``slot``, at least ``size`` bytes, reused
    from call to call: one per thread and use, so work in progress never shares one.

    A larger one replaces it rather than growing it: views of the old one may live on
    (in a traceback, say).
    """
    found = getattr(_local, slot, None)
    if found is None or found.nbytes < size:
        grown = 2 * found.nbytes if found is not None else 0
        found = aligned_empty(max(size, grown))
        setattr(_local, slot, found)
    return found
