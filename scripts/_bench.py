"""scripts/bench: zarrmount's read performance against its references, in one run.

For each dataset (scripts/_bench_data.py: uncompressed, blosc-lz4, zstd-3, sharded lz4; 1 GiB
float32 in 4 MiB chunks) and each repetition, on a fresh mount (cold chunk cache):

* time to first byte: cold (below), open + 4 KiB read at offset 0;
* cold sequential read: 1 MiB reads into one reused page-aligned buffer (the kernel turns
  them into 1 MiB FUSE reads with the mount's read_ahead_kb=1024). Cold means nothing of
  the array in the kernel's page cache of the mount nor in zarrmount's chunk cache; the
  store's own files are read into the page cache first (``cold_start``): this VM's disk
  reads about 1 GB/s (printed as "disk"), and a disk-bound figure says nothing of the read
  path. Every variant, the references included, starts from the same state;
* warm re-read: the same again, now served by the kernel page cache;
* random 4 KiB preads of chunks in zarrmount's cache, page cache dropped and kernel
  read-ahead off (POSIX_FADV_RANDOM): p50 and p99 latency, in batches of 50 alternating
  with the same reads of the ceiling's file, mounted alongside for them (the target is
  checked on the median of the per-repetition ratios of such pairs);

and once per repetition the daemon's peak RSS while streaming the lz4 array with a cache a
quarter of its size, and cold reads of the lz4 array's file and of its ``.npy`` and ``.tif``
views (``-o sidecars``), each on a fresh mount: a view's daemon CPU within 10 % of the
file's. The references, measured in the same run:

* the FUSE ceiling: a trivial in-memory pyfuse3 file (scripts/_bench_triv.py) with the same
  options and read-ahead, for the cold, warm and random measurements;
* numcodecs decoding every stored chunk on two threads into reused buffers (the decode
  ceiling; compressed bytes in memory);
* zarr-python ``arr[:]`` with the page cache dropped;
* a plain file of the same size read from the page cache; the store's files from disk;
* the floor of a cold read's daemon CPU (issue #30, scripts/_bench_floor.py): the
  ceiling's transport + reading every stored object once + decoding every chunk on one
  thread, each into one reused buffer; a mount's daemon CPU may be at most 1.3x its floor.

Variants alternate and rotate between repetitions (these 2-core VMs vary 20-40 % from run to
run, see shared/notes/machine.md); targets are checked on medians, and the exit status is
non-zero when one is missed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import json
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from _bench_data import (
    CHUNKS,
    DATASETS,
    DTYPE,
    NCOLS,
    Dataset,
    ensure,
    rows_for,
    stored_bytes,
    stored_chunks,
    verify,
)
from _bench_floor import decode_seconds, encoded_chunks, store_read_seconds, stored_objects
from _bench_plot import plot
from _bench_sys import (
    READ_SIZE,
    ROOT,
    BenchError,
    CeilingMount,
    Mount,
    cold_start,
    cpu_seconds,
    daemon_stats,
    drop_caches,
    log,
    own_cpu_seconds,
    peak_rss_mib,
    percentile,
    random_latencies_paired,
    read_ahead_kb,
    read_sequential,
    read_tree,
    time_to_first_byte,
    touched_buffer,
    unmount,
    wait_for_loads,
)

CEILING = "ceiling"
CEILING_READ_AHEAD_KB = 1024  # zarrmount's default when it runs as root
RANDOM_READS = 2000
RSS_SLACK_MIB = 150
TTFB_MAX_S = 0.010
SIDECARS = "sidecars=npy+tiff"
VIEWS = ("", ".npy", ".tif")  # the array file, then its views
VIEW_CPU_MAX = 1.10  # a view's daemon CPU per GB over the array file's
FLOOR_MAX = 1.3  # a cold read's daemon CPU over its floor (scripts/_bench_floor.py)


class Run:
    """One benchmark run: its settings, the buffers it reuses, and what it measured."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.dir).resolve()
        self.mnt = self.work / "mnt"
        self.ceiling_mnt = self.work / "mnt-ceiling"  # beside zarrmount for random reads
        self.logfile = self.work / "zarrmount.log"
        self.rows = rows_for(args.size_gib)
        self.nbytes = self.rows * NCOLS * DTYPE.itemsize
        self.datasets = [d for d in DATASETS if d.name in args.datasets.split(",")]
        self.buf = touched_buffer(READ_SIZE)
        self.results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        # random offsets inside the first chunk rows: a region half the default cache
        region = min(self.nbytes, 256 << 20)
        rng = random.Random(20261122)
        self.offsets = [rng.randrange(region // 4096) * 4096 for _ in range(RANDOM_READS)]
        # one file offset in each chunk of the region: its first row, one chunk column each
        rowbytes = NCOLS * DTYPE.itemsize
        # (column by column: reads that follow each other would look sequential, and the
        # prefetch they start would still run during the timed reads)
        self.region_chunks = [
            (r * rowbytes + c * DTYPE.itemsize)
            for c in range(0, NCOLS, CHUNKS[1])
            for r in range(0, region // rowbytes, CHUNKS[0])
        ]

    def record(self, variant: str, metric: str, value: float | None) -> None:
        if value is not None:
            self.results[variant][metric].append(value)

    def median(self, variant: str, metric: str) -> float | None:
        values = self.results.get(variant, {}).get(metric)
        return statistics.median(values) if values else None

    # -- measurements -------------------------------------------------------------------------

    def sequential(
        self, variant: str, path: Path, pid: int | None, store: Path | None, nbytes: int = 0
    ) -> None:
        """Cold read, then warm re-read, of ``path`` (see ``cold_start``), of ``nbytes``
        (default: the array's)."""
        nbytes = nbytes or self.nbytes
        cold_start(store)
        d0, r0 = cpu_seconds(pid), own_cpu_seconds()
        cold = read_sequential(path, self.buf, nbytes)
        d1, r1 = cpu_seconds(pid), own_cpu_seconds()
        warm = read_sequential(path, self.buf, nbytes)
        d2 = cpu_seconds(pid)
        self.record(variant, "cold", nbytes / cold / 1e9)
        self.record(variant, "warm", nbytes / warm / 1e9)
        self.record(variant, "reader_cpu", r1 - r0)
        if d0 is not None and d1 is not None and d2 is not None:
            self.record(variant, "daemon_cpu", d1 - d0)
            self.record(variant, "daemon_cpu_warm", d2 - d1)
        log(
            f"  {variant:<10} cold {nbytes / cold / 1e9:6.3f} GB/s   "
            f"warm {nbytes / warm / 1e9:6.3f} GB/s"
            + (f"   daemon CPU {d1 - d0:.2f} s" if d0 is not None and d1 is not None else "")
        )

    def views(self, ds: Dataset) -> None:
        """Cold reads of the array file and of its .npy and .tif views (issue #19), each in
        a fresh mount with the views shown: a view is a header before the array's bytes,
        read through the same path, so its daemon CPU is the file's."""
        store = ds.path(self.work, self.rows)
        for suffix in VIEWS:
            with Mount(self.args.zarrmount, store, self.mnt, self.logfile, [SIDECARS]) as m:
                path = Path(f"{ds.mounted_file(self.mnt)}{suffix}")
                size = path.stat().st_size  # a view: its header, then the array's bytes
                self.sequential(f"view:{suffix or 'file'}", path, m.pid, store, size)

    def random_reads(self, variant: str, path: Path) -> None:
        """4 KiB preads of cached chunks (one read per chunk loads them), page cache cold,
        in batches alternating with the same reads of the ceiling's file, mounted alongside
        for them: these VMs have slow spells of seconds, and a ratio of latencies measured
        minutes apart would measure those.

        The page cache is dropped before the loading reads too: after a warm re-read the
        kernel would answer them itself, and the chunks would not be loaded."""
        with CeilingMount(self.ceiling_mnt, self.nbytes, CEILING_READ_AHEAD_KB):
            drop_caches()
            fd = os.open(path, os.O_RDONLY)
            try:
                for off in self.region_chunks:
                    os.pread(fd, 4096, off)
            finally:
                os.close(fd)
            # a small read of an uncached chunk is served from part of it, and the chunk
            # then loads in the background: the timed reads start once those loads are done
            wait_for_loads(self.mnt)
            drop_caches()
            before = daemon_stats(self.mnt)
            ours, ceiling = random_latencies_paired([path, self.ceiling_mnt / "file"], self.offsets)
            after = daemon_stats(self.mnt)
        for name, lat in ((variant, ours), (CEILING, ceiling)):
            self.record(name, "p50_us", percentile(lat, 50) * 1e6)
            self.record(name, "p99_us", percentile(lat, 99) * 1e6)
        # the target is checked on the median of these ratios, each of a pair measured
        # together: a ratio of medians would pair a quiet repetition with a slow one
        self.record(variant, "p50_ratio", percentile(ours, 50) / percentile(ceiling, 50))
        served = ""
        if before is not None and after is not None:  # were the chunks really cached?
            hits, misses, parts = (
                after[k] - before[k] for k in ("cache_hits", "cache_misses", "cache_partial_reads")
            )
            served = f"   (chunk cache: {hits} hits, {misses} misses, {parts} read in part)"
        for name, lat in ((variant, ours), (CEILING, ceiling)):
            p50, p99 = percentile(lat, 50) * 1e6, percentile(lat, 99) * 1e6
            log(
                f"  {name:<10} random 4 KiB: p50 {p50:6.1f} us   p99 {p99:6.1f} us"
                + (served if name == variant else f"   (paired with {variant})")
            )

    def ceiling(self) -> None:
        with CeilingMount(self.mnt, self.nbytes, CEILING_READ_AHEAD_KB) as c:
            self.sequential(CEILING, self.mnt / "file", c.pid, None)

    def mount(self, ds: Dataset) -> None:
        with Mount(
            self.args.zarrmount, ds.path(self.work, self.rows), self.mnt, self.logfile, []
        ) as m:
            path, store = ds.mounted_file(self.mnt), ds.path(self.work, self.rows)
            cold_start(store)
            ttfb = time_to_first_byte(path)
            self.record(ds.name, "ttfb_ms", ttfb * 1e3)
            self.record(ds.name, "read_ahead_kb", read_ahead_kb(self.mnt))
            self.sequential(ds.name, path, m.pid, store)
            self.random_reads(ds.name, path)
            log(f"  {ds.name:<10} time to first byte {ttfb * 1e3:.2f} ms")

    def zarr_read(self, ds: Dataset) -> None:
        cold_start(ds.path(self.work, self.rows))
        arr = zarr.open_array(str(ds.array_path(self.work, self.rows)), mode="r")
        t0 = time.perf_counter()
        res = arr[:]
        dt = time.perf_counter() - t0
        if res.shape != (self.rows, NCOLS) or res.dtype != DTYPE:
            raise BenchError(f"zarr-python read {ds.name} as {res.shape} {res.dtype}")
        del res
        self.record("zarr:" + ds.name, "cold", self.nbytes / dt / 1e9)
        log(f"  {'zarr:' + ds.name:<10} arr[:] {self.nbytes / dt / 1e9:6.3f} GB/s")

    def peak_rss(self) -> None:
        """Stream the lz4 array through a cache a quarter of its size; the daemon's VmHWM."""
        lz4 = next(d for d in DATASETS if d.name == "lz4")
        cache_mib = max(16, self.nbytes // 4 >> 20)
        with Mount(
            self.args.zarrmount,
            lz4.path(self.work, self.rows),
            self.mnt,
            self.logfile,
            [f"cache_size={cache_mib}M"],
        ) as m:
            cold_start(lz4.path(self.work, self.rows))
            read_sequential(lz4.mounted_file(self.mnt), self.buf, self.nbytes)
            rss = peak_rss_mib(m.pid)
        self.record("rss", "peak_mib", rss)
        self.record("rss", "cache_mib", cache_mib)
        log(f"  peak RSS   {rss:.0f} MiB with cache_size={cache_mib}M")

    def floor(self, ds: Dataset) -> None:
        """The parts of a cold read's floor measured here (the transport is the ceiling's
        daemon CPU): the store's objects read, then their chunks decoded, on one thread."""
        store = ds.path(self.work, self.rows)
        objects = stored_objects(ds, self.work, self.rows)
        cold_start(store)
        read = store_read_seconds(objects)
        decode = decode_seconds(ds, encoded_chunks(ds, objects)) if ds.compressor else 0.0
        self.record("floor:" + ds.name, "store_cpu", read)
        self.record("floor:" + ds.name, "decode_cpu", decode)
        log(
            f"  {'floor:' + ds.name:<10} store reads {read:.2f} s   "
            f"decoding {decode:.2f} s (1 thread)"
        )

    def floor_cpu(self, name: str) -> float | None:
        """The floor of a cold read of dataset ``name``: transport + store reads + decoding."""
        parts = [self.median(CEILING, "daemon_cpu")]
        parts += [self.median("floor:" + name, m) for m in ("store_cpu", "decode_cpu")]
        return None if None in parts else sum(parts)

    def decode_ceiling(self, ds: Dataset) -> None:
        """numcodecs decoding every stored chunk on two threads into reused buffers."""
        codec = ds.codec()
        chunks = stored_chunks(ds, self.work, self.rows)
        chunk_nbytes = CHUNKS[0] * CHUNKS[1] * DTYPE.itemsize
        outs = [touched_buffer(chunk_nbytes) for _ in range(2)]

        def decode(part: int) -> None:
            out = np.frombuffer(outs[part], dtype=np.uint8)
            for raw in chunks[part::2]:
                codec.decode(raw, out=out)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(decode, range(2)))  # warm-up: code paths, and a check it works
            t0 = time.perf_counter()
            list(pool.map(decode, range(2)))
            dt = time.perf_counter() - t0
        self.record("decode:" + ds.name, "cold", self.nbytes / dt / 1e9)
        log(f"  {'decode:' + ds.name:<10} {self.nbytes / dt / 1e9:6.3f} GB/s (2 threads)")

    def disk(self) -> None:
        """The store's files read from disk: what a disk-cold mount would be held to."""
        ds = self.datasets[0]
        drop_caches()
        t0 = time.perf_counter()
        n = read_tree(ds.path(self.work, self.rows))
        dt = time.perf_counter() - t0
        self.record("disk", "cold", n / dt / 1e9)
        log(f"  {'disk':<10} {ds.name} store files from disk {n / dt / 1e9:6.3f} GB/s")

    def plain_file(self) -> None:
        path = self.work / "plain.bin"
        if not path.exists() or path.stat().st_size != self.nbytes:
            with open(path, "wb") as f:
                for _ in range(self.nbytes // READ_SIZE):
                    f.write(os.urandom(READ_SIZE))
        read_sequential(path, self.buf, self.nbytes)  # into the page cache
        dt = read_sequential(path, self.buf, self.nbytes)
        self.record("plain", "warm", self.nbytes / dt / 1e9)
        log(f"  {'plain':<10} from the page cache {self.nbytes / dt / 1e9:6.3f} GB/s")


# -- targets ----------------------------------------------------------------------------------


def targets(run: Run) -> list[tuple[str, float | None, str, float, bool]]:
    """(what, measured, relation, bound, met) for every target: issue #30's (a cold read's
    daemon CPU against its floor) and those of #6 and #19 it still holds."""
    rows: list[tuple[str, float | None, str, float, bool]] = []

    def ratio(name: str, a: float | None, b: float | None, rel: str, bound: float) -> None:
        value = a / b if a is not None and b else None
        met = value is not None and (value >= bound if rel == ">=" else value <= bound)
        rows.append((name, value, rel, bound, met))

    m = run.median
    for ds in run.datasets:
        n = ds.name
        cpu = m(n, "daemon_cpu")
        ratio(f"{n} cold daemon CPU / floor", cpu, run.floor_cpu(n), "<=", FLOOR_MAX)
        ratio(f"{n} warm / ceiling warm", m(n, "warm"), m(CEILING, "warm"), ">=", 0.9)
        ratio(f"{n} random p50 / ceiling p50", m(n, "p50_ratio"), 1.0, "<=", 1.5)
        if n == "lz4":
            file_cpu = m("view:file", "daemon_cpu")
            for view in VIEWS[1:]:
                got = m(f"view:{view}", "daemon_cpu")
                ratio(f"lz4{view} cold daemon CPU / file's", got, file_cpu, "<=", VIEW_CPU_MAX)
            ttfb = m(n, "ttfb_ms")
            rows.append(
                (
                    "lz4 time to first byte, ms",
                    ttfb,
                    "<=",
                    TTFB_MAX_S * 1e3,
                    ttfb is not None and ttfb <= TTFB_MAX_S * 1e3,
                )
            )
            rss, cache = m("rss", "peak_mib"), m("rss", "cache_mib")
            if cache is not None:
                bound = cache + RSS_SLACK_MIB
                rows.append(
                    (
                        f"peak RSS MiB (cache {cache:.0f} + {RSS_SLACK_MIB})",
                        rss,
                        "<=",
                        bound,
                        rss is not None and rss <= bound,
                    )
                )
    return rows


def throughputs(run: Run) -> list[tuple[str, float | None]]:
    """Cold throughput against the references: shown, no longer targets (issue #30 holds
    CPU per GB instead: on shared cores, throughput measures the neighbours)."""
    m, rows = run.median, []
    for ds in run.datasets:
        n = ds.name
        for ref, label in ((CEILING, "ceiling cold"), ("zarr:" + n, "zarr arr[:]")):
            a, b = m(n, "cold"), m(ref, "cold")
            rows.append((f"{n} cold / {label}", a / b if a is not None and b else None))
    return rows


def report(run: Run) -> bool:
    m = run.median
    log()
    log(
        f"results: {run.nbytes / 1e9:.3f} GB per array, medians of {run.args.reps} "
        "repetitions (GB/s = 1e9 bytes/s)"
    )
    log(
        f"  {'variant':<16} {'cold GB/s':>9} {'warm GB/s':>9} {'p50 us':>7} {'p99 us':>7} "
        f"{'TTFB ms':>7} {'daemon CPU s cold/warm':>22}"
    )
    variants = [CEILING] + [d.name for d in run.datasets]
    variants += [f"zarr:{d.name}" for d in run.datasets]
    variants += [f"decode:{d.name}" for d in run.datasets if d.compressor and not d.sharded]
    variants += ["plain", "disk"] + [f"view:{v or 'file'}" for v in VIEWS]

    def cell(v: str, metric: str, width: int, fmt: str) -> str:
        x = m(v, metric)
        return f"{x:{width}{fmt}}" if x is not None else " " * (width - 1) + "-"

    for d in run.datasets:
        floor = run.floor_cpu(d.name)
        if floor is not None:
            store, decode = (m("floor:" + d.name, k) for k in ("store_cpu", "decode_cpu"))
            log(
                f"  floor of {d.name:<8} {floor:.2f} CPU-s = transport "
                f"{m(CEILING, 'daemon_cpu'):.2f} + store reads {store:.2f} + decoding {decode:.2f}"
            )
    for v in variants:
        log(
            f"  {v:<16} {cell(v, 'cold', 9, '.3f')} {cell(v, 'warm', 9, '.3f')} "
            f"{cell(v, 'p50_us', 7, '.1f')} {cell(v, 'p99_us', 7, '.1f')} "
            f"{cell(v, 'ttfb_ms', 7, '.2f')} {cell(v, 'daemon_cpu', 15, '.2f')}"
            f"{cell(v, 'daemon_cpu_warm', 7, '.2f')}"
        )
    rss = m("rss", "peak_mib")
    if rss is not None:
        log(
            f"  daemon peak RSS streaming lz4 with cache_size={m('rss', 'cache_mib'):.0f}M: "
            f"{rss:.0f} MiB"
        )
    log()
    for name, value in throughputs(run):
        log(f"  {name:<45} {'-' if value is None else f'{value:.2f}':>8}")
    log()
    log("targets (issues #6, #30):")
    ok = True
    for name, value, rel, bound, met in targets(run):
        shown = "-" if value is None else f"{value:.2f}"
        log(f"  {'ok  ' if met else 'MISS'} {name:<40} {shown:>8} {rel} {bound:g}")
        ok &= met
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gib", type=float, default=1.0, help="array size (default 1)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument(
        "--datasets",
        default=",".join(d.name for d in DATASETS),
        help="comma-separated subset of: " + ", ".join(d.name for d in DATASETS),
    )
    ap.add_argument("--clean", action="store_true", help="delete the datasets at the end")
    ap.add_argument("--plot", metavar="FILE.png", help="draw the cold reads against their floors")
    ap.add_argument("--zarrmount", default=str(ROOT / ".venv/bin/zarrmount"))
    ap.add_argument("--dir", default=str(ROOT / ".bench"), help="work directory (.bench)")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.size_gib <= 0:
        ap.error("--reps must be >= 1 and --size-gib > 0")

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    run = Run(args)
    run.work.mkdir(parents=True, exist_ok=True)
    log(
        "zarrmount benchmark (issue #6): reads through the mount against the FUSE ceiling, "
        "numcodecs and zarr-python"
    )
    log(
        f"  {platform.node()} kernel {platform.release()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, zarr {zarr.__version__}, numcodecs "
        f"{numcodecs.__version__}, numpy {np.__version__}; load {os.getloadavg()[0]:.2f}"
    )
    if os.geteuid() != 0:
        log("  WARNING: not root: the page cache cannot be dropped nor read_ahead_kb set")
    try:
        prepare(run)
        steps = [run.ceiling] + [functools.partial(run.mount, d) for d in run.datasets]
        steps += [functools.partial(run.zarr_read, d) for d in run.datasets] + [run.peak_rss]
        steps += [functools.partial(run.floor, d) for d in run.datasets]
        steps += [functools.partial(run.views, d) for d in run.datasets if d.name == "lz4"]
        for rep in range(args.reps):
            log(f"repetition {rep + 1}/{args.reps}")
            k = rep * len(steps) // args.reps
            for step in steps[k:] + steps[:k]:
                step()
        ok = report(run)
        if args.plot:
            names = [d.name for d in run.datasets]
            plot(names, run.median, run.nbytes / 1e9, FLOOR_MAX, Path(args.plot))
            log(f"  drawn in {args.plot}")
        log(f"  load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
        (run.work / "last-results.json").write_text(
            json.dumps(
                {
                    "nbytes": run.nbytes,
                    "reps": args.reps,
                    "results": run.results,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                },
                indent=1,
            )
        )
        return 0 if ok else 1
    except KeyboardInterrupt:
        log("bench: interrupted")
        return 130
    except (BenchError, OSError) as e:
        log(f"bench: {e}")
        if run.logfile.exists():
            for line in run.logfile.read_text(errors="replace").splitlines()[-15:]:
                log(f"  | {line}")
        return 2
    finally:
        with contextlib.suppress(BenchError):
            unmount(args.zarrmount, run.mnt)
        if args.clean:
            for d in run.datasets:
                shutil.rmtree(d.path(run.work, run.rows), ignore_errors=True)
            with contextlib.suppress(OSError):
                (run.work / "plain.bin").unlink()


def prepare(run: Run) -> None:
    """Write missing datasets, check each mount against zarr-python, measure the references
    that need no mount."""
    log("datasets:")
    for ds in run.datasets:
        path = ensure(ds, run.work, run.rows)
        log(f"  {ds.label:<24} {path.name}: {stored_bytes(path) / 1e9:.3f} GB stored")
    log("correctness guard (fresh mounts, bytes against zarr-python):")
    for ds in run.datasets:
        arr = zarr.open_array(str(ds.array_path(run.work, run.rows)), mode="r")
        with Mount(run.args.zarrmount, ds.path(run.work, run.rows), run.mnt, run.logfile, []):
            problems = verify(ds.mounted_file(run.mnt), arr)
        if problems:
            raise BenchError(f"{ds.name}: the mount differs from zarr-python: {problems}")
    log("references without a mount:")
    for ds in run.datasets:
        if ds.compressor and not ds.sharded:
            for _ in range(run.args.reps):
                run.decode_ceiling(ds)
    for _ in range(run.args.reps):
        run.plain_file()
        run.disk()


if __name__ == "__main__":
    sys.exit(main())
