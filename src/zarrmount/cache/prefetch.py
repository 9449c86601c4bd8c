"""Sequential-reader detection: which byte range to fetch ahead of a reader, if any.

A reader whose requests follow each other (each starts where the last ended) is
sequential after ``STREAK`` such requests; the range ahead of it is then kept loaded up
to ``window`` bytes past its position, topped up in steps of half a window so the work
per request stays small. Any other request (a far seek) starts over.

The window follows the link (``tune``): ``DEPTH`` times what the reader consumes while
one load takes, between ``least`` and ``most``. A fast store keeps few chunks ahead (few
buffers tied up, little fetched in vain when the reader stops); a slow or far one as
many as its latency needs to stay busy. A reader stepping through the file at a constant
stride has its own model (``strides.py``), tuned by the same ``Pace``.
"""

from __future__ import annotations

from typing import Protocol

STREAK = 2
# How many loads' worth of consumption to keep ahead: one in flight while the reader
# consumes another, and as much again for the variation of both.
DEPTH = 2.0


class ReadAhead:
    def __init__(self, size: int, most: int, least: int | None = None) -> None:
        self.size = size
        self.most = most
        self.least = most if least is None else min(least, most)
        self.window = self.least
        self._next = -1  # where the next sequential request would start
        self._streak = 0
        self._ahead = 0  # everything before this offset has been asked for already

    def tune(self, rate: float, latency: float) -> None:
        """The reader consumes ``rate`` bytes a second and a load takes ``latency``
        seconds (as measured lately): keep ``DEPTH`` times their product ahead."""
        self.window = int(min(self.most, max(self.least, DEPTH * rate * latency)))

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


# Pace: moving averages, each new sample weighing this much; a rate is sampled over at
# least INTERVAL_S (single requests come too close together to time).
WEIGHT = 0.25
INTERVAL_S = 0.05


def _average(old: float | None, sample: float) -> float:
    return sample if old is None else old + WEIGHT * (sample - old)


class Tuned(Protocol):
    def tune(self, rate: float, latency: float) -> None: ...


class Pace:
    """What ``ReadAhead.tune`` needs, measured: the bytes a second a reader consumes and
    the seconds a load takes; ``models`` are tuned whenever either average moves. Times
    are the caller's clock, so tests pass their own."""

    def __init__(self, *models: Tuned) -> None:
        self.models = models
        self.rate: float | None = None
        self.latency: float | None = None
        self._since: float | None = None  # start of the interval being measured
        self._bytes = 0  # consumed since then

    def consumed(self, nbytes: int, now: float) -> None:
        if self._since is None:
            self._since = now
        self._bytes += nbytes
        if now - self._since >= INTERVAL_S:
            self.rate = _average(self.rate, self._bytes / (now - self._since))
            self._since, self._bytes = now, 0
            self._tune()

    def loaded(self, seconds: float) -> None:
        self.latency = _average(self.latency, seconds)
        self._tune()

    def _tune(self) -> None:
        if self.rate is not None and self.latency is not None:
            for model in self.models:
                model.tune(self.rate, self.latency)
