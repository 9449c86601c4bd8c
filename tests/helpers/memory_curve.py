"""A daemon's memory over a long run: its resident set and what Python traces, sampled
together, the slope of the resident set once the caches have filled, the allocation sites
that grew, and a picture of it all.

The resident set of a busy daemon swings by tens of MiB within seconds (buffers in flight,
freed memory given back every 10 s), so a sample's figure is the mean of the readings of
its window, one a second (:meth:`Curve.watch`); its lowest and highest are kept too.

The sites come from the daemon itself (``PYTHONTRACEMALLOC=1`` in its environment, its
root's ``user.zarrmount.heap`` attribute): the lines holding most of the traced memory.
They are marked now and then, not at each sample: a snapshot of a busy daemon's traces
(some 400,000 of them) lifts its resident set by 30-40 MiB for a sample and leaves up to
10 MiB of it for good (its blocks among long-lived ones), so taken every 10 s the
snapshots alone made a flat daemon's curve climb 6 MiB per 10 minutes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from helpers import rw_tools
from helpers.mounting import process_memory

MIB = 1 << 20
HEAP_XATTR = "user.zarrmount.heap"
TRACING = {"PYTHONTRACEMALLOC": "1"}  # the environment of a daemon that reports its sites
LABELS = {"heap": "malloc in use", "traced": "Python traced"}


@dataclass
class Sample:
    seconds: float  # since the curve began
    rss: float  # bytes, the mean of the window's readings
    rss_low: int  # the window's lowest reading
    rss_high: int  # and its highest
    traced: int  # bytes Python traces
    heap: int  # bytes malloc has handed out


Sites = dict[str, tuple[int, int]]  # file:line -> (bytes, blocks)


@dataclass
class Curve:
    """One daemon's samples."""

    name: str
    pid: int
    mountpoint: str
    start: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    marks: dict[float, Sites] = field(default_factory=dict)  # seconds -> the sites then
    _window: list[int] = field(default_factory=list)  # readings since the last sample

    def read_rss(self) -> None:
        self._window.append(process_memory(self.pid, "VmRSS"))

    def sample(self) -> Sample:
        """Close the window: its resident set, and what the daemon says of its heap."""
        window, self._window = self._window, []
        window = window or [process_memory(self.pid, "VmRSS")]
        stats = rw_tools.stats(self.mountpoint)
        found = Sample(
            time.monotonic() - self.start,
            sum(window) / len(window),
            min(window),
            max(window),
            stats["memory_python_traced_bytes"],
            stats["memory_heap_bytes"],
        )
        self.samples.append(found)
        return found

    def mark(self) -> None:
        """The allocation sites now (a snapshot of the daemon's traces: seconds)."""
        sites = json.loads(os.getxattr(self.mountpoint, HEAP_XATTR))
        seconds = time.monotonic() - self.start
        self.marks[seconds] = {s["site"]: (s["bytes"], s["blocks"]) for s in sites}

    def _tail(self) -> list[Sample]:
        """The last two thirds: the first third fills the caches."""
        cut = self.samples[-1].seconds / 3
        return [s for s in self.samples if s.seconds >= cut]

    def slope(self) -> float:
        """The resident set's least-squares slope over the last two thirds, MiB per 10 min."""
        tail = self._tail()
        t = np.array([s.seconds for s in tail])
        rss = np.array([s.rss for s in tail], dtype=float)
        return float(np.polyfit(t, rss, 1)[0]) * 600 / MIB

    def growth(self, top: int = 10) -> list[tuple[str, int, int]]:
        """The sites that grew most from the last mark before the last two thirds to the
        last mark: (site, bytes, blocks)."""
        cut = self._tail()[0].seconds
        first = self.marks[max((t for t in self.marks if t <= cut), default=min(self.marks))]
        last = self.marks[max(self.marks)]
        grown = [
            (site, size - first.get(site, (0, 0))[0], blocks - first.get(site, (0, 0))[1])
            for site, (size, blocks) in last.items()
        ]
        return sorted(grown, key=lambda g: -g[1])[:top]

    def largest(self, top: int = 10) -> list[tuple[str, int, int]]:
        """The sites holding most at the last mark: (site, bytes, blocks)."""
        last = self.marks[max(self.marks)]
        return [(site, *last[site]) for site in sorted(last, key=lambda k: -last[k][0])[:top]]

    def report(self) -> str:
        lines = [
            f"{self.name}: RSS {self.samples[0].rss / MIB:.0f} -> {self.samples[-1].rss / MIB:.0f}"
            f" MiB over {self.samples[-1].seconds:.0f} s ({len(self.samples)} samples), slope"
            f" over the last two thirds {self.slope():+.2f} MiB per 10 min; Python traced"
            f" {self.samples[0].traced / MIB:.1f} -> {self.samples[-1].traced / MIB:.1f} MiB,"
            f" malloc in use {self.samples[0].heap / MIB:.1f} -> {self.samples[-1].heap / MIB:.1f}"
            " MiB",
            f"  sites marked at {', '.join(f'{t:.0f}' for t in self.marks)} s;"
            " grew most over the last two thirds:",
            *(f"    {b / 1024:+9.1f} KiB {n:+7d} blocks  {s}" for s, b, n in self.growth()),
            "  largest at the end:",
            *(f"    {b / 1024:9.1f} KiB {n:7d} blocks  {s}" for s, b, n in self.largest()),
        ]
        return "\n".join(lines)


@contextmanager
def watch(curves: list[Curve], every: float = 1.0) -> Iterator[None]:
    """Read each daemon's resident set every ``every`` seconds in a thread, meanwhile."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            for curve in curves:
                curve.read_rss()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def plot(curves: list[Curve], path: Path) -> None:
    """Each daemon's resident set and traced Python heap against time (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    for curve in curves:
        minutes = [s.seconds / 60 for s in curve.samples]
        line = ax.plot(minutes, [s.rss / MIB for s in curve.samples], label=f"{curve.name} RSS")
        low, high = ([getattr(s, k) / MIB for s in curve.samples] for k in ("rss_low", "rss_high"))
        ax.fill_between(minutes, low, high, color=line[0].get_color(), alpha=0.2, linewidth=0)
        for what, style in (("heap", "-."), ("traced", ":")):
            ax.plot(
                minutes,
                [getattr(s, what) / MIB for s in curve.samples],
                linestyle=style,
                color=line[0].get_color(),
                label=f"{curve.name} {LABELS[what]}",
            )
    for seconds in curves[0].marks:  # where the sites were marked
        ax.axvline(seconds / 60, color="grey", linewidth=0.5, linestyle=":")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    ax.set_title("daemon memory under the soak, a reload every 10 s", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
