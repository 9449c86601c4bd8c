"""The GDAL case of scripts/bench --more (``--cases gdal``, issues #30 and #43): what GDAL
users run, through the mount against GDAL's own Zarr driver on the same store.

A 256 MiB float32 array (8192 x 8192, v2 blosc-lz4, 1024 x 1024 chunks, written by
zarr-python): ``gdal_translate -of ENVI`` of the whole array through the mounted file's
ENVI header (``-o sidecars=envi``) and through ``ZARR:"store":/dem``, and of a 2048 x 2048
window (``-srcwin``) the same two ways. A 1 GiB one (16384 x 16384, otherwise the same)
the same four ways, the mount's side through the tiled TIFF view (``-o sidecars=tiff``,
``dem.tif``, one tile per chunk). The same window of a v3 zstd copy and of a sharded
v3 copy, which GDAL 3.6's driver cannot open, through the mount against zarr-python
reading it into NumPy (a fresh process, timed whole as gdal_translate is). Every variant from a
fresh mount and a cold start (page cache dropped, store files and GDAL's libraries read
back in), alternating over repetitions; outputs compared. Each timed as the seconds a
user waits and as CPU seconds (the mount's side with its daemon's), the measure of the
other cases: on two shared cores the seconds waited count whatever else runs. Targets:
every ratio <= 1.0 but the tiled view's whole array, <= 1.1. About four minutes with
three repetitions, once the stores are written (16 s, all four).
"""

from __future__ import annotations

import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench_data as d
import _bench_sys as b
import numcodecs
import numpy as np
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

SIDE, BIG_SIDE, CHUNK, WINDOW = 8192, 16384, 1024, 2048
DATA_VERSION = 1
# per store: the file gdal_translate opens in its mount, and the views the mount shows
MOUNTED = {
    "lz4": ("dem", "sidecars=envi"),
    "zstd": ("array", "sidecars=envi"),
    "sharded": ("array", "sidecars=envi"),
    "big": ("dem.tif", "sidecars=tiff"),
}


def _field(side: int) -> np.ndarray:
    y = np.arange(side, dtype=np.float32)[:, None]
    x = np.arange(side, dtype=np.float32)[None, :]
    v = np.sin(x / 300) * np.cos(y / 200) * 100
    v += np.random.default_rng(1).standard_normal((side, side), dtype=np.float32) * 0.1
    v.view(np.uint32)[...] &= np.uint32(0xFFFFE000)  # about 3 significant digits kept
    return v


def _ensure(work: Path) -> dict[str, Path]:
    """The stores (kept between runs): v2 lz4 for GDAL's driver (8192 and 16384 square),
    v3 zstd, sharded."""
    common = {"chunks": (CHUNK, CHUNK), "dtype": "<f4"}
    blosc = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")

    def v2_lz4(path: Path, side: int) -> None:
        lz4 = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
        group = zarr.open_group(str(path), mode="w", zarr_format=2)
        group.create_array("dem", shape=(side, side), compressors=lz4, **common)[:] = _field(side)

    def v3(path: Path, **codecs) -> None:
        zarr.create_array(str(path), shape=(SIDE, SIDE), **codecs, **common)[:] = _field(SIDE)

    writers = {
        "lz4": (SIDE, lambda path: v2_lz4(path, SIDE)),
        "zstd": (SIDE, lambda path: v3(path, compressors=ZstdCodec(level=3))),
        "sharded": (SIDE, lambda path: v3(path, shards=(CHUNK, SIDE), compressors=blosc)),
        "big": (BIG_SIDE, lambda path: v2_lz4(path, BIG_SIDE)),
    }
    return {
        n: d.kept(work / f"gdal_{n}.zarr", {"version": DATA_VERSION, "side": side}, write)
        for n, (side, write) in writers.items()
    }


def _translate(src: str, out: str, window: int | None) -> list[str]:
    """The one gdal_translate command of every variant: ENVI of the whole of ``src``, or
    of its top left ``window`` x ``window``."""
    srcwin = ["-srcwin", "0", "0", str(window), str(window)] if window else []
    return ["gdal_translate", "-q", "-of", "ENVI", *srcwin, src, out]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Seconds waited for ``cmd``, and its CPU seconds."""
    t0, c0 = time.perf_counter(), _children_cpu()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise b.BenchError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.strip()}")
    return time.perf_counter() - t0, _children_cpu() - c0


def _cold(store: Path, plain: Path) -> None:
    """Page cache dropped, the store's files read back in, GDAL's libraries loaded (a
    tiny translate of a plain file, into a file: ENVI fails on /dev/null, after leaving
    /dev/null.hdr behind), memory touched: the same start for every variant."""
    b.drop_caches()
    b.read_tree(store)
    _timed(_translate(str(plain), str(plain.with_name("libraries.bin")), 16))
    b.touch_and_free()


ZARR_WINDOW = (
    "import sys, time, zarr, numpy as np; t = time.perf_counter(); "
    f"a = zarr.open_array(sys.argv[1], mode='r')[0:{WINDOW}, 0:{WINDOW}]; "
    "print(time.perf_counter() - t); np.save(sys.argv[2], a)"
)


def _zarr_window(store: Path, out: Path) -> tuple[float, float, float]:
    """Seconds of the whole process (as gdal_translate's are timed: what a user waits
    for), its CPU seconds, and the open and read alone (printed: without the start of
    Python and the import of zarr)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    r = subprocess.run(
        [sys.executable, "-c", ZARR_WINDOW, str(store), str(out)], capture_output=True, text=True
    )
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if r.returncode != 0:
        raise b.BenchError(f"zarr-python window read failed: {r.stderr.strip()}")
    return seconds, cpu, float(r.stdout.strip())


class Case:
    def __init__(self, args, work: Path) -> None:
        self.args, self.work = args, work
        self.stores = _ensure(work)
        self.mnt, self.log = work / "mnt", work / "zarrmount.log"
        # outputs in memory: writing a GiB back to disk took 1.2 to 2.8 s of sys time from
        # run to run, the same for either reader, and hid what the readers cost
        shm = Path("/dev/shm")
        self.out = Path(tempfile.mkdtemp(prefix="gdal-out-", dir=shm if shm.is_dir() else work))
        self.plain = self.out / "tiny.bin"
        np.zeros((16, 16), "<f4").tofile(self.plain)
        self.plain.with_suffix(".hdr").write_text(
            "ENVI\nsamples = 16\nlines = 16\nbands = 1\nheader offset = 0\n"
            "file type = ENVI Standard\ndata type = 4\ninterleave = bsq\nbyte order = 0\n"
        )
        self.seconds: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}  # of gdal_translate, and of the daemon serving it

    def _record(self, name: str, seconds: float, cpu: float | None = None) -> None:
        self.seconds.setdefault(name, []).append(seconds)
        if cpu is not None:
            self.cpu.setdefault(name, []).append(cpu)
        used = f"  (CPU {cpu:6.3f} s)" if cpu is not None else ""
        b.log(f"  {name:<24} {seconds:6.3f} s{used}")

    def _gdal(self, name: str, src: str, window: bool, daemon: int | None = None) -> None:
        out = str(self.out / f"{name}.bin")
        before = b.cpu_seconds(daemon) or 0.0
        seconds, cpu = _timed(_translate(src, out, WINDOW if window else None))
        self._record(name, seconds, cpu + (b.cpu_seconds(daemon) or 0.0) - before)

    def mount(self, name: str, store: str, window: bool) -> None:
        path = self.stores[store]
        file, views = MOUNTED[store]
        with b.Mount(self.args.zarrmount, path, self.mnt, self.log, [views]):
            _cold(path, self.plain)
            self._gdal(name, str(self.mnt / file), window, b.daemon_pid(self.mnt))

    def driver(self, name: str, store: str, window: bool) -> None:
        path = self.stores[store]
        _cold(path, self.plain)
        self._gdal(name, f'ZARR:"{path}":/dem', window)

    def zarr_python(self, name: str, store: str) -> None:
        path = self.stores[store]
        _cold(path, self.plain)
        seconds, cpu, inside = _zarr_window(path, self.out / f"{name}.npy")
        self._record(name, seconds, cpu)
        b.log(f"    (of which open and read {inside:.3f} s)")

    def check(self) -> None:
        """Every output holds the same values as its reference: GDAL's outputs the same
        bytes, the mount's windows the same values as zarr-python's."""
        o = self.out
        for ours, theirs, _, _ in PAIRS:
            if theirs.startswith("zarr-python"):
                got = np.fromfile(o / f"{ours}.bin", "<f4").reshape(WINDOW, WINDOW)
                same = np.array_equal(got, np.load(o / f"{theirs}.npy"))
            else:
                same = (o / f"{ours}.bin").read_bytes() == (o / f"{theirs}.bin").read_bytes()
            if not same:
                raise b.BenchError(f"gdal: {ours} and {theirs} differ")


# (the mount's variant, the reference, the row's label, the largest ratio accepted)
PAIRS = (
    ("mount whole", "driver whole", "ENVI of the whole array, mount / GDAL's Zarr driver", 1.0),
    ("mount window", "driver window", f"{WINDOW}^2 window, mount / GDAL's Zarr driver", 1.0),
    ("tif whole", "driver whole big", f"{BIG_SIDE}^2 whole, tiled .tif / GDAL's Zarr driver", 1.1),
    ("tif window", "driver window big", f"{BIG_SIDE}^2, {WINDOW}^2 window, .tif / driver", 1.0),
    ("mount window zstd", "zarr-python window zstd", "v3 zstd window, mount / zarr-python", 1.0),
    (
        "mount window sharded",
        "zarr-python window sharded",
        "sharded window, mount / zarr-python",
        1.0,
    ),
)


def run(args, work: Path) -> list[str]:
    if shutil.which("gdal_translate") is None:
        raise b.BenchError("gdal_translate is not installed (Debian: gdal-bin)")
    b.log(f"  gdal_translate: {shutil.which('gdal_translate')}")
    case = Case(args, work)
    steps = [
        lambda: case.mount("mount whole", "lz4", False),
        lambda: case.driver("driver whole", "lz4", False),
        lambda: case.mount("mount window", "lz4", True),
        lambda: case.driver("driver window", "lz4", True),
        lambda: case.mount("tif whole", "big", False),
        lambda: case.driver("driver whole big", "big", False),
        lambda: case.mount("tif window", "big", True),
        lambda: case.driver("driver window big", "big", True),
        lambda: case.mount("mount window zstd", "zstd", True),
        lambda: case.zarr_python("zarr-python window zstd", "zstd"),
        lambda: case.mount("mount window sharded", "sharded", True),
        lambda: case.zarr_python("zarr-python window sharded", "sharded"),
    ]
    for rep in range(args.reps):
        b.log(f" repetition {rep + 1}/{args.reps}")
        for step in steps if rep % 2 == 0 else steps[::-1]:
            step()
    try:
        case.check()
    finally:
        shutil.rmtree(case.out, ignore_errors=True)
    return _summary(case)


def _summary(case: Case) -> list[str]:
    """Each pair's medians as the time a user waits and, as the other cases measure, as
    CPU seconds (the mount's side with the daemon's): on two shared cores the first
    also counts whatever else ran."""
    lines = ["GDAL and zarr-python against the mount (seconds, medians; target: ratio <= the last)"]
    for title, measured in (("waited", case.seconds), ("CPU", case.cpu)):
        lines.append(f" {title}:")
        for ours, theirs, label, target in PAIRS:
            if ours not in measured or theirs not in measured:
                continue
            a, c = statistics.median(measured[ours]), statistics.median(measured[theirs])
            verdict = "ok  " if a <= target * c else "MISS"
            lines.append(f"  {verdict} {label:<52} {a:6.3f} / {c:6.3f} = {a / c:.2f}x <= {target}")
    return lines
