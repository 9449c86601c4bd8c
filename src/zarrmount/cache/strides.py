"""Strided-reader detection: the byte ranges a reader stepping through a file at a
constant stride will read next.

A reader of one point's time series (a small read a step, each step a slab further), of a
small window's (a few reads a step, then the same jump) or of every k-th row never starts
where it last ended, so the sequential model (``prefetch.py``) never sees it, and against
a far store each of its reads would wait one round trip alone. Its request starts repeat
with a period: each of them lies ``stride`` bytes past the one ``period`` requests
earlier. Once that held for ``CONFIRM`` periods running, the ranges of the next strides
are asked for, ``depth`` strides ahead, topped up as the reader moves; the first request
off the pattern stops it.

The depth follows the link as the sequential window does (``tune``): ``DEPTH`` times what
the reader consumes while one load takes, in steps of the pattern, between ``least`` and
``most`` strides.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections import deque

from zarrmount.cache.prefetch import DEPTH

# Periods a pattern repeats before it is trusted: a point's time series is read ahead
# from its fourth request on.
CONFIRM = 3
# The most requests a step may have (a small window's rows, or its elements one by one).
PERIOD_MOST = 16


class StrideReadAhead:
    def __init__(self, size: int, most: int, least: int) -> None:
        self.size = size
        self.most = most
        self.least = min(least, most)
        self.period = 0  # requests a step of the pattern followed; 0: none
        self.stride = 0  # bytes between a request and the one a period earlier
        self._depth_bytes = 0.0  # what the reader should find loaded ahead (tune)
        self._recent: deque[tuple[int, int]] = deque(maxlen=PERIOD_MOST)
        # differences between successive request starts, the newest first
        self._deltas: list[int] = []
        self._seen = 0  # requests seen
        self._asked = 0  # every request of the pattern up to this one has been asked for

    def tune(self, rate: float, latency: float) -> None:
        """The reader consumes ``rate`` bytes a second and a load takes ``latency``
        seconds: keep ``DEPTH`` times their product ahead."""
        self._depth_bytes = DEPTH * rate * latency

    @property
    def strided(self) -> bool:
        return self.period > 0

    def observe(self, offset: int, end: int) -> list[tuple[int, int]]:
        """Record a read of ``[offset, end)``; returns the byte ranges of the pattern
        not asked for yet, in the order the reader will read them (none off a pattern)."""
        contiguous = self._note(offset, end)
        if self.period and self._deltas[0] != self._deltas[self.period]:
            self.period = 0  # off the pattern: nothing more
        if not self.period and (contiguous or not self._detect()):
            return []
        return self._ahead()

    def _note(self, offset: int, end: int) -> bool:
        """Keep the request; whether it starts where the last one ended."""
        recent, deltas = self._recent, self._deltas
        contiguous = bool(recent) and offset == recent[-1][1]
        if recent:
            deltas.insert(0, offset - recent[-1][0])
            del deltas[PERIOD_MOST * (CONFIRM + 1) :]
        recent.append((offset, end))
        self._seen += 1
        return contiguous

    def _detect(self) -> bool:
        """Find the shortest period whose stride held for CONFIRM periods running: the
        differences between starts repeat with that period (compared in C, since every
        request of a random reader comes here)."""
        deltas = self._deltas
        if not deltas:
            return False
        period = 0
        while True:
            try:
                period = deltas.index(deltas[0], period + 1, PERIOD_MOST + 1)
            except ValueError:
                return False
            span = period * CONFIRM - 1
            if len(deltas) < period + span or deltas[:span] != deltas[period : period + span]:
                continue
            stride = sum(deltas[:period])
            if stride:  # a reader reading the same ranges over again needs nothing ahead
                self.period, self.stride, self._asked = period, stride, self._seen
                return True

    def _ahead(self) -> list[tuple[int, int]]:
        """The ranges of the pattern up to ``depth`` strides past the reader, from the
        first not asked for yet; the pattern ends where a range would leave the file."""
        period, recent, seen = self.period, self._recent, self._seen
        step = sum(end - offset for offset, end in itertools.islice(reversed(recent), period))
        depth = min(self.most, max(self.least, math.ceil(self._depth_bytes / max(step, 1))))
        target = seen + depth * period
        ranges = []
        for n in range(max(self._asked, seen) + 1, target + 1):
            strides = -(-(n - seen) // period)
            offset, end = recent[n - strides * period - seen - 1]
            offset, end = offset + strides * self.stride, end + strides * self.stride
            if not 0 <= offset < self.size:
                self._asked = sys.maxsize  # the reader leaves the file: nothing more
                return ranges
            ranges.append((offset, min(end, self.size)))
        self._asked = max(self._asked, target)
        return ranges
