"""Several processes write interleaved, disjoint pieces of the same chunks at once.

Process ``i`` of ``k`` writes every run ``r`` with ``r % k == i`` (runs of a few elements,
or of an odd number of bytes, so that processes share chunks, pages and, in the byte case,
elements), in its own random order, with fsyncs sprinkled in, while idle write-backs run
every 0.1 s. Afterwards zarr-python must read the store as the combination of all writes:
no update lost to a read-modify-write race.
"""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest
from helpers import rw_tools
from helpers.rw_tools import SPECS, assert_store_equals

pytestmark = pytest.mark.mount

PROCESSES = 4


def _runs(size: int, run: int, k: int, i: int) -> list[tuple[int, int]]:
    return [(off, min(run, size - off)) for j, off in enumerate(range(0, size, run)) if j % k == i]


def _run_writers(path: str, target: bytes, run_bytes: int, direct: bool, seed: int) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = []
    for i in range(PROCESSES):
        runs = _runs(len(target), run_bytes, PROCESSES, i)
        p = ctx.Process(
            target=rw_tools.write_runs_worker,
            args=(path, target, runs, seed + i, 25, direct and i % 2 == 1),
        )
        p.start()
        procs.append(p)
    for p in procs:
        p.join(120)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():  # our own child only
            p.kill()
            p.join()
    assert codes == [0] * PROCESSES, f"writer exit codes {codes}"


@pytest.mark.parametrize(
    "name,unit",
    [("v2f", "elements"), ("sharded", "elements"), ("v3", "bytes"), ("sharded", "bytes")],
)
def test_interleaved_writers_lose_no_update(tmp_path, name, unit):
    rng = np.random.default_rng(21)
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=rng)
    isz = store.dtype().itemsize
    size = store.read_bytes().size
    target = rng.integers(0, 256, size, dtype=np.uint8)
    # elements: runs of 3 elements; bytes: runs of 5 bytes, so neighbours share elements
    run_bytes = 3 * isz if unit == "elements" else 5
    with rw_tools.rw_mount(store, ["writeback_delay=0"], tag="rwconc") as m:
        _run_writers(m.p(name), target.tobytes(), run_bytes, direct=True, seed=100)
        m.assert_alive()
        # read-after-write through the mount (daemon, not page cache: O_DIRECT)
        fd = os.open(m.p(name), os.O_RDONLY | os.O_DIRECT)
        try:
            got = rw_tools.pread_all(fd, size, 0)
        finally:
            os.close(fd)
        rw_tools.assert_bytes_match(got, target, 0, "whole file through the mount")
        assert_store_equals(store, target, "mounted, after the writers closed their files")
    assert_store_equals(store, target, "after unmount")


def test_interleaved_writers_second_pass_over_existing_data(tmp_path):
    """A second round of writers over data the first round stored (read-modify-write of
    chunks that exist), with a tiny cache so chunks are evicted and reloaded meanwhile."""
    name = "sharded"
    rng = np.random.default_rng(22)
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=rng, initial="full")
    size = store.read_bytes().size
    first = rng.integers(0, 256, size, dtype=np.uint8)
    second = first.copy()
    # The second round rewrites only half the runs (the others must keep ``first``).
    run = 13
    for j, off in enumerate(range(0, size, run)):
        if j % 2 == 0:
            second[off : off + run] = rng.integers(0, 256, len(second[off : off + run]))
    with rw_tools.rw_mount(store, ["writeback_delay=0", "cache_size=8K"], tag="rwconc") as m:
        _run_writers(m.p(name), first.tobytes(), run, direct=False, seed=200)
        assert_store_equals(store, first, "after the first round")
        ctx = multiprocessing.get_context("fork")
        procs = []
        for i in range(PROCESSES):
            runs = [r for r in _runs(size, run, PROCESSES * 2, 2 * i)]
            runs += _runs(size, run, PROCESSES * 2, 2 * i + 1)
            runs = [(o, n) for o, n in runs if (o // run) % 2 == 0]
            p = ctx.Process(
                target=rw_tools.write_runs_worker,
                args=(m.p(name), second.tobytes(), runs, 300 + i, 10, i % 2 == 0),
            )
            p.start()
            procs.append(p)
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * PROCESSES
        m.assert_alive()
    assert_store_equals(store, second, "after the second round and unmount")
