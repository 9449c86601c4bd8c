"""Soak: concurrent writers, readers and shared mmap scanners on rw mounts whose caches are
smaller than the data, with a clean remount halfway (``tests/helpers/soak.py``).

At the end zarr-python must read every array equal to the writers' models, no operation
may have failed or taken over 30 s, and each daemon's peak RSS must stay within its cache
budget plus 150 MiB. ``ZARRMOUNT_SOAK_S`` sets the seconds of load (default 100, in two
halves), ``ZARRMOUNT_SOAK_CACHE_MIB`` each mount's cache (default 32, below the data). The
figures are printed (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import os

import pytest
from helpers import rw_tools, soak
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount

MIB = 1 << 20
HEADROOM = 150 * MIB  # the daemon's memory beyond its cache budget
SOAK_S = float(os.environ.get("ZARRMOUNT_SOAK_S", "100"))
CACHE = int(os.environ.get("ZARRMOUNT_SOAK_CACHE_MIB", "32")) * MIB

# Mount name: (cache size, writeback delay, {array name: spec})
MOUNTS = {"v2": (CACHE, 2, soak.ARRAYS["v2"]), "v3": (CACHE, 1, soak.ARRAYS["v3"])}


def make_stores(tmp_path, mounts: dict) -> dict[str, list[rw_tools.Store]]:
    stores = {}
    for mount, (_cache, _delay, arrays) in mounts.items():
        stores[mount] = [
            rw_tools.make_store(tmp_path, name, spec, group=mount) for name, spec in arrays.items()
        ]
    return stores


def soak_mounts(mounts: dict, stores: dict, phases: int, seconds: float, **workers):
    """Run the workload (``workers``: how many of each kind per array) in ``phases`` mounts
    of ``seconds`` each; returns the report and the peak RSS (bytes) of each daemon,
    checking the store after every phase."""
    targets = {
        s.name: soak.Target(s.name, s.read_bytes(), **workers) for ss in stores.values() for s in ss
    }
    total, peaks = soak.Report(), {mount: 0 for mount in mounts}
    for phase in range(phases):
        with contextlib.ExitStack() as stack:
            paths, samplers = {}, {}
            for mount, (cache, delay, _arrays) in mounts.items():
                options = [f"cache_size={cache // 1024}K", f"writeback_delay={delay}"]
                m = stack.enter_context(
                    rw_tools.rw_mount(stores[mount][0].root, options, tag=f"soak-{mount}")
                )
                samplers[mount] = stack.enter_context(rw_tools.RssSampler(m.proc.pid, 0.05))
                paths.update({s.name: m.p(s.name) for s in stores[mount]})
            report = soak.run_phase(paths, list(targets.values()), seconds, seed=1000 * phase)
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


def assert_soak_held(mounts: dict, total: soak.Report, peaks: dict) -> None:
    for mount, peak in peaks.items():
        cache = mounts[mount][0]
        print(f"daemon {mount}: peak RSS {peak / MIB:.0f} MiB, cache_size {cache / MIB:.0f} MiB")
    assert not total.errors, f"{len(total.errors)} operations failed: {total.errors[:10]}"
    assert total.slowest < soak.SLOW_S, f"an operation took {total.slowest:.1f} s"
    assert total.verified > 0 and total.ops > 0
    for mount, peak in peaks.items():
        budget = mounts[mount][0] + HEADROOM
        assert peak <= budget, f"{mount}: peak RSS {peak / MIB:.0f} MiB > {budget / MIB:.0f}"


def test_soak_concurrent_writers_readers_mmap_and_a_remount(tmp_path):
    stores = make_stores(tmp_path, MOUNTS)
    total, peaks = soak_mounts(MOUNTS, stores, 2, SOAK_S / 2, writers=3)
    print(
        f"soak: {total.ops} operations, {total.verified / MIB:.0f} MiB verified, "
        f"{len(total.errors)} errors, slowest {total.slowest:.2f} s"
    )
    assert_soak_held(MOUNTS, total, peaks)


def test_writers_on_a_sharded_array_under_pressure_get_no_false_error(tmp_path):
    """Regression: with a small cache and a short writeback_delay, a shard written again
    while pressure wrote it back made a writer's pwrite fail with EIO."""
    mounts = {"v3": (8 * MIB, 0.2, MOUNTS["v3"][2])}
    stores = make_stores(tmp_path, mounts)
    total, peaks = soak_mounts(mounts, stores, 1, 30, writers=3, readers=0, scanners=0)
    assert_soak_held(mounts, total, peaks)
