"""The daemon's own memory figures and the return of freed memory, in this process."""

from __future__ import annotations

import gc

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
