"""More cases for scripts/bench (``--more``): a sequential write, reads from S3, GDAL
through the mount against its own Zarr driver (``--cases gdal``, scripts/_bench_gdal.py),
a hierarchy of 10,000 arrays listed (``--cases tree``, scripts/_bench_tree.py), eight
readers at once (``--cases readers``, scripts/_bench_readers.py), a group read as its
netCDF file (``--cases netcdf``, scripts/_bench_netcdf.py) and as its HDF5 file
(``--cases hdf5``, scripts/_bench_hdf5.py), random writes into
shards (``--cases amplification``), the rw soak's write rate against an older commit's
(``--cases soak``, scripts/_bench_soak.py), reads
of an Icechunk repository (``--cases icechunk``), and what a distant store's round trips
cost against zarr-python's (``--cases latency``, scripts/_bench_latency.py); the first two
by default. Exits non-zero
when a case misses its target (a summary line beginning with MISS).

Each case measures the mount and zarr-python on the same data in the same run, alternating
over repetitions, and prints both throughputs and the ratio; the write case measures the
mount twice, without and with the crash journal (``-o journal=none``, ``journal=DIR``), and
gives the journal's cost (throughput and daemon CPU seconds per GB, journal/none). Shares the
helpers of scripts/_bench.py (fresh mounts, dropped page cache, page-aligned reused read
buffer).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench_amplification  # noqa: E402
import _bench_data as d  # noqa: E402
import _bench_gdal  # noqa: E402
import _bench_hdf5  # noqa: E402
import _bench_latency  # noqa: E402
import _bench_netcdf  # noqa: E402
import _bench_readers  # noqa: E402
import _bench_remote  # noqa: E402
import _bench_soak  # noqa: E402
import _bench_sys as b  # noqa: E402
import _bench_tree  # noqa: E402
import _bench_versions  # noqa: E402

NONE, JOURNAL, ZARR = "journal=none", "journal=DIR", "zarr-python"
WRITE_VARIANTS = (NONE, JOURNAL, ZARR)  # this order in even repetitions, reversed in odd
PID_XATTR = "user.zarrmount.pid"
DD_FLAGS = ("conv=notrunc,fsync", "status=none")


def case_write(args: argparse.Namespace, work: Path) -> list[str]:
    """A sequential write of a raw file into a fresh v2 blosc-lz4 array: through the mount
    without and with the crash journal (dd bs=1M + fsync), and by zarr-python (arr[:])."""
    rows = d.rows_for(args.size_gib)
    raw = work / "write-source.f32"
    data = np.concatenate([d.generate_block(r, r + 1024) for r in range(0, rows, 1024)])
    data.tofile(raw)
    dest = work / "write-target.zarr"
    b.log(f"  journal=DIR is {work / 'journal'}")
    gbps: dict[str, list[float]] = {v: [] for v in WRITE_VARIANTS}
    cpu_per_gb: dict[str, list[float]] = {NONE: [], JOURNAL: []}
    for rep in range(args.reps):
        for which in WRITE_VARIANTS if rep % 2 == 0 else WRITE_VARIANTS[::-1]:
            arr = _fresh_target(dest, data.shape)
            if which == ZARR:
                seconds, note = _zarr_write(arr, data, raw), "arr[:] = data"
            else:
                seconds, cpu = _mount_write(args, work, raw, dest, which == JOURNAL)
                cpu_per_gb[which].append(cpu / (data.nbytes / 1e9))
                note = f"dd + fsync, daemon {cpu_per_gb[which][-1]:5.2f} CPU-s/GB"
            gbps[which].append(data.nbytes / seconds / 1e9)
            b.log(f"  write {which:<12} {gbps[which][-1]:6.3f} GB/s  ({note})")
            _check_written(dest, data, which)
    raw.unlink()
    shutil.rmtree(dest, ignore_errors=True)
    return _write_summary(gbps, cpu_per_gb)


def _fresh_target(dest: Path, shape: tuple[int, ...]) -> zarr.Array:
    """An empty v2 blosc-lz4 array at ``dest``, whatever was there before."""
    shutil.rmtree(dest, ignore_errors=True)
    return d.create_v2(dest, shape)


def _zarr_write(arr: zarr.Array, data: np.ndarray, raw: Path) -> float:
    """Seconds zarr-python takes to write ``data`` into ``arr``."""
    _ready(raw)
    t0 = time.perf_counter()
    arr[:] = data
    return time.perf_counter() - t0


def _ready(raw: Path) -> None:
    """Right before a measured write: earlier writes on disk, the source in the page cache,
    and memory touched (shared/notes/machine.md), the same for every variant."""
    os.sync()
    _run(["cat", str(raw)], stdout=subprocess.DEVNULL)
    b.touch_and_free()


def _mount_write(
    args: argparse.Namespace, work: Path, raw: Path, dest: Path, journal: bool
) -> tuple[float, float]:
    """``dd`` of ``raw`` into the array of a fresh rw mount of ``dest``, with the journal
    under ``work/journal`` or none: the seconds it took (the fsync included) and the
    daemon's CPU seconds meanwhile."""
    jdir = work / "journal"
    shutil.rmtree(jdir, ignore_errors=True)
    opt = f"journal={jdir}" if journal else "journal=none"
    mnt, logfile = work / "mnt", work / "zarrmount.log"
    with b.Mount(args.zarrmount, dest, mnt, logfile, [opt], mode="rw"):
        pid = int(os.getxattr(mnt, PID_XATTR).decode())
        _ready(raw)
        cpu0 = _cpu(pid)
        t0 = time.perf_counter()
        _run(["dd", f"if={raw}", f"of={mnt / 'array'}", "bs=1M", *DD_FLAGS])
        seconds = time.perf_counter() - t0
        cpu = _cpu(pid) - cpu0
        journaled = (b.daemon_stats(mnt) or {}).get("journal_bytes", 0)
    _check_journal(jdir, journal, journaled, raw.stat().st_size)
    return seconds, cpu


def _cpu(pid: int) -> float:
    seconds = b.cpu_seconds(pid)
    if seconds is None:
        raise b.BenchError(f"cannot read the CPU time of the daemon (pid {pid})")
    return seconds


def _run(cmd: list[str], stdout: int | None = subprocess.PIPE) -> None:
    r = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise b.BenchError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")


def _check_journal(jdir: Path, journal: bool, journaled: int, nbytes: int) -> None:
    """The daemon journaled every byte written (or none, without the journal), and a
    clean unmount left no segment behind."""
    if (journaled < nbytes) if journal else (journaled != 0):
        raise b.BenchError(f"the daemon journaled {journaled} of {nbytes} bytes written")
    left = sorted(str(p) for p in jdir.rglob("*") if p.is_file()) if journal else []
    if left:
        b.log(f"  WARNING: the journal kept {len(left)} file(s) after unmounting: {left[:5]}")


def _check_written(dest: Path, data: np.ndarray, which: str) -> None:
    check = zarr.open_array(str(dest), mode="r")
    rows = data.shape[0]
    for r in (0, rows // 2, rows - 1):
        if not np.array_equal(check[r], data[r]):
            raise b.BenchError(f"write ({which}): row {r} differs after the write")


def _write_summary(gbps: dict[str, list[float]], cpu_per_gb: dict[str, list[float]]) -> list[str]:
    speed = {v: statistics.median(x) for v, x in gbps.items()}
    cpu = {v: statistics.median(x) for v, x in cpu_per_gb.items()}
    lines = ["sequential write (v2 lz4 4 MiB chunks; dd bs=1M + fsync; zarr-python arr[:])"]
    for v in (NONE, JOURNAL):
        lines.append(
            f"  mount {v:<13} {speed[v]:.3f} GB/s  daemon {cpu[v]:.2f} CPU-s/GB  "
            f"mount/zarr {speed[v] / speed[ZARR]:.2f}x"
        )
    lines.append(f"  zarr-python         {speed[ZARR]:.3f} GB/s")
    lines.append(
        f"  journal cost: throughput journal/none {speed[JOURNAL] / speed[NONE]:.2f}x, "
        f"daemon CPU/GB journal/none {cpu[JOURNAL] / cpu[NONE]:.2f}x"
    )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench --more")
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cases", default="write,remote")
    ap.add_argument(
        "--latency-ms",
        type=float,
        default=None,
        help="remote and latency cases: added latency a request (default 20 and 30)",
    )
    ap.add_argument(
        "--latency-rows",
        default="",
        help="latency case: only these rows (series,tree,disk,tiny,write,refused,hung,link,"
        "warm,tiny100k)",
    )
    ap.add_argument(
        "--link-mbps", type=float, default=100.0, help="latency case: the shared link, MB/s"
    )
    ap.add_argument("--rev", default="b7d3cc5", help="soak case: the commit compared")
    ap.add_argument("--soak-s", type=float, default=60.0, help="soak case: seconds a run")
    ap.add_argument("--zarrmount", default=str(b.ROOT / ".venv/bin/zarrmount"))
    ap.add_argument("--dir", default=str(b.ROOT / ".bench"))
    args = ap.parse_args()
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    summary: list[str] = []
    try:
        for case in args.cases.split(","):
            b.log(f"case {case}:")
            summary += {
                "write": lambda: case_write(args, work),
                "remote": lambda: _bench_remote.run(args, work),
                "icechunk": lambda: _bench_versions.run(args, work),
                "gdal": lambda: _bench_gdal.run(args, work),
                "tree": lambda: _bench_tree.run(args, work),
                "readers": lambda: _bench_readers.run(args, work),
                "netcdf": lambda: _bench_netcdf.run(args, work),
                "hdf5": lambda: _bench_hdf5.run(args, work),
                "amplification": lambda: _bench_amplification.run(args, work),
                "soak": lambda: _bench_soak.run(args, work),
                "latency": lambda: _bench_latency.run(args, work),
            }[case]()
    except b.BenchError as e:
        b.log(f"bench: {e}")
        return 1
    finally:
        b.unmount(args.zarrmount, work / "mnt")
    b.log("\nsummary (medians of alternating repetitions, same run):")
    for line in summary:
        b.log("  " + line)
    return 1 if any(line.split()[:1] == ["MISS"] for line in summary) else 0


if __name__ == "__main__":
    os.chdir(b.ROOT)
    sys.exit(main())
