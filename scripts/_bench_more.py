"""More cases for scripts/bench: a sharded Zarr v3 read, and a sequential write.

Each case measures the mount and zarr-python on the same data in the same run, alternating
over repetitions, and prints both throughputs and the ratio. Shares the helpers of
scripts/_bench.py (fresh mounts, dropped page cache, page-aligned reused read buffer).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench as b  # noqa: E402
import _bench_remote  # noqa: E402

SHARDS = (1024, 16384)  # 64 MiB of float32
INNER = (64, 4096)  # 1 MiB


def _rows(size_gib: float) -> int:
    return max(SHARDS[0], round(size_gib * (1 << 30) / (b.NCOLS * 4)) // SHARDS[0] * SHARDS[0])


def write_sharded(path: Path, rows: int) -> None:
    if (path / "bench-complete").exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    arr = zarr.create_array(
        str(path), shape=(rows, b.NCOLS), chunks=INNER, shards=SHARDS, dtype="<f4",
        compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"), zarr_format=3,
    )
    for r0 in range(0, rows, SHARDS[0]):
        arr[r0 : r0 + SHARDS[0]] = b.generate_block(r0, r0 + SHARDS[0])
    (path / "bench-complete").write_text("ok")


def timed_mount_read(zm: str, src: Path, mnt: Path, logfile: Path, name: str, nbytes: int,
                     buf: mmap.mmap) -> tuple[float, float | None]:
    with b.Mount(zm, src, mnt, logfile, []) as m:
        b.drop_caches()
        d0 = b.cpu_seconds(m.pid)
        dt = b.read_sequential(mnt / name, buf, nbytes)
        d1 = b.cpu_seconds(m.pid)
    return dt, (None if d0 is None or d1 is None else d1 - d0)


def case_sharded(args, work: Path, buf: mmap.mmap) -> list[str]:
    rows = _rows(args.size_gib)
    src = work / f"sharded_{rows}x{b.NCOLS}.zarr"
    write_sharded(src, rows)
    nbytes = rows * b.NCOLS * 4
    arr = zarr.open_array(str(src), mode="r")
    with b.Mount(args.zarrmount, src, work / "mnt", work / "zarrmount.log", []):
        problems = b.verify(work / "mnt" / "array", arr)
    if problems:
        raise b.BenchError("sharded: mount differs from zarr-python: " + "; ".join(problems))
    mount_r, zarr_r = [], []
    for rep in range(args.reps):
        for which in (("mount", "zarr") if rep % 2 == 0 else ("zarr", "mount")):
            if which == "mount":
                dt, dcpu = timed_mount_read(args.zarrmount, src, work / "mnt",
                                            work / "zarrmount.log", "array", nbytes, buf)
                mount_r.append(nbytes / dt / 1e9)
                b.log(f"  sharded mount      {mount_r[-1]:6.3f} GB/s (daemon CPU {dcpu:.2f} s)")
            else:
                b.drop_caches()
                a = zarr.open_array(str(src), mode="r")
                t0 = time.perf_counter()
                res = a[:]
                zarr_r.append(nbytes / (time.perf_counter() - t0) / 1e9)
                del res
                b.log(f"  sharded zarr[:]    {zarr_r[-1]:6.3f} GB/s")
    if not args.keep:
        shutil.rmtree(src, ignore_errors=True)
    m, z = statistics.median(mount_r), statistics.median(zarr_r)
    return [f"sharded v3 read (64 MiB shards, 1 MiB inner, lz4)  mount {m:.3f} GB/s  "
            f"zarr-python {z:.3f} GB/s  ratio {m / z:.2f}x"]


def case_write(args, work: Path) -> list[str]:
    rows = _rows(args.size_gib)
    nbytes = rows * b.NCOLS * 4
    raw = work / "write-source.f32"
    data = np.concatenate([b.generate_block(r, r + 1024) for r in range(0, rows, 1024)])
    data.tofile(raw)
    dest = work / "write-target.zarr"
    mount_r, zarr_r = [], []
    comp = b.compressor()
    for rep in range(args.reps):
        for which in (("mount", "zarr") if rep % 2 == 0 else ("zarr", "mount")):
            shutil.rmtree(dest, ignore_errors=True)
            arr = zarr.create_array(str(dest), shape=data.shape, chunks=b.CHUNKS, dtype="<f4",
                                    compressors=comp, zarr_format=2, fill_value=0.0)
            subprocess.run(["cat", str(raw)], stdout=subprocess.DEVNULL, check=True)  # warm
            if which == "mount":
                mnt = work / "mnt"
                b.unmount(args.zarrmount, mnt)
                mnt.mkdir(exist_ok=True)
                subprocess.run([args.zarrmount, str(dest), str(mnt), "-o",
                                f"rw,log={work / 'zarrmount.log'}"], check=True)
                try:
                    t0 = time.perf_counter()
                    subprocess.run(["dd", f"if={raw}", f"of={mnt / 'array'}", "bs=1M",
                                    "conv=notrunc,fsync", "status=none"], check=True)
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
    return [f"sequential write (v2 lz4 4 MiB chunks)  mount {m:.3f} GB/s  "
            f"zarr-python {z:.3f} GB/s  ratio {m / z:.2f}x"]


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench --more")
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cases", default="sharded,write,remote")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="remote case: added latency")
    ap.add_argument("--zarrmount", default=str(b.ROOT / ".venv/bin/zarrmount"))
    ap.add_argument("--dir", default=str(b.ROOT / ".bench"))
    args = ap.parse_args()
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    buf = mmap.mmap(-1, b.READ_SIZE)
    buf.write(b"\1" * b.READ_SIZE)
    summary: list[str] = []
    try:
        for case in args.cases.split(","):
            b.log(f"case {case}:")
            summary += {"sharded": lambda: case_sharded(args, work, buf),
                        "write": lambda: case_write(args, work),
                        "remote": lambda: _bench_remote.run(args, work)}[case]()
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
