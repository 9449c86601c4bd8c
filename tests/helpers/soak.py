"""A soak workload on ``rw`` mounts: concurrent writers, readers and a shared mmap scanner.

Each array file is cut into a written part (its first three quarters, in stripes, each
owned by one writer) and a never-written part (the rest). Stripe edges fall inside chunks,
so writers share chunks with each other and with the never-written part. The oracles are
never zarrmount: readers and the scanner compare the never-written part with zarr-python's
reading of the store before the mount; each writer keeps a NumPy model of its stripes,
reads back what it wrote, and hands the model back, so that zarr-python can check the store
against the combined model once the mount is gone.
"""

from __future__ import annotations

import concurrent.futures
import math
import mmap
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from helpers.rw_tools import pread_all, pwrite_all

MAX_WRITE = 300_000
SLOW_S = 30.0  # no single operation may take longer
FSYNC_EVERY = 50

# The never-written bytes of every array, by file name: set before the workers fork.
_INITIAL: dict[str, np.ndarray] = {}


@dataclass
class Report:
    """What one worker (or all of them) did."""

    ops: int = 0
    verified: int = 0  # bytes read and checked against a model
    errors: list[str] = field(default_factory=list)
    slowest: float = 0.0  # seconds, the longest single operation

    def add(self, other: Report) -> None:
        self.ops += other.ops
        self.verified += other.verified
        self.errors += other.errors
        self.slowest = max(self.slowest, other.slowest)

    @contextmanager
    def op(self, what: str) -> Iterator[None]:
        """Time one operation; an OSError is recorded, not raised."""
        t0 = time.monotonic()
        try:
            yield
        except OSError as e:
            self.errors.append(f"{what}: {e}")
        finally:
            self.ops += 1
            self.slowest = max(self.slowest, time.monotonic() - t0)

    def check(self, got: bytes, expected: np.ndarray, what: str) -> None:
        if got != expected.tobytes():
            self.errors.append(f"{what}: wrong bytes")
        self.verified += len(got)


def stripes(size: int, writers: int) -> list[list[tuple[int, int]]]:
    """For each writer, its ``(start, end)`` stripes of the written part of ``size`` bytes."""
    n = writers * 4
    bounds = [size * 3 // 4 * j // n for j in range(n + 1)]
    return [[(bounds[j], bounds[j + 1]) for j in range(i, n, writers)] for i in range(writers)]


def _span(rng: np.random.Generator, start: int, end: int, most: int) -> tuple[int, int]:
    """A random ``(offset, length)`` inside ``[start, end)``: 1 byte to ``most``, log-uniform."""
    n = min(int(10 ** rng.uniform(0, math.log10(most))), end - start)
    off = int(rng.integers(start, end - n + 1))
    return off, n


def writer(path: str, parts: dict[int, np.ndarray], seed: int, until: float):
    """Random writes into its own stripes (``parts``: start -> current bytes), each read
    back now and then; fsync every ``FSYNC_EVERY`` writes. Returns the report and model."""
    rng = np.random.default_rng(seed)
    report = Report()
    starts = sorted(parts)
    fd = os.open(path, os.O_RDWR)
    try:
        writes = 0
        while time.monotonic() < until:
            start = starts[int(rng.integers(len(starts)))]
            model = parts[start]
            off, n = _span(rng, start, start + model.size, MAX_WRITE)
            data = rng.integers(0, 256, n, dtype=np.uint8)
            with report.op(f"pwrite {n} at {off}"):
                pwrite_all(fd, data.tobytes(), off)
                model[off - start : off - start + n] = data
            writes += 1
            if writes % 4 == 0:
                off, n = _span(rng, start, start + model.size, MAX_WRITE)
                with report.op(f"pread {n} at {off}"):
                    got = pread_all(fd, n, off)
                    report.check(got, model[off - start : off - start + n], f"own {off}+{n}")
            if writes % FSYNC_EVERY == 0:
                with report.op("fsync"):
                    os.fsync(fd)
    finally:
        with report.op("close"):
            os.close(fd)
    return report, parts


def reader(path: str, seed: int, until: float) -> tuple[Report, None]:
    """Random reads of the never-written part, checked against zarr-python's bytes."""
    rng = np.random.default_rng(seed)
    initial = _INITIAL[os.path.basename(path)]
    low = initial.size * 3 // 4
    report = Report()
    fd = os.open(path, os.O_RDONLY)
    try:
        while time.monotonic() < until:
            off, n = _span(rng, low, initial.size, 1 << 20)
            with report.op(f"pread {n} at {off}"):
                report.check(pread_all(fd, n, off), initial[off : off + n], f"{off}+{n}")
    finally:
        os.close(fd)
    return report, None


def scanner(path: str, seed: int, until: float) -> tuple[Report, None]:
    """A shared read-only mapping of the whole file; compares windows of the never-written
    part (page faults go through the kernel's page cache to the daemon)."""
    rng = np.random.default_rng(seed)
    initial = _INITIAL[os.path.basename(path)]
    low = initial.size * 3 // 4
    report = Report()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ) as m:
        while time.monotonic() < until:
            off, n = _span(rng, low, initial.size, 4 << 20)
            with report.op(f"mmap read {n} at {off}"):
                report.check(m[off : off + n], initial[off : off + n], f"mmap {off}+{n}")
    return report, None


@dataclass
class Target:
    """One array file of the workload, with the writers' models between phases."""

    name: str  # unique file name (the workers find the initial bytes by it)
    initial: np.ndarray  # zarr-python's bytes before any mount
    writers: int
    readers: int = 1
    scanners: int = 1
    parts: list[dict[int, np.ndarray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.parts = [
            {a: self.initial[a:b].copy() for a, b in mine}
            for mine in stripes(self.initial.size, self.writers)
        ]

    def model(self) -> np.ndarray:
        """The bytes the store must hold: the initial bytes with every writer's stripes."""
        out = self.initial.copy()
        for mine in self.parts:
            for start, values in mine.items():
                out[start : start + values.size] = values
        return out


def run_phase(paths: dict[str, str], targets: list[Target], seconds: float, seed: int) -> Report:
    """All the workers of every target for ``seconds``, each in its own process."""
    for t in targets:
        _INITIAL[t.name] = t.initial
    until = time.monotonic() + seconds
    jobs: list[tuple[Callable, tuple, Target | None, int]] = []
    for t in targets:
        path = paths[t.name]
        jobs += [(writer, (path, parts, seed + i, until), t, i) for i, parts in enumerate(t.parts)]
        jobs += [(reader, (path, seed + 100 + i, until), None, 0) for i in range(t.readers)]
        jobs += [(scanner, (path, seed + 200 + i, until), None, 0) for i in range(t.scanners)]
    total = Report()
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(len(jobs), mp_context=context) as pool:
        futures = [(pool.submit(fn, *args), t, i) for fn, args, t, i in jobs]
        for future, t, i in futures:
            report, parts = future.result(timeout=seconds + 10 * SLOW_S)
            total.add(report)
            if t is not None:
                t.parts[i] = parts
    return total
