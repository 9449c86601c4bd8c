"""Soak: concurrent writers, readers and shared mmap scanners on rw mounts whose caches are
smaller than the data, with a clean remount halfway (``tests/helpers/soak.py``).

At the end zarr-python must read every array equal to the writers' models, no operation
may have failed or taken over 30 s, and each daemon's peak RSS must stay within its cache
budget plus 150 MiB. ``ZARRMOUNT_SOAK_S`` sets the seconds of load (default 100, in two
halves), ``ZARRMOUNT_SOAK_CACHE_MIB`` each mount's cache (default 32, below the data). The
figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os

import pytest
from helpers import soak

pytestmark = pytest.mark.mount

MIB = soak.MIB
HEADROOM = 150 * MIB  # the daemon's memory beyond its cache budget
SOAK_S = float(os.environ.get("ZARRMOUNT_SOAK_S", "100"))
CACHE = int(os.environ.get("ZARRMOUNT_SOAK_CACHE_MIB", "32")) * MIB

MOUNTS = soak.mounts(CACHE)


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
    stores = soak.make_stores(tmp_path, MOUNTS)
    total, peaks = soak.run_mounts(MOUNTS, stores, 2, SOAK_S / 2, writers=3)
    print(
        f"soak: {total.ops} operations, {total.verified / MIB:.0f} MiB verified, "
        f"{len(total.errors)} errors, slowest {total.slowest:.2f} s"
    )
    assert_soak_held(MOUNTS, total, peaks)


def test_writers_on_a_sharded_array_under_pressure_get_no_false_error(tmp_path):
    """Regression: with a small cache and a short writeback_delay, a shard written again
    while pressure wrote it back made a writer's pwrite fail with EIO."""
    mounts = {"v3": (8 * MIB, 0.2, MOUNTS["v3"][2])}
    stores = soak.make_stores(tmp_path, mounts)
    total, peaks = soak.run_mounts(mounts, stores, 1, 30, writers=3, readers=0, scanners=0)
    assert_soak_held(mounts, total, peaks)
