"""The hierarchy case of scripts/bench --more (``--cases tree``, issue #30): a store of
10,000 small arrays in 100 groups (v3, written by zarr-python), and what it costs to see
it whole.

* mount + a first ``ls -lR`` against zarr-python walking ``members(max_depth=None)`` and
  reading each array's shape and dtype (open and walk timed in a fresh process), both from
  a cold start (page cache dropped, the store's files read back in): target <= 0.3x;
* a second ``ls -lR`` of the same mount against a warm ``ls -lR`` of the store's own
  directory tree: target <= 2x;
* the daemon's peak RSS: target < 200 MiB.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import _bench_data as d
import _bench_sys as b
import zarr

GROUPS, PER_GROUP = 100, 100
DATA_VERSION = 1
WALK = (
    "import sys, time, zarr; t = time.perf_counter(); g = zarr.open_group(sys.argv[1], mode='r'); "
    "n = sum(1 for _, a in g.members(max_depth=None) if isinstance(a, zarr.Array) "
    "and a.shape is not None and a.dtype is not None); print(time.perf_counter() - t, n)"
)


def _write(store: Path) -> None:
    root = zarr.open_group(str(store), mode="w")
    for g in range(GROUPS):
        group = root.create_group(f"g{g:03d}")
        for a in range(PER_GROUP):
            group.create_array(f"a{a:03d}", shape=(16, 16), chunks=(16, 16), dtype="<i2")


def _ensure(work: Path) -> Path:
    store = work / f"tree_{GROUPS}x{PER_GROUP}_v{DATA_VERSION}.zarr"
    return d.kept(store, {"groups": GROUPS, "per_group": PER_GROUP}, _write)


def _ls(path: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(["ls", "-lR", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise b.BenchError(f"ls -lR {path} exited {r.returncode}: {r.stderr.decode().strip()}")
    return time.perf_counter() - t0


def _walk(store: Path) -> float:
    r = subprocess.run([sys.executable, "-c", WALK, str(store)], capture_output=True, text=True)
    if r.returncode != 0:
        raise b.BenchError(f"zarr-python walk failed: {r.stderr.strip()}")
    seconds, count = r.stdout.split()
    if int(count) != GROUPS * PER_GROUP:
        raise b.BenchError(f"zarr-python found {count} arrays")
    return float(seconds)


def run(args, work: Path) -> list[str]:
    store = _ensure(work)
    mnt, log = work / "mnt", work / "zarrmount.log"
    got: dict[str, list[float]] = {}

    def note(name: str, value: float, unit: str = "s") -> None:
        got.setdefault(name, []).append(value)
        b.log(f"  {name:<28} {value:8.3f} {unit}")

    for rep in range(args.reps):
        b.log(f" repetition {rep + 1}/{args.reps}")
        for which in ("zarr", "mount") if rep % 2 == 0 else ("mount", "zarr"):
            b.cold_start(store)
            if which == "zarr":
                note("zarr-python walk", _walk(store))
                continue
            t0 = time.perf_counter()
            with b.Mount(args.zarrmount, store, mnt, log, []) as m:
                _ls(mnt)
                note("mount + first ls -lR", time.perf_counter() - t0)
                note("second ls -lR", _ls(mnt))
                note("daemon peak RSS", b.peak_rss_mib(m.pid) or 0.0, "MiB")
        _ls(store)
        note("warm ls -lR of the store", _ls(store))
    med = {k: statistics.median(v) for k, v in got.items()}
    first, walk = med["mount + first ls -lR"], med["zarr-python walk"]
    second, warm = med["second ls -lR"], med["warm ls -lR of the store"]
    rss = med["daemon peak RSS"]

    def row(met: bool, text: str) -> str:
        return f"  {'ok  ' if met else 'MISS'} {text}"

    return [
        f"hierarchy of {GROUPS * PER_GROUP} arrays in {GROUPS} groups (medians)",
        row(
            first <= 0.3 * walk,
            f"mount + first ls -lR / zarr-python walk {first:.2f} / {walk:.2f} s "
            f"= {first / walk:.2f}x (<= 0.3)",
        ),
        row(
            second <= 2 * warm,
            f"second ls -lR / warm ls -lR of the store {second:.3f} / {warm:.3f} s "
            f"= {second / warm:.2f}x (<= 2)",
        ),
        row(rss < 200, f"daemon peak RSS {rss:.0f} MiB (< 200)"),
    ]
