"""The many-readers case of scripts/bench --more (``--cases readers``, issue #30): eight
processes reading eight different arrays of one mount at once, against one of them alone.

Eight 256 MiB float32 arrays (v2 blosc-lz4, 4 MiB chunks, written by zarr-python) in one
store. From a fresh mount and a cold start each time (scripts/_bench.py): one process reads
one array (``dd``-like 1 MiB reads), then eight processes read the eight arrays at once.
What one reader gets from the cores it keeps busy (the daemon's and the reader's CPU
seconds over the wall time) is the single reader's throughput per core; eight readers,
who can keep every core this process may use busy, should get at least 0.9x that per
core times those cores.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _bench_data as d
import _bench_sys as b
import numcodecs
import zarr

ARRAYS, ROWS = 8, 4096  # 4096 x 16384 float32: 256 MiB each
READ = (
    "import os, sys, mmap; fd = os.open(sys.argv[1], os.O_RDONLY); buf = mmap.mmap(-1, 1 << 20)\n"
    "while os.readv(fd, [buf]): pass"
)


def _write(store: Path) -> None:
    group = zarr.open_group(str(store), mode="w", zarr_format=2)
    lz4 = numcodecs.get_codec(d.LZ4)
    for k in range(ARRAYS):
        arr = group.create_array(
            f"a{k}", shape=(ROWS, d.NCOLS), chunks=d.CHUNKS, dtype=d.DTYPE, compressors=lz4
        )
        for r0 in range(0, ROWS, d.CHUNKS[0]):
            first = r0 + k * ROWS  # every array holds other rows of the field
            arr[r0 : r0 + d.CHUNKS[0]] = d.generate_block(first, first + d.CHUNKS[0])


def ensure(work: Path) -> Path:
    store = work / f"readers_{ARRAYS}x{ROWS}_v{d.DATA_VERSION}.zarr"
    return d.kept(store, {"arrays": ARRAYS, "rows": ROWS}, _write)


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _read_all(paths: list[Path], pid: int | None) -> tuple[float, float]:
    """Read ``paths`` at once, a process each: the wall seconds and the CPU seconds of the
    daemon and the readers together."""
    c0, d0, t0 = _children_cpu(), b.cpu_seconds(pid) or 0.0, time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", READ, str(p)]) for p in paths]
    if any(p.wait() != 0 for p in procs):
        raise b.BenchError("a reader failed")
    wall = time.perf_counter() - t0
    cpu = (_children_cpu() - c0) + ((b.cpu_seconds(pid) or 0.0) - d0)
    return wall, cpu


def run(args, work: Path) -> list[str]:
    store = ensure(work)
    mnt, log = work / "mnt", work / "zarrmount.log"
    nbytes = ROWS * d.NCOLS * d.DTYPE.itemsize
    cores = len(os.sched_getaffinity(0))
    got: dict[str, list[float]] = {"one": [], "one_cores": [], "all": [], "all_cores": []}
    for rep in range(args.reps):
        b.log(f" repetition {rep + 1}/{args.reps}")
        for which in ("one", "all") if rep % 2 == 0 else ("all", "one"):
            with b.Mount(args.zarrmount, store, mnt, log, []) as m:
                paths = [mnt / f"a{k}" for k in range(ARRAYS if which == "all" else 1)]
                b.cold_start(store)
                wall, cpu = _read_all(paths, m.pid)
            gbps = len(paths) * nbytes / wall / 1e9
            got[which].append(gbps)
            got[which + "_cores"].append(cpu / wall)
            b.log(f"  {len(paths)} reader(s)  {gbps:6.3f} GB/s  {cpu / wall:4.2f} cores busy")
    med = {k: statistics.median(v) for k, v in got.items()}
    per_core = med["one"] / med["one_cores"]
    want = 0.9 * per_core * cores
    verdict = "ok  " if med["all"] >= want else "MISS"
    return [
        f"{ARRAYS} readers of {ARRAYS} arrays at once against one alone (medians, {cores} cores)",
        f"  one reader   {med['one']:.3f} GB/s with {med['one_cores']:.2f} cores busy "
        f"({per_core:.3f} GB/s per core)",
        f"  {verdict} {ARRAYS} readers {med['all']:.3f} GB/s with {med['all_cores']:.2f} cores busy"
        f" (>= 0.9 x per core x {cores} cores = {want:.3f})",
    ]
