"""More cases for scripts/bench (``--more``): a sequential write, and reads from S3.

Each case measures the mount and zarr-python on the same data in the same run, alternating
over repetitions, and prints both throughputs and the ratio. Shares the helpers of
scripts/_bench.py (fresh mounts, dropped page cache, page-aligned reused read buffer).
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
import _bench_data as d  # noqa: E402
import _bench_remote  # noqa: E402
import _bench_sys as b  # noqa: E402


def case_write(args, work: Path) -> list[str]:
    rows = d.rows_for(args.size_gib)
    nbytes = rows * d.NCOLS * 4
    raw = work / "write-source.f32"
    data = np.concatenate([d.generate_block(r, r + 1024) for r in range(0, rows, 1024)])
    data.tofile(raw)
    dest = work / "write-target.zarr"
    mount_r, zarr_r = [], []
    comp = d.DATASETS[1].codec()
    for rep in range(args.reps):
        for which in ("mount", "zarr") if rep % 2 == 0 else ("zarr", "mount"):
            shutil.rmtree(dest, ignore_errors=True)
            arr = zarr.create_array(
                str(dest),
                shape=data.shape,
                chunks=d.CHUNKS,
                dtype="<f4",
                compressors=comp,
                zarr_format=2,
                fill_value=0.0,
            )
            subprocess.run(["cat", str(raw)], stdout=subprocess.DEVNULL, check=True)  # warm
            if which == "mount":
                mnt = work / "mnt"
                b.unmount(args.zarrmount, mnt)
                mnt.mkdir(exist_ok=True)
                subprocess.run(
                    [args.zarrmount, str(dest), str(mnt), "-o", f"rw,log={work / 'zarrmount.log'}"],
                    check=True,
                )
                try:
                    t0 = time.perf_counter()
                    subprocess.run(
                        [
                            "dd",
                            f"if={raw}",
                            f"of={mnt / 'array'}",
                            "bs=1M",
                            "conv=notrunc,fsync",
                            "status=none",
                        ],
                        check=True,
                    )
                    dt = time.perf_counter() - t0
                finally:
                    b.unmount(args.zarrmount, mnt)
                mount_r.append(nbytes / dt / 1e9)
                b.log(f"  write mount (dd bs=1M + fsync) {mount_r[-1]:6.3f} GB/s")
            else:
                t0 = time.perf_counter()
                arr[:] = data
                dt = time.perf_counter() - t0
                zarr_r.append(nbytes / dt / 1e9)
                b.log(f"  write zarr arr[:] = data      {zarr_r[-1]:6.3f} GB/s")
            check = zarr.open_array(str(dest), mode="r")
            for r in (0, rows // 2, rows - 1):
                if not np.array_equal(check[r], data[r]):
                    raise b.BenchError(f"write ({which}): row {r} differs after the write")
    raw.unlink()
    shutil.rmtree(dest, ignore_errors=True)
    m, z = statistics.median(mount_r), statistics.median(zarr_r)
    return [
        f"sequential write (v2 lz4 4 MiB chunks)  mount {m:.3f} GB/s  "
        f"zarr-python {z:.3f} GB/s  ratio {m / z:.2f}x"
    ]


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench --more")
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cases", default="write,remote")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="remote case: added latency")
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
            }[case]()
    except b.BenchError as e:
        b.log(f"bench: {e}")
        return 1
    finally:
        b.unmount(args.zarrmount, work / "mnt")
    b.log("\nsummary (medians of alternating repetitions, same run):")
    for line in summary:
        b.log("  " + line)
    return 0


if __name__ == "__main__":
    os.chdir(b.ROOT)
    sys.exit(main())
