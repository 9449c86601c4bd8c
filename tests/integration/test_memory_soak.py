"""Memory soak: the workload of the rw soak (writers, readers, a shared mmap, and clients
that open, read, close and list over and over) on a v2 and a v3 mount at once, each
reloaded with SIGHUP every 10 s; every 10 s each daemon's resident set (the mean of a
reading each second), the bytes Python traces and malloc's bytes in use are sampled, and
the allocation sites Python traces are marked before the last two thirds and at the end.

It fails on an error or a wrong byte, and, once the run is long enough for the caches to
have filled in its first third (``SLOPE_FROM_S``), when a daemon's resident set still
grows over the last two thirds by more than 1 MiB per 10 minutes. It prints each curve,
the sites that grew and the largest ones. ``ZARRMOUNT_SOAK_S`` sets its seconds (default
40: the whole machinery, no slope); ``scripts/soak`` runs it for 30 minutes and draws the
curves (``ZARRMOUNT_SOAK_PLOT``: a PNG file).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import memory_curve, rw_tools, soak
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount

MIB = 1 << 20
SOAK_S = float(os.environ.get("ZARRMOUNT_SOAK_S", "40"))
PLOT = os.environ.get("ZARRMOUNT_SOAK_PLOT")
EVERY_S = 10.0  # a reload and a sample of each daemon
MARK_BEFORE_S = 3 * EVERY_S
SLOPE_FROM_S = 600.0  # shorter runs see the caches filling, not a plateau
BOUND = 1.0  # MiB per 10 minutes
MOUNTS = soak.mounts(32 * MIB)


def _reload_and_sample(curves: list[memory_curve.Curve], until: float) -> None:
    """On each tick of ``EVERY_S`` until ``until``: SIGHUP each daemon, then sample them
    at once; mark their allocation sites once, ``MARK_BEFORE_S`` before the last two
    thirds begin, so that what the snapshot lifts falls outside the slope's window."""
    tick = time.monotonic()
    mark: float | None = tick + (until - tick) / 3 - MARK_BEFORE_S
    with ThreadPoolExecutor(len(curves)) as pool:
        while (tick := tick + EVERY_S) < until:
            time.sleep(max(0.0, tick - time.monotonic()))
            for curve in curves:
                os.kill(curve.pid, signal.SIGHUP)
            list(pool.map(memory_curve.Curve.sample, curves))
            if mark is not None and time.monotonic() >= mark:
                list(pool.map(memory_curve.Curve.mark, curves))
                mark = None
            while tick + EVERY_S < time.monotonic():  # a tick missed while marking
                tick += EVERY_S


def test_memory_stays_flat_under_load_with_reloads(tmp_path):
    stores = soak.make_stores(tmp_path, MOUNTS)
    targets = [
        soak.Target(s.name, s.read_bytes(), writers=3, openers=1)
        for ss in stores.values()
        for s in ss
    ]
    with contextlib.ExitStack() as stack:
        paths, curves = {}, []
        for mount, (cache, delay, _arrays) in MOUNTS.items():
            options = [f"cache_size={cache // 1024}K", f"writeback_delay={delay}"]
            m = stack.enter_context(
                rw_tools.rw_mount(
                    stores[mount][0].root, options, tag=f"msoak-{mount}", env=memory_curve.TRACING
                )
            )
            paths.update({s.name: m.p(s.name) for s in stores[mount]})
            curves.append(memory_curve.Curve(mount, m.proc.pid, m.path))
        for curve in curves:
            curve.sample()
        with soak.Crew(targets, seed=7) as crew, memory_curve.watch(curves):
            report = crew.open(paths)
            report.add(crew.run(SOAK_S, lambda until: _reload_and_sample(curves, until)))
            for curve in curves:  # after the last sample: the sites at the end
                curve.mark()
            report.add(crew.close())
    for mount, ss in stores.items():  # the mounts are gone: every byte stored
        for s in ss:
            assert_store_equals(s, next(t for t in targets if t.name == s.name).model(), mount)
    print(f"\nmemory soak: {report.ops} operations, {report.verified / MIB:.0f} MiB verified")
    for curve in curves:
        print(curve.report())
    if PLOT:
        memory_curve.plot(curves, Path(PLOT))
    assert not report.errors, f"{len(report.errors)} operations failed: {report.errors[:10]}"
    assert report.slowest < soak.SLOW_S, f"an operation took {report.slowest:.1f} s"
    if SOAK_S >= SLOPE_FROM_S:
        slopes = {curve.name: round(curve.slope(), 2) for curve in curves}
        assert max(slopes.values()) <= BOUND, f"RSS grows, MiB per 10 min: {slopes}"
