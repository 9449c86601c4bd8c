"""What the daemon's memory is, as ``--stats`` and the metrics report it, so that an
administrator sees growth long before the OOM killer does: the resident set, the bytes
malloc has handed out (Python's objects past 512 bytes, NumPy's arrays, the libraries'),
and the blocks Python's own allocator holds (its small objects). A daemon started with
``PYTHONTRACEMALLOC=1`` also reports the bytes Python traces and, for finding what grows,
its largest allocation sites by line."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import tracemalloc

log = logging.getLogger(__name__)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo2():
    """glibc's ``mallinfo2`` (2.33 and later), or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        call = libc.mallinfo2
    except (OSError, AttributeError):
        log.debug("no mallinfo2: the heap in use is not reported")
        return None
    call.restype = _Mallinfo2
    return call


_MALLINFO2 = _mallinfo2()
_PAGE = os.sysconf("SC_PAGE_SIZE")


def memory_stats() -> dict[str, int]:
    """``memory_rss_bytes``, ``memory_heap_bytes`` (in use: allocated by malloc, mapped
    blocks included) and ``memory_python_blocks`` (Python's allocator)."""
    found = {"memory_python_blocks": sys.getallocatedblocks()}
    try:
        with open("/proc/self/statm", "rb") as f:
            found["memory_rss_bytes"] = int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        pass
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        found["memory_heap_bytes"] = info.uordblks + info.hblkhd
    if tracemalloc.is_tracing():
        found["memory_python_traced_bytes"] = tracemalloc.get_traced_memory()[0]
    return found


def allocation_sites(limit: int = 100) -> list[dict[str, object]] | None:
    """The ``limit`` lines holding most of the memory Python traces (``site``:
    ``file:line``, ``bytes``, ``blocks``), or None when it does not trace. Two of these
    apart in time say what grows."""
    if not tracemalloc.is_tracing():
        return None
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__),)
    )
    return [
        {
            "site": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
            "bytes": s.size,
            "blocks": s.count,
        }
        for s in snapshot.statistics("lineno")[:limit]
    ]
