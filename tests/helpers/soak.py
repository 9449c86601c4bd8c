"""A soak workload on ``rw`` mounts: concurrent writers, readers and a shared mmap scanner.

Each array file is cut into a written part (its first three quarters, in stripes, each
owned by one writer) and a never-written part (the rest). Stripe edges fall inside chunks,
so writers share chunks with each other and with the never-written part. The oracles are
never zarrmount: readers and the scanner compare the never-written part with zarr-python's
reading of the store before the mount; each writer keeps a NumPy model of its stripes,
reads back what it wrote, and hands the model back, so that zarr-python can check the store
against the combined model once the mount is gone.

A :class:`Crew` keeps the workers in processes of their own that outlive a mount: between
runs they wait with their files open, as a paused program does, so a daemon can be killed
under them; then they reopen their files on a new mount and go on with the same models.
*Tolerant* workers (for a store with faults injected) take EIO as the injected fault it may
be: a read that fails is counted and skipped, a write that fails is done again until it
succeeds (the model holds acknowledged writes only), a failed fsync is counted (the next
one tries again). A read that returns wrong bytes is an error all the same.
"""

from __future__ import annotations

import contextlib
import errno
import math
import mmap
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import zarr

from helpers import rw_tools
from helpers.rw_tools import assert_store_equals, pread_all, pwrite_all, v2_spec, v3_spec

# The arrays soaked, by mount: a v2 one, and v3 ones (sharded with blosc; gzip).
ARRAYS = {
    "v2": {"zstd": v2_spec((1500, 5000), (100, 300), ">i4", fill_value=7)},
    "v3": {
        "sharded-blosc": v3_spec(
            (4000, 4000),
            (100, 100),
            "<u2",
            fill_value=3,
            shards=(400, 800),
            compressor=zarr.codecs.BloscCodec(cname="lz4"),
        ),
        "gzip": v3_spec((800, 5000), (64, 500), "<i8", compressor=zarr.codecs.GzipCodec(level=1)),
    },
}


MIB = 1 << 20
MAX_WRITE = 300_000
SLOW_S = 30.0  # no single operation may take longer
FSYNC_EVERY = 50
RETRY_S = 0.02  # pause before a write an injected fault failed is done again


@dataclass
class Report:
    """What one worker (or all of them) did."""

    ops: int = 0
    verified: int = 0  # bytes read and checked against a model
    errors: list[str] = field(default_factory=list)
    slowest: float = 0.0  # seconds, the longest single operation
    faulted: int = 0  # calls failed as an injected fault may fail them (EIO), tolerated
    done: dict[str, int] = field(default_factory=dict)  # succeeded, by kind ("pwrite"...)
    slowest_of: dict[str, float] = field(default_factory=dict)  # seconds, by kind

    def add(self, other: Report) -> None:
        self.ops += other.ops
        self.verified += other.verified
        self.errors += other.errors
        self.slowest = max(self.slowest, other.slowest)
        self.faulted += other.faulted
        for kind, n in other.done.items():
            self.done[kind] = self.done.get(kind, 0) + n
        for kind, s in other.slowest_of.items():
            self.slowest_of[kind] = max(self.slowest_of.get(kind, 0.0), s)

    @contextmanager
    def op(self, what: str, tolerated: Collection[int] = ()) -> Iterator[None]:
        """Time one operation; an OSError is recorded (only counted when its errno is
        ``tolerated``), not raised. One that succeeds is counted by its kind, the first word
        of ``what``."""
        t0 = time.monotonic()
        try:
            yield
        except OSError as e:
            if e.errno in tolerated:
                self.faulted += 1
            else:
                self.errors.append(f"{what}: {e}")
        else:
            kind = what.split(" ", 1)[0]
            self.done[kind] = self.done.get(kind, 0) + 1
            self.slowest_of[kind] = max(self.slowest_of.get(kind, 0.0), time.monotonic() - t0)
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


class Worker:
    """One worker: opens its file, runs operations until a given time, closes it."""

    flags = os.O_RDONLY

    def __init__(self, seed: int, tolerant: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.report = Report()
        self.faults = (errno.EIO,) if tolerant else ()  # what an injected fault may cause
        self.fd: int | None = None

    def open(self, path: str) -> None:
        self.fd = os.open(path, self.flags)

    def close(self, dead: bool = False) -> None:
        """Close the file (``dead``: its daemon was killed, so closing it fails)."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        if dead:
            with contextlib.suppress(OSError):
                os.close(fd)
            return
        with self.report.op("close", self.faults):
            os.close(fd)

    def reopen(self, path: str, dead: bool = False) -> None:
        self.close(dead)
        self.open(path)

    def run(self, until: float) -> None:
        while time.monotonic() < until:
            self.step()

    def step(self) -> None:
        raise NotImplementedError

    def answer(self) -> tuple[Report, Any]:
        """The report since the last answer, and what else the parent keeps (a model)."""
        report, self.report = self.report, Report()
        return report, None


class Writer(Worker):
    """Random writes into its own stripes (``parts``: start -> current bytes, its model),
    each read back now and then; fsync every ``FSYNC_EVERY`` writes."""

    flags = os.O_RDWR

    def __init__(self, parts: dict[int, np.ndarray], seed: int, tolerant: bool = False):
        super().__init__(seed, tolerant)
        self.parts = parts
        self.starts = sorted(parts)
        self.writes = 0

    def step(self) -> None:
        rng, report, fd = self.rng, self.report, self.fd
        start = self.starts[int(rng.integers(len(self.starts)))]
        model = self.parts[start]
        off, n = _span(rng, start, start + model.size, MAX_WRITE)
        data = rng.integers(0, 256, n, dtype=np.uint8)
        with report.op(f"pwrite {n} at {off}"):
            self._until_done(lambda: pwrite_all(fd, data.tobytes(), off))
            model[off - start : off - start + n] = data
        self.writes += 1
        if self.writes % 4 == 0:
            off, n = _span(rng, start, start + model.size, MAX_WRITE)
            with report.op(f"pread {n} at {off}", self.faults):
                got = pread_all(fd, n, off)
                report.check(got, model[off - start : off - start + n], f"own {off}+{n}")
        if self.writes % FSYNC_EVERY == 0:
            with report.op("fsync", self.faults):
                os.fsync(fd)

    def _until_done(self, write: Callable[[], None]) -> None:
        """``write()``, done again while an injected fault fails it (each failure
        counted), so that it is acknowledged before the model takes it; a failure
        ``SLOW_S`` after the first is raised."""
        give_up = time.monotonic() + SLOW_S
        while True:
            try:
                return write()
            except OSError as e:
                if e.errno not in self.faults or time.monotonic() > give_up:
                    raise
                self.report.faulted += 1
                time.sleep(RETRY_S)

    def answer(self) -> tuple[Report, Any]:
        return super().answer()[0], self.parts


class Reader(Worker):
    """Random reads of the never-written part, checked against zarr-python's bytes."""

    def __init__(self, initial: np.ndarray, seed: int, tolerant: bool = False):
        super().__init__(seed, tolerant)
        self.initial = initial

    def step(self) -> None:
        off, n = _span(self.rng, self.initial.size * 3 // 4, self.initial.size, 1 << 20)
        with self.report.op(f"pread {n} at {off}", self.faults):
            self.report.check(pread_all(self.fd, n, off), self.initial[off : off + n], f"{off}+{n}")


class Scanner(Reader):
    """A shared read-only mapping of the whole file; compares windows of the never-written
    part (page faults go through the kernel's page cache to the daemon). A tolerant scanner
    has the kernel copy each window (into a memfd): a page the daemon fails to read is then
    EFAULT, counted as EIO, where Python touching it would die of SIGBUS."""

    map: mmap.mmap | None = None
    sink: int | None = None

    def open(self, path: str) -> None:
        super().open(path)
        self.map = mmap.mmap(self.fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
        if self.faults and self.sink is None:
            self.sink = os.memfd_create("soak-scanner")

    def close(self, dead: bool = False) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        super().close(dead)

    def step(self) -> None:
        off, n = _span(self.rng, self.initial.size * 3 // 4, self.initial.size, 4 << 20)
        with self.report.op(f"mmap read {n} at {off}", self.faults):
            self.report.check(self._window(off, n), self.initial[off : off + n], f"mmap {off}+{n}")

    def _window(self, off: int, n: int) -> bytes:
        if self.sink is None:
            return self.map[off : off + n]
        with memoryview(self.map) as whole, whole[off : off + n] as view:
            try:
                done = os.pwrite(self.sink, view, 0)
            except OSError as e:
                if e.errno != errno.EFAULT:
                    raise
                done = -1
        if done != n:
            raise OSError(errno.EIO, f"a page of the mapping could not be read ({done} of {n})")
        return os.pread(self.sink, n, 0)


class Opener(Reader):
    """A server's short-lived clients: opens the file, reads a little of the never-written
    part, closes it and lists its directory, over and over."""

    path = ""

    def open(self, path: str) -> None:
        super().open(path)
        self.path = path

    def step(self) -> None:
        off, n = _span(self.rng, self.initial.size * 3 // 4, self.initial.size, 1 << 16)
        with self.report.op(f"open, pread {n} at {off}, close", self.faults):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                got = pread_all(fd, n, off)
            finally:
                os.close(fd)
            self.report.check(got, self.initial[off : off + n], f"opened {off}+{n}")
            os.listdir(os.path.dirname(self.path))


@dataclass
class Target:
    """One array file of the workload, with the writers' models between phases."""

    name: str  # unique file name
    initial: np.ndarray  # zarr-python's bytes before any mount
    writers: int
    readers: int = 1
    scanners: int = 1
    openers: int = 0
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

    def workers(self, seed: int, tolerant: bool) -> list[tuple[Worker, int | None]]:
        """Its workers, each with its index in ``parts`` (writers) or None."""
        found: list[tuple[Worker, int | None]] = [
            (Writer(parts, seed + i, tolerant), i) for i, parts in enumerate(self.parts)
        ]
        found += [
            (Reader(self.initial, seed + 100 + i, tolerant), None) for i in range(self.readers)
        ]
        found += [
            (Scanner(self.initial, seed + 200 + i, tolerant), None) for i in range(self.scanners)
        ]
        found += [
            (Opener(self.initial, seed + 300 + i, tolerant), None) for i in range(self.openers)
        ]
        return found


def _serve(conn: Connection, worker: Worker) -> None:
    """A worker's process: does what the parent says, then answers (``Worker.answer``)."""
    while True:
        command, arg = conn.recv()
        try:
            if command == "open":
                worker.reopen(*arg)
            elif command == "run":
                worker.run(arg)
            else:  # close, end
                worker.close()
        except Exception:  # noqa: BLE001 - the parent's finding, with where it happened
            worker.report.errors.append(f"{command}: {traceback.format_exc(limit=-3)}")
        conn.send(worker.answer())
        if command == "end":
            return


@dataclass
class _Member:
    conn: Connection
    process: multiprocessing.process.BaseProcess
    target: Target
    index: int | None  # of a writer's model in ``target.parts``


class Crew:
    """The workers of ``targets``, each in a process of its own for the crew's life: told to
    open files, run until a time (then wait, files open) and close them."""

    def __init__(self, targets: list[Target], seed: int, tolerant: bool = False) -> None:
        context = multiprocessing.get_context("fork")  # the workers share the models' memory
        self.members: list[_Member] = []
        for t in targets:
            for worker, index in t.workers(seed, tolerant):
                here, there = context.Pipe()
                process = context.Process(target=_serve, args=(there, worker), daemon=True)
                process.start()
                there.close()
                self.members.append(_Member(here, process, t, index))

    def _tell(self, command: Callable[[Target], tuple[str, Any]], timeout: float) -> Report:
        for m in self.members:
            m.conn.send(command(m.target))
        return self._answers(timeout)

    def _answers(self, timeout: float) -> Report:
        """Every worker's answer: their reports summed, the writers' models kept."""
        total, deadline = Report(), time.monotonic() + timeout
        for m in self.members:
            if not m.conn.poll(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"a soak worker did not answer within {timeout:.0f} s")
            report, parts = m.conn.recv()
            total.add(report)
            if m.index is not None:
                m.target.parts[m.index] = parts
        return total

    def open(self, paths: dict[str, str], dead: bool = False) -> Report:
        """Each worker (re)opens its target's file at ``paths[name]``; ``dead``: the files
        open now are on a mount whose daemon was killed."""
        return self._tell(lambda t: ("open", (paths[t.name], dead)), SLOW_S)

    def run(self, seconds: float, during: Callable[[float], None] | None = None) -> Report:
        """Every worker runs for ``seconds``, then waits with its file open; meanwhile
        ``during(until)`` runs here."""
        until = time.monotonic() + seconds
        for m in self.members:
            m.conn.send(("run", until))
        if during is not None:
            during(until)
        return self._answers(until - time.monotonic() + 10 * SLOW_S)

    def close(self) -> Report:
        return self._tell(lambda t: ("close", None), 10 * SLOW_S)

    def __enter__(self) -> Crew:
        return self

    def __exit__(self, kind, *exc) -> None:
        """End the processes: told to, or (after a failure here) killed by their PIDs."""
        try:
            if kind is None:
                self._tell(lambda t: ("end", None), 10 * SLOW_S)
        finally:
            for m in self.members:
                m.process.join(5 if kind is None else 0)
                if m.process.is_alive():
                    m.process.kill()
                    m.process.join(5)
                m.conn.close()


def run_phase(paths: dict[str, str], targets: list[Target], seconds: float, seed: int) -> Report:
    """All the workers of every target for ``seconds``, each in its own process."""
    with Crew(targets, seed) as crew:
        total = crew.open(paths)
        total.add(crew.run(seconds))
        total.add(crew.close())
    return total


def mounts(cache: int) -> dict[str, tuple[int, float, dict]]:
    """The soak's mounts: name -> (cache size, writeback delay, {array name: spec})."""
    return {"v2": (cache, 2, ARRAYS["v2"]), "v3": (cache, 1, ARRAYS["v3"])}


def make_stores(parent, mounts: dict) -> dict[str, list[rw_tools.Store]]:
    """A fresh store per mount of ``mounts`` (:func:`mounts`) under ``parent``, holding its
    arrays as zarr-python writes them."""
    return {
        mount: [
            rw_tools.make_store(parent, name, spec, group=mount) for name, spec in arrays.items()
        ]
        for mount, (_cache, _delay, arrays) in mounts.items()
    }


def run_mounts(
    mounts: dict, stores: dict, phases: int, seconds: float, daemon: dict | None = None, **workers
) -> tuple[Report, dict[str, int]]:
    """Run the workload (``workers``: how many of each kind per array) in ``phases`` mounts
    of ``seconds`` each; returns the report and the peak RSS (bytes) of each daemon,
    checking the store after every phase. ``daemon``: more arguments of each mount
    (``rw_tools.rw_mount``'s, e.g. a ``wrapper`` or ``sidecars``)."""
    targets = {
        s.name: Target(s.name, s.read_bytes(), **workers) for ss in stores.values() for s in ss
    }
    total, peaks = Report(), {mount: 0 for mount in mounts}
    for phase in range(phases):
        with contextlib.ExitStack() as stack:
            paths, samplers = {}, {}
            for mount, (cache, delay, _arrays) in mounts.items():
                options = [f"cache_size={cache // 1024}K", f"writeback_delay={delay}"]
                m = stack.enter_context(
                    rw_tools.rw_mount(
                        stores[mount][0].root, options, tag=f"soak-{mount}", **(daemon or {})
                    )
                )
                samplers[mount] = stack.enter_context(rw_tools.RssSampler(m.proc.pid, 0.05))
                paths.update({s.name: m.p(s.name) for s in stores[mount]})
            report = run_phase(paths, list(targets.values()), seconds, seed=1000 * phase)
        for mount, sampler in samplers.items():  # the mounts are gone: every byte stored
            peaks[mount] = max(peaks[mount], sampler.peak_kib * 1024)
            for s in stores[mount]:
                assert_store_equals(s, targets[s.name].model(), f"after phase {phase + 1}")
        total.add(report)
        print(
            f"\nphase {phase + 1}: {report.ops} operations, {report.verified / MIB:.0f} MiB "
            f"verified, {len(report.errors)} errors, slowest {report.slowest:.2f} s"
        )
    return total, peaks
