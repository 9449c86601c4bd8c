"""The netCDF case of scripts/bench --more (``--cases netcdf``, issue #31): a group read
whole as its ``.nc`` file against its arrays' files read one after the other, in the same
run, from a fresh mount and a cold start each time (``group_file``, which the HDF5 case
shares).

The store is the readers case's (eight 256 MiB float32 arrays, v2 blosc-lz4, written by
zarr-python): 2 GiB of variables, so the file is CDF-2. The difference is the byte swap
to big-endian; the target is >= 0.8x the arrays' throughput, with the daemon's peak RSS
within the cache + 150 MiB.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import _bench_readers
import _bench_sys as b

CACHE_MIB = 256
CHUNK = 1 << 20


def _read(paths: list[Path]) -> int:
    """Read ``paths`` one after the other in 1 MiB reads into one buffer; the bytes read."""
    buf = bytearray(CHUNK)
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def group_file(args, work: Path, kind: str, suffix: str) -> tuple[dict[str, float], float]:
    """The readers case's group read whole as its ``suffix`` file (``-o sidecars=kind``)
    and as its arrays' files, alternating from fresh mounts: the medians (GB/s, by
    ``arrays`` and ``suffix``) and the daemon's peak RSS (MiB) reading the group's file."""
    store = _bench_readers.ensure(work)
    mnt, log = work / "mnt", work / "zarrmount.log"
    options = [f"sidecars={kind}", f"cache_size={CACHE_MIB}M"]
    got: dict[str, list[float]] = {"arrays": [], suffix: []}
    rss: list[float] = []
    for rep in range(args.reps):
        b.log(f" repetition {rep + 1}/{args.reps}")
        for which in ("arrays", suffix) if rep % 2 == 0 else (suffix, "arrays"):
            with b.Mount(args.zarrmount, store, mnt, log, options) as m:
                arrays = sorted(p for p in mnt.iterdir() if p.suffix != suffix)
                paths = [mnt / f"{store.stem}{suffix}"] if which == suffix else arrays
                b.cold_start(store)
                t0 = time.perf_counter()
                nbytes = _read(paths)
                seconds = time.perf_counter() - t0
                if which == suffix:
                    rss.append(b.peak_rss_mib(m.pid) or 0.0)
            got[which].append(nbytes / seconds / 1e9)
            b.log(f"  {which:<6} {got[which][-1]:6.3f} GB/s  ({nbytes / 2**30:.2f} GiB)")
    return {k: statistics.median(v) for k, v in got.items()}, max(rss)


def rows(med: dict[str, float], peak: float, name: str, suffix: str, target: float) -> list[str]:
    """The summary of :func:`group_file`: the group's file ``name`` against its arrays'."""
    ratio = med[suffix] / med["arrays"]
    limit = CACHE_MIB + 150
    return [
        f"a group read whole as {name} against its arrays' files (medians)",
        f"  arrays' files one after the other {med['arrays']:.3f} GB/s",
        f"  {'ok  ' if ratio >= target else 'MISS'} {name} {med[suffix]:.3f} GB/s: "
        f"{ratio:.2f}x (>= {target})",
        f"  {'ok  ' if peak <= limit else 'MISS'} daemon peak RSS reading {name} "
        f"{peak:.0f} MiB (cache {CACHE_MIB} MiB + 150 = {limit})",
    ]


def run(args, work: Path) -> list[str]:
    med, peak = group_file(args, work, "netcdf", ".nc")
    return rows(med, peak, "GROUP.nc", ".nc", 0.8)
