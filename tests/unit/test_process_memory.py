"""The daemon's own memory figures and the return of freed memory, in this process."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

from zarrmount import process_memory


def _rss() -> int:
    """The kernel's figure, not ours."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) << 10


def test_freed_memory_malloc_keeps_goes_back_to_the_kernel():
    """80 MiB of blocks freed below one still in use: malloc keeps their pages (the heap's
    top cannot shrink past the survivor) until they are given back."""
    blocks = [bytearray(4000) for _ in range(20_000)]
    survivor = blocks[-1]
    del blocks
    gc.collect()
    before = _rss()
    kept = process_memory.give_back_freed(least=1 << 20)
    assert kept >= 64 << 20
    assert _rss() < before - (48 << 20)
    assert len(survivor) == 4000


# eight threads allocate at once, then glibc counts its arenas (malloc_stats, on stderr)
_ARENAS = """
import ctypes, sys, threading
from zarrmount import process_memory
if sys.argv[1] == "shared":
    process_memory.share_arenas()
together = threading.Barrier(8)
def work():
    held = bytearray(4000)
    together.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def _arenas(how: str, env: dict[str, str] | None = None) -> int:
    run = subprocess.run(
        [sys.executable, "-c", _ARENAS, how],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return sum(line.startswith("Arena ") for line in run.stderr.splitlines())


def test_a_daemons_threads_share_one_arena():
    """glibc gives busy threads arenas of their own; the daemon's share one besides the
    main heap, unless the environment set a limit."""
    assert _arenas("default") > process_memory.ARENAS
    assert _arenas("shared") == process_memory.ARENAS
    assert _arenas("shared", {"MALLOC_ARENA_MAX": "4"}) > process_memory.ARENAS
