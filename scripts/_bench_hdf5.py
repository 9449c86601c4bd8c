"""The HDF5 case of scripts/bench --more (``--cases hdf5``, issue #45): the netCDF case's
group (eight 256 MiB float32 arrays) read whole as its ``.h5`` file against its arrays'
files, in the same run (``_bench_netcdf.group_file``): the data regions are the array
files' bytes, read through them, so the target is >= 0.9x; and a group of 10,000 arrays
opened with h5py on a fresh mount (its names, the last array's attributes): under 2 s,
no chunk loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import _bench_data as d
import _bench_netcdf
import _bench_sys as b
import zarr

MANY = 10_000
OPEN_LIMIT_S = 2.0
OPEN = (
    "import sys, time, h5py; t = time.perf_counter(); f = h5py.File(sys.argv[1], 'r'); "
    "n = sum(1 for name in f if name.startswith('a')); f[sorted(f)[-1]].attrs['units']; "
    "print(time.perf_counter() - t, n)"
)


def _write_many(store: Path) -> None:
    group = zarr.open_group(str(store), mode="w", zarr_format=2).create_group("g")
    for i in range(MANY):
        group.create_array(f"a{i:05d}", shape=(16, 16), dtype="<i2", attributes={"units": "m"})


def _open_many(args, work: Path) -> list[str]:
    store = d.kept(work / f"many_{MANY}_v1.zarr", {"arrays": MANY}, _write_many)
    mnt, log = work / "mnt", work / "zarrmount.log"
    with b.Mount(args.zarrmount, store, mnt, log, ["sidecars=hdf5"]):
        b.cold_start(store)
        r = subprocess.run([sys.executable, "-c", OPEN, str(mnt / "g/g.h5")], capture_output=True)
        if r.returncode != 0:
            raise b.BenchError(f"h5py could not open g.h5: {r.stderr.decode().strip()}")
        seconds, count = r.stdout.split()
        misses = (b.daemon_stats(mnt) or {}).get("cache_misses")
    if int(count) != MANY:
        raise b.BenchError(f"h5py found {count} arrays in g.h5, not {MANY}")
    b.log(f"  opened g.h5 of {MANY} arrays in {float(seconds):.3f} s, {misses} chunks loaded")
    met = float(seconds) < OPEN_LIMIT_S and misses == 0
    return [
        f"{'ok  ' if met else 'MISS'} h5py opens a fresh mount's group of {MANY} arrays in "
        f"{float(seconds):.2f} s (< {OPEN_LIMIT_S:.0f} s), {misses} chunks loaded (0)"
    ]


def run(args, work: Path) -> list[str]:
    med, peak = _bench_netcdf.group_file(args, work, "hdf5", ".h5")
    return _bench_netcdf.rows(med, peak, "GROUP.h5", ".h5", 0.9) + _open_many(args, work)
