"""Sequential-reader detection: which byte range to fetch ahead of a reader, if any.

A reader whose requests follow each other (each starts where the last ended) is
sequential after ``STREAK`` such requests; the range ahead of it is then kept loaded up
to ``window`` bytes past its position, topped up in steps of half a window so the work
per request stays small. Any other request (a far seek) starts over.
"""

from __future__ import annotations

STREAK = 2


class ReadAhead:
    def __init__(self, size: int, window: int) -> None:
        self.size = size
        self.window = window
        self._next = -1  # where the next sequential request would start
        self._streak = 0
        self._ahead = 0  # everything before this offset has been asked for already

    @property
    def sequential(self) -> bool:
        return self._streak >= STREAK

    def observe(self, offset: int, end: int) -> tuple[int, int] | None:
        """Record a read of ``[offset, end)``; returns a byte range to prefetch, or None."""
        if offset == self._next:
            self._streak += 1
        else:
            self._streak = 0
            self._ahead = end
        self._next = end
        if self._streak < STREAK or self.window <= 0:
            return None
        target = min(self.size, end + self.window)
        start = max(self._ahead, end)
        if target - start < self.window // 2 and target < self.size:
            return None
        if start >= target:
            return None
        self._ahead = target
        return start, target
