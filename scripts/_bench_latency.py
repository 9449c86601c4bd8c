"""The latency case of scripts/bench --more (``--cases latency``, issue #41): zarrmount
against zarr-python through the same proxy (scripts/_bench_proxy.py) in front of a moto S3
server on loopback, the proxy adding ``--latency-ms`` (default 30) to each request.

What a user of a distant store waits for, each row a ratio against its target:

1. a point's time series (240 x 128 x 128 float32, chunks 1 x 128 x 128): one 4-byte
   ``pread`` per time step on a fresh mount, against ``arr[:, y, x]`` (<= 1.5x);
2. ``ls -lR`` of a fresh mount of 120 small arrays in 12 groups (no consolidated metadata)
   against zarr-python opening the root group and every member (<= 1.5x);
3. a 32 MiB array read whole on a fresh mount whose disk cache holds every chunk, against
   a mount of a local copy (<= 1.25x);
4. one element of an array of 10,000 chunks of 8 x 10, another chunk at once, another
   once ``metadata_ttl`` has run out, against ``arr[i, j]`` (<= 1.5x each); the same for
   100,000 chunks (one repetition, last: moto's listings of so many keys take minutes of
   its CPU, which would land on whatever ran next);
5. 64 MiB written into a v2 blosc-lz4 array on an ``rw`` mount (one ``pwrite``, then
   ``fsync``) against ``arr[...] = data`` (<= 1.25x);
6. a store outage with ``-o timeout=10``, refused and then hung: the first cold read fails
   within 12 s, a group listed before lists within 2 s, a cold read of another array fails
   within 2 s, and reads succeed within 10 s of the store's return;
7. a link-bound cold read: the proxy shares ``--link-mbps`` (default 100 MB/s) among all
   connections; a 256 MiB array read through a mount against 16 plain GETs at once
   (>= 0.9x of their throughput);
8. ``zarrmount warm`` of that 256 MiB array into an empty disk cache against plain GETs
   of its objects, 64 at once (<= 1.25x); then, the store refusing, a fresh mount on that
   disk cache comes up and reads it whole, equal to the local copy.

Every row prints the requests it made through the proxy (by kind, the most in flight at
once): with 30 ms a request, how many requests a row makes, and how many wait at once, is
most of its time. The datasets are written once by zarr-python under ``.bench/latency/``
and put into moto's memory when it starts (no upload through HTTP: 110,000 small objects
would take minutes). Every read of a mount, and every zarr-python measurement, runs in a
child process with a time bound (scripts/_bench_latency_child.py), so a stalled mount is a
missed row, never a stalled bench.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _bench_data as d
import _bench_remote as remote
import _bench_sys as b
import numpy as np
import zarr
from _bench_proxy import ProxyProcess, describe

BUCKET = "bench"
PREFIX = "latency/"
DATA_VERSION = 1
CHILD = Path(__file__).resolve().parent / "_bench_latency_child.py"
DEFAULT_LATENCY_MS = 30.0

SERIES = (240, 128, 128)
SERIES_POINT = (37, 91)
TREE_GROUPS, TREE_ARRAYS = 12, 10
CACHED_ROWS, CACHED_CHUNKS = 512, (128, 2048)  # 32 MiB of field rows in 1 MiB chunks
TINY = {"tiny10k": (800, 1000), "tiny100k": (8000, 1000)}
TINY_CHUNKS = (8, 10)
TINY_POINTS = ((0.154, 0.456), (0.764, 0.087), (0.503, 0.903))  # fractions of the shape
TTL = 2.0
WRITE_ROWS = 1024  # 64 MiB of field rows in 4 MiB chunks
LINK_ROWS = 4096  # 256 MiB, uncompressed, 4 MiB chunks
LINK_GETS = 16
OUTAGE_TIMEOUT = 10


def bucket(name: str) -> str:
    """Each dataset in a bucket of its own: moto lists a prefix by walking every key of
    its bucket (the link array's 66 keys: 60 ms beside the tiny arrays' 110,000, 17 ms
    alone), where S3's listing of a prefix costs what it returns."""
    return f"{BUCKET}-{name}"


def url(name: str) -> str:
    return f"s3://{bucket(name)}/{PREFIX}{name}.zarr"


def row(met: bool, text: str) -> str:
    return f"  {'ok  ' if met else 'MISS'} {text}"


def ratio_row(what: str, mine: float, ref: float, limit: float, note: str = "") -> str:
    """A row of ``what``'s seconds against the reference's, met when their ratio is at most
    ``limit``; ``note`` goes inside the parentheses of the target."""
    return row(
        mine <= limit * ref,
        f"{what} {mine:.3f} / {ref:.3f} s = {mine / ref:.2f}x (<= {limit:g}{note})",
    )


def turns(rep: int, items: Sequence[str]) -> Sequence[str]:
    """The variants in this repetition's order: reversed every other one."""
    return items if rep % 2 == 0 else items[::-1]


# --- datasets, written once by zarr-python and kept ----------------------------------


def _write_series(path: Path) -> None:
    arr = zarr.create_array(
        str(path), shape=SERIES, chunks=(1, *SERIES[1:]), dtype="<f4", zarr_format=3
    )
    arr[:] = np.arange(np.prod(SERIES), dtype="<f4").reshape(SERIES)


def _write_tree(path: Path) -> None:
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    for g in range(TREE_GROUPS):
        group = root.create_group(f"g{g:02d}")
        for a in range(TREE_ARRAYS):
            arr = group.create_array(f"a{a}", shape=(16, 16), chunks=(16, 16), dtype="<i2")
            arr[:] = g * TREE_ARRAYS + a + 1


def _write_cached(path: Path) -> None:
    arr = d.create_v2(path, (CACHED_ROWS, d.NCOLS), chunks=CACHED_CHUNKS)
    arr[:] = d.generate_block(0, CACHED_ROWS)


def _tiny_writer(shape: tuple[int, int]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        arr = zarr.create_array(
            str(path), shape=shape, chunks=TINY_CHUNKS, dtype="<f4", zarr_format=3
        )
        arr[:] = np.arange(1, shape[0] * shape[1] + 1, dtype="<f4").reshape(shape)

    return write


def _write_link(path: Path) -> None:
    arr = d.create_v2(path, (LINK_ROWS, d.NCOLS), lz4=False)
    for r0 in range(0, LINK_ROWS, d.CHUNKS[0]):
        arr[r0 : r0 + d.CHUNKS[0]] = d.generate_block(r0, r0 + d.CHUNKS[0])


DATASETS: dict[str, Callable[[Path], None]] = {
    "series": _write_series,
    "tree": _write_tree,
    "cached": _write_cached,
    **{name: _tiny_writer(shape) for name, shape in TINY.items()},
    "link": _write_link,
}


def datasets(work: Path) -> dict[str, Path]:
    """Every dataset's local copy, written now unless a valid one is kept."""
    out = {}
    for name, write in DATASETS.items():
        t0 = time.perf_counter()
        spec = {"version": DATA_VERSION, "name": name}
        out[name] = d.kept(work / "latency" / f"{name}.zarr", spec, write)
        if time.perf_counter() - t0 > 1:
            b.log(f"  wrote {name} in {time.perf_counter() - t0:.1f} s")
    return out


# --- the measuring context -------------------------------------------------------------


class Bench:
    """The proxy, the mount point and the child processes every row uses."""

    def __init__(self, args: argparse.Namespace, work: Path, proxy: ProxyProcess) -> None:
        self.args, self.work, self.proxy = args, work, proxy
        self.mnt, self.logfile = work / "mnt", work / "zarrmount.log"
        self.reps: int = args.reps

    def mount(self, src: str | Path, *opts: str, mode: str = "ro") -> b.Mount:
        """A fresh mount of ``src``; an S3 URL through the proxy."""
        if str(src).startswith("s3://"):
            opts = (f"so.endpoint_url={self.proxy.url}", *opts)
        return b.Mount(self.args.zarrmount, src, self.mnt, self.logfile, list(opts), mode)

    def child(self, *argv: str, bound: float) -> dict[str, Any] | None:
        """One subcommand of the child script, killed (by its PID) after ``bound``
        seconds: its JSON answer, or None when it timed out."""
        try:
            r = subprocess.run(
                [sys.executable, str(CHILD), *map(str, argv)],
                capture_output=True,
                text=True,
                timeout=bound,
            )
        except subprocess.TimeoutExpired:
            b.log(f"  WARNING: {argv[0]} did not finish within {bound:g} s (killed)")
            return None
        if r.returncode != 0:
            raise b.BenchError(f"{argv[0]} failed: {r.stderr.strip()[-2000:]}")
        return json.loads(r.stdout)

    def counted(self) -> str:
        """The requests since the last reset, described, and a reset."""
        return describe(self.proxy.counts())

    def measured(self, *argv: str, bound: float) -> tuple[dict[str, Any] | None, str]:
        """``child`` with the proxy's counts reset first: its answer and its requests."""
        self.proxy.reset()
        ans = self.child(*argv, bound=bound)
        return ans, self.counted()


def seconds_of(answer: dict[str, Any] | None, key: str = "seconds") -> float:
    """A child's seconds, infinite when it timed out (the row is then missed)."""
    if answer is None:
        return float("inf")
    value = answer[key]
    return float(sum(value)) if isinstance(value, list) else float(value)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("inf")


# --- 1. a point's time series ---------------------------------------------------------


def series(bench: Bench) -> list[str]:
    """One 4-byte pread per time step through a fresh mount, against arr[:, y, x]."""
    t, h, w = SERIES
    y, x = SERIES_POINT
    flat = [(k * h + y) * w + x for k in range(t)]
    offsets = json.dumps([i * 4 for i in flat])
    got: dict[str, list[float]] = {"mount": [], "zarr": []}
    reqs: dict[str, str] = {}
    for rep in range(bench.reps):
        for which in turns(rep, ("mount", "zarr")):
            if which == "mount":
                with bench.mount(url("series")):
                    ans, reqs[which] = bench.measured(
                        "preads", bench.mnt / "array", offsets, 4, bound=120
                    )
            else:
                ans, reqs[which] = bench.measured(
                    "zarr_series", url("series"), bench.proxy.url, y, x, bound=120
                )
            if ans is not None and ans["values"] != [float(i) for i in flat]:
                raise b.BenchError(f"time series ({which}): wrong values")
            got[which].append(seconds_of(ans))
            b.log(f"  series {which:<5} {got[which][-1]:7.3f} s  ({reqs[which]})")
    mount, ref = median(got["mount"]), median(got["zarr"])
    return [
        f"time series of one point, {t} steps of chunks 1x{h}x{w} (medians of {bench.reps})",
        ratio_row(f"mount {t} preads / zarr-python arr[:, y, x] ", mount, ref, 1.5),
        f"       requests: mount {reqs['mount']}; zarr-python {reqs['zarr']} (with its open)",
    ]


# --- 2. ls -lR of a hierarchy -----------------------------------------------------------


def tree(bench: Bench) -> list[str]:
    """``ls -lR`` of a fresh mount against zarr-python opening every member."""
    got: dict[str, list[float]] = {"mount": [], "zarr": []}
    mounted: list[float] = []
    reqs: dict[str, str] = {}
    for rep in range(bench.reps):
        for which in turns(rep, ("mount", "zarr")):
            if which == "mount":
                with bench.mount(url("tree")) as m:
                    mounted.append(m.mount_seconds)
                    ans, reqs[which] = bench.measured("walk", bench.mnt, bound=120)
            else:
                ans, reqs[which] = bench.measured(
                    "zarr_tree", url("tree"), bench.proxy.url, bound=120
                )
                if ans is not None and ans["arrays"] != TREE_GROUPS * TREE_ARRAYS:
                    raise b.BenchError(f"zarr-python found {ans['arrays']} arrays")
            got[which].append(seconds_of(ans))
            b.log(f"  tree {which:<5} {got[which][-1]:7.3f} s  ({reqs[which]})")
    mount, ref = median(got["mount"]), median(got["zarr"])
    n = TREE_GROUPS * TREE_ARRAYS
    return [
        f"hierarchy of {n} arrays in {TREE_GROUPS} groups, no consolidated metadata",
        ratio_row("ls -lR of a fresh mount / zarr-python open + members", mount, ref, 1.5)
        + f"; the mount itself took {median(mounted):.2f} s",
        f"       requests: mount {reqs['mount']}; zarr-python {reqs['zarr']}",
    ]


# --- 3. a remount from the disk cache ---------------------------------------------------


def disk_cache(bench: Bench, local: Path) -> list[str]:
    """32 MiB read whole on a fresh mount with every chunk in its disk cache, against a
    mount of a local copy; both stores' files in the page cache, fresh memory touched."""
    disk = bench.work / "latency-disk-cache"
    shutil.rmtree(disk, ignore_errors=True)
    cached = (f"disk_cache={disk}",)
    nbytes = CACHED_ROWS * d.NCOLS * 4
    with bench.mount(url("cached"), *cached):
        _read_whole(bench, nbytes)  # fills it
    got: dict[str, list[float]] = {"disk": [], "local": []}
    reqs = "-"
    try:
        for rep in range(bench.reps):
            for which in turns(rep, ("disk", "local")):
                b.read_tree(disk if which == "disk" else local)
                src = url("cached") if which == "disk" else local
                with bench.mount(src, *(cached if which == "disk" else ())):
                    b.touch_and_free()
                    bench.proxy.reset()
                    got[which].append(_read_whole(bench, nbytes))
                    if which == "disk":
                        reqs = bench.counted()
                b.log(f"  remount {which:<5} {got[which][-1]:7.3f} s")
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    k, loc = median(got["disk"]), median(got["local"])
    return [
        f"{nbytes >> 20} MiB read whole on a fresh mount, every chunk in its disk cache",
        ratio_row("disk-cached remount / mount of a local copy", k, loc, 1.25),
        f"       requests of the disk-cached remount: {reqs}",
    ]


def _read_whole(bench: Bench, nbytes: int) -> float:
    ans = bench.child("sequential", bench.mnt / "array", bound=120)
    if ans is not None and ans["bytes"] != nbytes:
        raise b.BenchError(f"read {ans['bytes']} bytes of {nbytes}")
    return seconds_of(ans)


# --- 4. one element of an array of tiny chunks ----------------------------------------

READS = ("first", "another chunk", "after the TTL")


def tiny(bench: Bench, name: str, reps: int) -> list[str]:
    """One element, another chunk at once, another after the TTL, on a fresh mount with
    ``metadata_ttl`` 2, against zarr-python ``arr[i, j]`` the same way."""
    rows, cols = TINY[name]
    points = [(int(fy * rows), int(fx * cols)) for fy, fx in TINY_POINTS]
    expect = [float(i * cols + j + 1) for i, j in points]
    got: dict[tuple[str, str], list[float]] = {}
    reqs: dict[tuple[str, str], str] = {}
    for rep in range(reps):
        for which in turns(rep, ("mount", "zarr")):
            if which == "mount":
                seconds, values, counted = _tiny_mount(bench, name, points, cols)
            else:
                seconds, values, counted = _tiny_zarr(bench, name, points)
            if values is not None and values != expect:
                raise b.BenchError(f"{name} ({which}): read {values}, expected {expect}")
            for read, s, c in zip(READS, seconds, counted, strict=True):
                got.setdefault((which, read), []).append(s)
                reqs[(which, read)] = c
            shown = "  ".join(
                f"{r} {s * 1000:7.1f} ms" for r, s in zip(READS, seconds, strict=True)
            )
            b.log(f"  {name} {which:<5} {shown}")
    chunks = rows // TINY_CHUNKS[0] * (cols // TINY_CHUNKS[1])
    lines = [
        f"one element of {rows} x {cols} float32 in {chunks:,} chunks of "
        f"{TINY_CHUNKS[0]} x {TINY_CHUNKS[1]} (metadata_ttl={TTL:g}; medians of {reps})"
    ]
    for read in READS:
        mount, ref = median(got[("mount", read)]), median(got[("zarr", read)])
        lines.append(
            row(
                mount <= 1.5 * ref,
                f"{read:<14} mount / zarr-python arr[i, j] {mount * 1000:8.1f} / "
                f"{ref * 1000:6.1f} ms = {mount / ref:.2f}x (<= 1.5)",
            )
        )
        lines.append(f"       requests: mount {reqs[('mount', read)]}")
    lines.append(f"       requests: zarr-python, all three reads: {reqs[('zarr', READS[0])]}")
    return lines


def _tiny_mount(
    bench: Bench, name: str, points: list[tuple[int, int]], cols: int
) -> tuple[list[float], list[float] | None, list[str]]:
    offsets = [(i * cols + j) * 4 for i, j in points]
    path = bench.mnt / "array"
    with bench.mount(url(name), f"metadata_ttl={TTL:g}"):
        bench.proxy.reset()
        now = bench.child("preads", path, json.dumps(offsets[:1]), 4, bound=120)
        c1 = bench.counted()
        soon = bench.child("preads", path, json.dumps(offsets[1:2]), 4, bound=120)
        c2 = bench.counted()
        time.sleep(TTL + 0.5)
        bench.proxy.reset()
        late = bench.child("preads", path, json.dumps(offsets[2:]), 4, bound=120)
        c3 = bench.counted()
    answers = (now, soon, late)
    values = None if None in answers else [a["values"][0] for a in answers]  # type: ignore[index]
    return [seconds_of(a) for a in answers], values, [c1, c2, c3]


def _tiny_zarr(
    bench: Bench, name: str, points: list[tuple[int, int]]
) -> tuple[list[float], list[float] | None, list[str]]:
    ans, counted = bench.measured(
        "zarr_points", url(name), bench.proxy.url, json.dumps(points), TTL + 0.5, bound=180
    )
    if ans is None:
        return [float("inf")] * 3, None, [counted] * 3
    return ans["seconds"], ans["values"], [counted] * 3


# --- 5. a write through an rw mount -----------------------------------------------------


def write(bench: Bench, direct: str) -> list[str]:
    """64 MiB into a fresh v2 blosc-lz4 array: one pwrite then fsync on an rw mount,
    against zarr-python ``arr[...] = data``; the daemon's CPU seconds alongside."""
    got: dict[str, list[float]] = {"mount": [], "zarr": []}
    cpu: list[float] = []
    reqs: dict[str, str] = {}
    expect = d.generate_block(0, WRITE_ROWS)
    for rep in range(bench.reps):
        for which in turns(rep, ("mount", "zarr")):
            _fresh_write_target(direct)
            b.touch_and_free()
            if which == "mount":
                with bench.mount(url("write"), mode="rw") as m:
                    c0 = b.cpu_seconds(m.pid)
                    ans, reqs[which] = bench.measured(
                        "pwrite", bench.mnt / "array", WRITE_ROWS, bound=180
                    )
                    c1 = b.cpu_seconds(m.pid)
                    if c0 is not None and c1 is not None:
                        cpu.append(c1 - c0)
            else:
                ans, reqs[which] = bench.measured(
                    "zarr_write", url("write"), bench.proxy.url, bound=180
                )
            got[which].append(seconds_of(ans))
            b.log(f"  write {which:<5} {got[which][-1]:7.3f} s  ({reqs[which]})")
            if ans is not None:
                _check_written(direct, expect, which)
    mount, ref = median(got["mount"]), median(got["zarr"])
    return [
        f"{WRITE_ROWS * d.NCOLS * 4 >> 20} MiB written into a v2 blosc-lz4 array of 4 MiB chunks",
        ratio_row("rw mount pwrite + fsync / zarr-python arr[...] = data", mount, ref, 1.25)
        + f"; daemon {median(cpu):.2f} CPU-s",
        f"       requests: mount {reqs['mount']}; zarr-python {reqs['zarr']}",
    ]


def _fresh_write_target(direct: str) -> None:
    """An empty array at url("write"), straight into moto (no latency, untimed)."""
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=direct, skip_instance_cache=True)
    prefix = url("write").removeprefix("s3://")
    if not fs.exists(bucket("write")):
        fs.mkdir(bucket("write"))
    elif fs.exists(prefix):
        fs.rm(prefix, recursive=True)
    d.create_v2(url("write"), (WRITE_ROWS, d.NCOLS), storage_options={"endpoint_url": direct})


def _check_written(direct: str, expect: np.ndarray, which: str) -> None:
    arr = zarr.open_array(url("write"), mode="r", storage_options={"endpoint_url": direct})
    for r in (0, WRITE_ROWS // 2 + 3, WRITE_ROWS - 1):
        if not np.array_equal(arr[r], expect[r]):
            raise b.BenchError(f"write ({which}): row {r} differs after the write")


# --- 6. outages ---------------------------------------------------------------------------

RECOVERY_BOUND = 30.0


def outage(bench: Bench, how: str) -> list[str]:
    """The store refused (``close_upstream``) or hung (``hang``) under a mount with
    ``-o timeout=10``: reads in a group listed before fail or answer in time, and the mount
    reads again once the store is back. Every step is a child with its own bound."""
    group = bench.mnt / "g00"
    with bench.mount(url("tree"), f"timeout={OUTAGE_TIMEOUT}"):
        try:
            if not (bench.child("listing", group, bound=60) or {}).get("ok"):
                raise b.BenchError(f"outage ({how}): the group did not list before the outage")
            bench.proxy.reset()
            getattr(bench.proxy, how)()
            first = bench.child("read", group / "a0", bound=25)
            ls = bench.child("listing", group, bound=10)
            other = bench.child("read", group / "a1", bound=10)
            bench.proxy.restore()
            back = _recovery(bench, group / "a2")
            reqs = bench.counted()
        finally:
            bench.proxy.restore()
    label = {"close_upstream": "refused", "hang": "hung"}[how]
    return [
        f"outage, store {label} (-o timeout={OUTAGE_TIMEOUT}; requests meanwhile: {reqs})",
        _outage_row(first, False, 12, "first cold read fails (EIO)", 25),
        _outage_row(ls, True, 2, "ls of a group listed before", 10),
        _outage_row(other, False, 2, "cold read of another array fails", 10),
        row(
            back <= 10,
            "reads again after the store's return  "
            + (f"{back:.2f} s" if back != float("inf") else f"not within {RECOVERY_BOUND:g} s")
            + " (<= 10 s)",
        ),
    ]


def _outage_row(
    ans: dict[str, Any] | None, want_ok: bool, target: float, what: str, bound: float
) -> str:
    if ans is None:
        return row(False, f"{what:<34} no answer within {bound:g} s (<= {target:g} s)")
    wanted = ans["ok"] if want_ok else (not ans["ok"] and ans["error"] == "Input/output error")
    outcome = "listed" if ans["ok"] and want_ok else ("read" if ans["ok"] else ans["error"])
    met = wanted and ans["seconds"] <= target
    return row(met, f"{what:<34} {outcome} after {ans['seconds']:.2f} s (<= {target:g} s)")


def _recovery(bench: Bench, path: Path) -> float:
    """Seconds from the store's return to the first whole read of ``path``, polled every
    half second; infinite past RECOVERY_BOUND."""
    t0 = time.monotonic()
    while (left := RECOVERY_BOUND - (time.monotonic() - t0)) > 0:
        ans = bench.child("read", path, bound=max(1.0, left))
        if ans is not None and ans["ok"]:
            return time.monotonic() - t0
        time.sleep(0.5)
    return float("inf")


# --- 7. a link-bound read -----------------------------------------------------------------


def link(bench: Bench) -> list[str]:
    """A cold sequential read of 256 MiB through a mount against LINK_GETS plain GETs at
    once, both through one shared link budget: the link, not the cores, the limit."""
    rate = bench.args.link_mbps * 1e6
    nbytes = LINK_ROWS * d.NCOLS * 4
    got: dict[str, list[float]] = {"mount": [], "get": []}
    cpu: dict[str, list[float]] = {"mount": [], "get": []}
    reqs: dict[str, str] = {}
    bench.proxy.set_link(rate)
    try:
        for rep in range(bench.reps):
            for which in turns(rep, ("mount", "get")):
                b.touch_and_free()
                if which == "mount":
                    with bench.mount(url("link")) as m:
                        c0 = b.cpu_seconds(m.pid)
                        ans, reqs[which] = bench.measured(
                            "sequential", bench.mnt / "array", bound=300
                        )
                        c1 = b.cpu_seconds(m.pid)
                        if c0 is not None and c1 is not None:
                            cpu[which].append((c1 - c0) / (nbytes / 1e9))
                else:
                    ans, reqs[which] = bench.measured(
                        "plain_get", url("link"), bench.proxy.url, LINK_GETS, bound=300
                    )
                    if ans is not None:
                        cpu[which].append(ans["cpu"] / (nbytes / 1e9))
                if ans is not None and ans["bytes"] != nbytes:
                    raise b.BenchError(f"link ({which}): {ans['bytes']} bytes of {nbytes}")
                got[which].append(nbytes / seconds_of(ans) / 1e6)
                b.log(f"  link {which:<5} {got[which][-1]:7.1f} MB/s  ({reqs[which]})")
    finally:
        bench.proxy.set_link(None)
    mount, ref = median(got["mount"]), median(got["get"])
    per_gb = {k: f"{median(v):.2f}" if v else "-" for k, v in cpu.items()}
    return [
        f"link-bound cold read of {nbytes >> 20} MiB (uncompressed, 4 MiB chunks; one link "
        f"of {bench.args.link_mbps:g} MB/s shared by every connection)",
        row(
            mount >= 0.9 * ref,
            f"mount / {LINK_GETS} plain GETs at once {mount:.1f} / {ref:.1f} MB/s "
            f"= {mount / ref:.2f}x (>= 0.9); CPU-s/GB daemon {per_gb['mount']}, "
            f"GET process {per_gb['get']}",
        ),
        f"       requests: mount {reqs['mount']}; plain GET {reqs['get']}",
    ]


# --- 8. zarrmount warm --------------------------------------------------------------------

WARM_GETS = 64  # a remote mount's fetches at once (max_fetches' default)


def warm(bench: Bench, local: Path) -> list[str]:
    """``zarrmount warm`` of the 256 MiB array into an empty disk cache, against plain GETs
    of its objects WARM_GETS at once through the same proxy; then, the store refusing, the
    array read whole from a fresh mount's disk cache, compared with the local copy."""
    disk = bench.work / "latency-warm"
    nbytes = LINK_ROWS * d.NCOLS * 4
    got: dict[str, list[float]] = {"warm": [], "get": []}
    reqs: dict[str, str] = {}
    try:
        for rep in range(bench.reps):
            for which in turns(rep, ("warm", "get")):
                b.touch_and_free()
                bench.proxy.reset()
                if which == "warm":
                    got[which].append(_warm_once(bench, disk))
                else:
                    ans = bench.child(
                        "plain_get", url("link"), bench.proxy.url, WARM_GETS, bound=300
                    )
                    got[which].append(seconds_of(ans))
                reqs[which] = bench.counted()
                b.log(f"  warm {which:<5} {got[which][-1]:7.3f} s  ({reqs[which]})")
        outage = _read_through_outage(bench, disk, local, nbytes)
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    mount, ref = median(got["warm"]), median(got["get"])
    return [
        f"zarrmount warm of {nbytes >> 20} MiB (uncompressed, 4 MiB chunks) into an empty "
        "disk cache",
        ratio_row(
            f"zarrmount warm / {WARM_GETS} plain GETs at once",
            mount,
            ref,
            1.25,
            "; the command's start included",
        ),
        f"       requests: warm {reqs['warm']}; plain GET {reqs['get']}",
        outage,
    ]


def _warm_once(bench: Bench, disk: Path) -> float:
    """Seconds of one ``zarrmount warm`` of the array on a fresh mount, its disk cache
    emptied first."""
    shutil.rmtree(disk, ignore_errors=True)
    with bench.mount(url("link"), f"disk_cache={disk}"):
        t0 = time.perf_counter()
        r = subprocess.run(
            [bench.args.zarrmount, "warm", str(bench.mnt / "array")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise b.BenchError(f"zarrmount warm failed: {r.stderr.strip()[-2000:]}")
    return seconds


def _read_through_outage(bench: Bench, disk: Path, local: Path, nbytes: int) -> str:
    """The store refusing, a fresh mount on the warmed disk cache comes up and reads the
    array whole, equal to the local copy's."""
    expected = zarr.open_array(str(local), mode="r")[:]
    want = hashlib.sha256(np.ascontiguousarray(expected).tobytes()).hexdigest()
    bench.proxy.close_upstream()
    try:
        t0 = time.perf_counter()
        with bench.mount(url("link"), f"disk_cache={disk}", f"timeout={OUTAGE_TIMEOUT}"):
            up = time.perf_counter() - t0
            ans, reqs = bench.measured("digest", bench.mnt / "array", bound=300)
    finally:
        bench.proxy.restore()
    same = ans is not None and ans["bytes"] == nbytes and ans["sha256"] == want
    read = f"read in {seconds_of(ans):.2f} s" if ans is not None else "no answer in 300 s"
    return row(
        same,
        f"the store refusing, a fresh mount came up in {up:.1f} s (-o timeout="
        f"{OUTAGE_TIMEOUT}) and read the {nbytes >> 20} MiB from its disk cache: {read}, "
        f"{'equal to' if same else 'NOT equal to'} the local copy (requests: {reqs})",
    )


# --- the case -----------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> list[str]:
    """Every row, in one run, against one moto server and one proxy."""
    t_start = time.perf_counter()
    ms = remote.latency_ms(args, DEFAULT_LATENCY_MS)
    local = datasets(work)
    os.environ.update(remote.KEYS_ENV)
    preload = [(bucket(name), f"{PREFIX}{name}.zarr/", path) for name, path in local.items()]
    lines: list[str] = []
    with remote.moto(preload) as port, ProxyProcess(port, ms / 1000) as proxy:
        b.log(f"  moto holds the datasets (port {port}); the proxy adds {ms:g} ms a request")
        bench = Bench(args, work, proxy)
        direct = f"http://127.0.0.1:{port}"
        steps: list[tuple[str, str, Callable[[], list[str]]]] = [
            ("series", "time series", lambda: series(bench)),
            ("tree", "ls -lR", lambda: tree(bench)),
            ("disk", "disk cache", lambda: disk_cache(bench, local["cached"])),
            ("tiny", "10,000 chunks", lambda: tiny(bench, "tiny10k", bench.reps)),
            ("write", "write", lambda: write(bench, direct)),
            ("refused", "outage, refused", lambda: outage(bench, "close_upstream")),
            ("hung", "outage, hung", lambda: outage(bench, "hang")),
            ("link", "link-bound read", lambda: link(bench)),
            ("warm", "warm", lambda: warm(bench, local["link"])),
            ("tiny100k", "100,000 chunks", lambda: tiny(bench, "tiny100k", 1)),
        ]
        wanted = set(args.latency_rows.split(",")) if args.latency_rows else None
        for key, name, step in steps:
            if wanted is not None and key not in wanted:
                continue
            t0 = time.perf_counter()
            b.log(f" {name}:")
            got = step()
            for line in got:
                b.log(line)
            lines += got
            b.log(f"  ({time.perf_counter() - t0:.0f} s)")
    lines.insert(
        0,
        f"latency: zarrmount against zarr-python through one proxy adding {ms:g} ms to each "
        f"request (case took {time.perf_counter() - t_start:.0f} s)",
    )
    return lines
