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
from collections.abc import Callable

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


def _libc(name: str, restype: type) -> Callable | None:
    """A glibc function (``mallinfo2``: 2.33 and later), or None elsewhere."""
    try:
        call = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        log.debug("no %s in this C library", name)
        return None
    call.restype = restype
    return call


_MALLINFO2 = _libc("mallinfo2", _Mallinfo2)
_MALLOC_TRIM = _libc("malloc_trim", ctypes.c_int)
_MALLOPT = _libc("mallopt", ctypes.c_int)
_PAGE = os.sysconf("SC_PAGE_SIZE")
_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)
ARENAS = 2  # malloc's arenas: the main heap and one for all other threads


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


def give_back_freed(least: int) -> int:
    """Hand the pages of freed memory malloc keeps back to the kernel when it keeps at
    least ``least`` bytes of it; returns the bytes it kept. glibc keeps what a burst of
    decoding freed (in its main heap and in each thread's arena) for the next burst: a
    server's resident set would only ever rise to its busiest moment's."""
    if _MALLINFO2 is None or _MALLOC_TRIM is None:
        return 0
    kept = _MALLINFO2().fordblks
    if kept >= least:
        _MALLOC_TRIM(ctypes.c_size_t(0))
    return kept


def share_arenas() -> None:
    """Threads other than the first share one malloc arena (``ARENAS``), for the
    daemon's life. glibc gives each thread an arena of its own, up to eight per core,
    and ``malloc_trim`` cannot hand back the free top of a thread's arena: each keeps its
    busiest moment's pages, and a reloaded v3 soak's resident set grew 15 MiB per 10
    minutes in sixteen arenas so (5 with two, at the same rate of operations). A limit
    set in the environment (``MALLOC_ARENA_MAX``, ``GLIBC_TUNABLES``) stands."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if _MALLOPT is None or "MALLOC_ARENA_MAX" in os.environ or "arena_max" in tunables:
        return
    if not _MALLOPT(_M_ARENA_MAX, ARENAS):
        log.warning("malloc refused a limit on its arenas: its default stands")
