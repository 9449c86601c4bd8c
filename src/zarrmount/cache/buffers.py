"""Page-aligned chunk buffers, recycled when the cache evicts the chunks decoded into them.

Fresh memory is slow on these machines (the first touch of a page costs more than a fast
decode), and copies into buffers at 16 mod 32 bytes are several times slower than into
page-aligned ones, so decoded chunks live in aligned buffers that are used again.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from zarrmount.memory import aligned_empty


class BufferPool:
    """Free buffers by size; safe from any thread.

    It keeps a buffer only while its free buffers and ``in_use()`` (the bytes of the cache
    they serve) stay within ``limit`` together, so the two share one memory budget.
    """

    def __init__(self, limit: int, in_use: Callable[[], int] = lambda: 0) -> None:
        self.limit = limit
        self.in_use = in_use
        self.held = 0
        self._free: dict[int, list[np.ndarray]] = defaultdict(list)
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            free = self._free.get(nbytes)
            if free:
                self.held -= nbytes
                return free.pop()
        return aligned_empty(nbytes)

    def give(self, buffer: np.ndarray) -> None:
        nbytes = buffer.nbytes
        with self._lock:
            if self.held + nbytes + self.in_use() <= self.limit:
                self._free[nbytes].append(buffer)
                self.held += nbytes
