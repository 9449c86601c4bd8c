"""The GDAL case of scripts/bench --more (``--cases gdal``, issue #30): what GDAL users
run, through the mount against GDAL's own Zarr driver on the same store.

A 256 MiB float32 array (8192 x 8192, v2 blosc-lz4, 1024 x 1024 chunks, written by
zarr-python): ``gdal_translate -of ENVI`` of the whole array through the mounted file's
ENVI header (``-o sidecars=envi``) and through ``ZARR:"store":/dem``, and of a 2048 x 2048
window (``-srcwin``) the same two ways. The same window of a v3 zstd copy and of a sharded
v3 copy, which GDAL 3.6's driver cannot open, through the mount against zarr-python
reading it into NumPy (a fresh process, timed whole as gdal_translate is). Every variant from a
fresh mount and a cold start (page cache dropped, store files and GDAL's libraries read
back in), alternating over repetitions; outputs compared.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _bench_data as d
import _bench_sys as b
import numcodecs
import numpy as np
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

SIDE, CHUNK, WINDOW = 8192, 1024, 2048
SRCWIN = ["-srcwin", "0", "0", str(WINDOW), str(WINDOW)]
DATA_VERSION = 1
MOUNT_OPTS = ["sidecars=envi"]


def _field() -> np.ndarray:
    y = np.arange(SIDE, dtype=np.float32)[:, None]
    x = np.arange(SIDE, dtype=np.float32)[None, :]
    v = np.sin(x / 300) * np.cos(y / 200) * 100
    v += np.random.default_rng(1).standard_normal((SIDE, SIDE), dtype=np.float32) * 0.1
    v.view(np.uint32)[...] &= np.uint32(0xFFFFE000)  # about 3 significant digits kept
    return v


def _ensure(work: Path) -> dict[str, Path]:
    """The three stores (kept between runs): v2 lz4 for GDAL's driver, v3 zstd, sharded."""
    common = {"chunks": (CHUNK, CHUNK), "dtype": "<f4"}
    blosc = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")

    def v2_lz4(path: Path) -> None:
        lz4 = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
        group = zarr.open_group(str(path), mode="w", zarr_format=2)
        group.create_array("dem", shape=(SIDE, SIDE), compressors=lz4, **common)[:] = _field()

    def v3(path: Path, **codecs) -> None:
        zarr.create_array(str(path), shape=(SIDE, SIDE), **codecs, **common)[:] = _field()

    writers = {
        "lz4": v2_lz4,
        "zstd": lambda path: v3(path, compressors=ZstdCodec(level=3)),
        "sharded": lambda path: v3(path, shards=(CHUNK, SIDE), compressors=blosc),
    }
    spec = {"version": DATA_VERSION, "side": SIDE}
    return {n: d.kept(work / f"gdal_{n}.zarr", spec, w) for n, w in writers.items()}


def _cold(store: Path, plain: Path) -> None:
    """Page cache dropped, the store's files read back in, GDAL's libraries loaded (a
    tiny translate of a plain file), memory touched: the same start for every variant."""
    b.drop_caches()
    b.read_tree(store)
    subprocess.run(
        [
            "gdal_translate",
            "-q",
            "-of",
            "ENVI",
            "-srcwin",
            "0",
            "0",
            "16",
            "16",
            plain,
            "/dev/null",
        ],
        capture_output=True,
    )
    b.touch_and_free()


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise b.BenchError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.strip()}")
    return time.perf_counter() - t0


ZARR_WINDOW = (
    "import sys, time, zarr, numpy as np; t = time.perf_counter(); "
    f"a = zarr.open_array(sys.argv[1], mode='r')[0:{WINDOW}, 0:{WINDOW}]; "
    "print(time.perf_counter() - t); np.save(sys.argv[2], a)"
)


def _zarr_window(store: Path, out: Path) -> tuple[float, float]:
    """Seconds of the whole process (as gdal_translate's are timed: what a user waits
    for), and of the open and read alone (printed: without the start of Python and the
    import of zarr)."""
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", ZARR_WINDOW, str(store), str(out)], capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise b.BenchError(f"zarr-python window read failed: {r.stderr.strip()}")
    return seconds, float(r.stdout.strip())


class Case:
    def __init__(self, args, work: Path) -> None:
        self.args, self.work = args, work
        self.stores = _ensure(work)
        self.mnt, self.log = work / "mnt", work / "zarrmount.log"
        self.out = work / "gdal-out"
        self.out.mkdir(exist_ok=True)
        self.plain = self.out / "tiny.bin"
        np.zeros((16, 16), "<f4").tofile(self.plain)
        self.plain.with_suffix(".hdr").write_text(
            "ENVI\nsamples = 16\nlines = 16\nbands = 1\nheader offset = 0\n"
            "file type = ENVI Standard\ndata type = 4\ninterleave = bsq\nbyte order = 0\n"
        )
        self.seconds: dict[str, list[float]] = {}

    def _record(self, name: str, seconds: float) -> None:
        self.seconds.setdefault(name, []).append(seconds)
        b.log(f"  {name:<24} {seconds:6.3f} s")

    def mount(self, name: str, store: str, window: bool) -> None:
        path = self.stores[store]
        with b.Mount(self.args.zarrmount, path, self.mnt, self.log, MOUNT_OPTS):
            src = self.mnt / "dem" if store == "lz4" else self.mnt / "array"
            _cold(path, self.plain)
            out = self.out / f"{name}.bin"
            self._record(
                name,
                _timed(
                    [
                        "gdal_translate",
                        "-q",
                        "-of",
                        "ENVI",
                        *(SRCWIN if window else []),
                        str(src),
                        str(out),
                    ]
                ),
            )

    def driver(self, name: str, window: bool) -> None:
        path = self.stores["lz4"]
        _cold(path, self.plain)
        src = f'ZARR:"{path}":/dem'
        out = self.out / f"{name}.bin"
        self._record(
            name,
            _timed(
                ["gdal_translate", "-q", "-of", "ENVI", *(SRCWIN if window else []), src, str(out)]
            ),
        )

    def zarr_python(self, name: str, store: str) -> None:
        path = self.stores[store]
        _cold(path, self.plain)
        seconds, inside = _zarr_window(path, self.out / f"{name}.npy")
        self._record(name, seconds)
        b.log(f"    (of which open and read {inside:.3f} s)")

    def check(self) -> None:
        """Every output holds the same values as its reference."""
        o = self.out
        pairs = [("mount whole", "driver whole"), ("mount window", "driver window")]
        for ours, theirs in pairs:
            if (o / f"{ours}.bin").read_bytes() != (o / f"{theirs}.bin").read_bytes():
                raise b.BenchError(f"gdal: {ours} and {theirs} differ")
        for store in ("zstd", "sharded"):
            got = np.fromfile(o / f"mount window {store}.bin", "<f4").reshape(WINDOW, WINDOW)
            if not np.array_equal(got, np.load(o / f"zarr-python window {store}.npy")):
                raise b.BenchError(f"gdal: the {store} window differs from zarr-python's")


PAIRS = (
    ("mount whole", "driver whole", "ENVI of the whole array, mount / GDAL's Zarr driver"),
    ("mount window", "driver window", f"{WINDOW}^2 window, mount / GDAL's Zarr driver"),
    ("mount window zstd", "zarr-python window zstd", "v3 zstd window, mount / zarr-python"),
    ("mount window sharded", "zarr-python window sharded", "sharded window, mount / zarr-python"),
)


def run(args, work: Path) -> list[str]:
    if shutil.which("gdal_translate") is None:
        raise b.BenchError("gdal_translate is not installed (Debian: gdal-bin)")
    case = Case(args, work)
    steps = [
        lambda: case.mount("mount whole", "lz4", False),
        lambda: case.driver("driver whole", False),
        lambda: case.mount("mount window", "lz4", True),
        lambda: case.driver("driver window", True),
        lambda: case.mount("mount window zstd", "zstd", True),
        lambda: case.zarr_python("zarr-python window zstd", "zstd"),
        lambda: case.mount("mount window sharded", "sharded", True),
        lambda: case.zarr_python("zarr-python window sharded", "sharded"),
    ]
    for rep in range(args.reps):
        b.log(f" repetition {rep + 1}/{args.reps}")
        for step in steps if rep % 2 == 0 else steps[::-1]:
            step()
    case.check()
    lines = ["GDAL and zarr-python against the mount (seconds, medians; target: ratio <= 1.0)"]
    for ours, theirs, label in PAIRS:
        a, c = statistics.median(case.seconds[ours]), statistics.median(case.seconds[theirs])
        verdict = "ok  " if a <= c else "MISS"
        lines.append(f"  {verdict} {label:<52} {a:6.3f} / {c:6.3f} = {a / c:.2f}x")
    return lines
