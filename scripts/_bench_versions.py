"""The Icechunk case of scripts/bench --more (``--cases icechunk``): a cold sequential read
of a 1 GiB float32 array (v3 blosc-lz4, 4 MiB chunks) kept in a local Icechunk
repository, through the mount (the tip of main, and the same snapshot below
``.snapshots/``), against zarr-python reading the repository (``arr[:]``) and a mount of
the same array kept as a plain v3 directory; alternating, in one run.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path

import _bench_data as d
import _bench_sys as b
import zarr
from _bench_remote import Reads
from zarr.codecs import BloscCodec

CASES = ("tip", "snapshot", "zarr-python", "directory")


def _write(store, rows: int) -> None:
    lz4 = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    arr = zarr.create_array(
        store, shape=(rows, d.NCOLS), chunks=d.CHUNKS, dtype=d.DTYPE, compressors=lz4
    )
    for r0 in range(0, rows, d.CHUNKS[0]):
        arr[r0 : r0 + d.CHUNKS[0]] = d.generate_block(r0, r0 + d.CHUNKS[0])


def _ensure(work: Path, rows: int) -> tuple[Path, Path, str]:
    """The repository, the plain copy and the repository's snapshot (kept between runs)."""
    import icechunk

    icechunk.set_logs_filter("error")
    repo, plain = work / f"icechunk_{rows}_repo", work / f"icechunk_{rows}_plain.zarr"
    marker = work / f"icechunk_{rows}.json"
    try:
        return repo, plain, json.loads(marker.read_text())["snapshot"]
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(plain, ignore_errors=True)
    t0 = time.perf_counter()
    session = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo)))
    writable = session.writable_session("main")
    _write(writable.store, rows)
    snapshot = writable.commit("bench data")
    _write(str(plain), rows)
    marker.write_text(json.dumps({"snapshot": snapshot}))
    b.log(f"  wrote the repository and its plain copy in {time.perf_counter() - t0:.1f} s")
    return repo, plain, snapshot


def _zarr_read(repo: Path, nbytes: int) -> float:
    import icechunk

    b.cold_start(repo)
    t0 = time.perf_counter()
    storage = icechunk.local_filesystem_storage(str(repo))
    session = icechunk.Repository.open(storage).readonly_session("main")
    data = zarr.open_array(session.store, mode="r")[:]
    seconds = time.perf_counter() - t0
    if data.nbytes != nbytes:
        raise b.BenchError(f"zarr-python read {data.nbytes} bytes, not {nbytes}")
    return nbytes / seconds / 1e9


def run(args, work: Path) -> list[str]:
    rows = d.rows_for(args.size_gib)
    nbytes = rows * d.NCOLS * d.DTYPE.itemsize
    repo, plain, snapshot = _ensure(work, rows)
    reads = Reads(args, work, nbytes)
    source = f"icechunk+file://{repo}"
    gbps: dict[str, list[float]] = {case: [] for case in CASES}
    cpu: dict[str, list[float]] = {case: [] for case in CASES}
    for rep in range(args.reps):
        for case in CASES if rep % 2 == 0 else CASES[::-1]:
            stats: dict = {}
            if case == "zarr-python":
                rate = _zarr_read(repo, nbytes)
            else:
                b.cold_start(plain if case == "directory" else repo)
                where = str(plain) if case == "directory" else source
                file = f".snapshots/{snapshot}/array" if case == "snapshot" else "array"
                rate, stats = reads.read(where, file=file)
            gbps[case].append(rate)
            if "cpu_s_per_gb" in stats:
                cpu[case].append(stats["cpu_s_per_gb"])
            b.log(f"  icechunk cold {case:<12} {rate:6.3f} GB/s")
    med = {case: statistics.median(v) for case, v in gbps.items()}
    lines = ["Icechunk repository, local (v3 blosc-lz4 4 MiB chunks; GB/s, daemon CPU s per GB)"]
    for case in CASES:
        per_gb = f"{statistics.median(cpu[case]):.2f}" if cpu[case] else "-"
        lines.append(f"  {case:<12} {med[case]:6.3f} GB/s  CPU/GB {per_gb}")
    lines.append(
        f"  mount of the tip: zarr-python {med['tip'] / med['zarr-python']:.2f}x, "
        f"the same array as a directory {med['tip'] / med['directory']:.2f}x; "
        f".snapshots/ID {med['snapshot'] / med['tip']:.2f}x the tip"
    )
    return lines
