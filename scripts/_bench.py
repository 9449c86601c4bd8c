"""Benchmark for scripts/bench: cold sequential read through a zarrmount mount vs zarr-python.

Run through ``scripts/bench`` (which sets up the environment first); ``--help`` lists options.

What is measured, and why it is done this way (see shared/notes: machine.md and fuse.md):

* The dataset is a float32 array (default 1 GiB, 16384 x 16384) in 4 MiB chunks (1024 x 1024)
  compressed with blosc-lz4 (clevel 5, byte shuffle), Zarr v2, written chunk row by chunk row.
  It is kept in ``.bench/`` and reused when present and valid (``--keep`` keeps it after the
  run; without it the dataset is deleted at the end).
* Every repetition of every variant starts cold: the kernel page cache is dropped
  (``sync; echo 3 > /proc/sys/vm/drop_caches``) right before the timed read, so the chunk
  files come from disk, and each mount variant uses a fresh mount (cold chunk cache).
* The mount is read sequentially with 1 MiB ``readv`` calls into one reused, page-aligned,
  pre-touched buffer (fresh memory and misaligned destinations distort timings here).
* zarr-python reads the same array with ``arr[:]`` (a fresh 1 GiB result each time, as users
  do it), and, as a second line, into one reused, pre-touched, page-aligned ``out=`` buffer.
* The kernel sends FUSE reads of at most read_ahead_kb (128 KiB by default) even for 1 MiB
  application reads. The mount is measured as the daemon sets it up and, unless
  ``--ra-kb 0``, again with ``/sys/class/bdi/<dev>/read_ahead_kb`` raised to 1024.
* Variants alternate within each repetition and their order rotates between repetitions;
  throughput varies 20-40 % between runs on these 2-core VMs, so only the ratios measured in
  the same run mean much. Medians are reported next to each repetition.
* Before timing, the mount's bytes are checked against zarr-python for a sample of rows and
  of unaligned ranges crossing chunk boundaries (correctness guard).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numcodecs
import numpy as np
import zarr

ROOT = Path(__file__).resolve().parent.parent
NCOLS = 16384
CHUNKS = (1024, 1024)
DTYPE = np.dtype("<f4")
ARRAY_NAME = "field"
DATA_VERSION = 1  # bump when the generated content changes
READ_SIZE = 1 << 20


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------
# dataset


def compressor() -> numcodecs.Blosc:
    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def dataset_spec(size_gib: float) -> dict:
    rows = max(1, round(size_gib * (1 << 30) / (NCOLS * DTYPE.itemsize)))
    return {
        "version": DATA_VERSION,
        "shape": [rows, NCOLS],
        "chunks": list(CHUNKS),
        "dtype": DTYPE.str,
        "compressor": compressor().get_config(),
        "zarr_format": 2,
    }


def n_chunks(shape: list[int]) -> int:
    return -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1])


def generate_block(r0: int, r1: int) -> np.ndarray:
    """Rows r0:r1 of a smooth field (separable sin/cos terms) plus small noise, float32.

    The low 13 mantissa bits are cleared (about 3 significant decimal digits kept, like a
    bit-rounded climate field), so blosc-lz4 with byte shuffle compresses it about 2x but
    the data stays non-trivial (every chunk differs, noise in the kept bits).
    """
    two_pi = np.float32(2 * np.pi)
    y = np.arange(r0, r1, dtype=np.float32)[:, None]
    x = np.arange(NCOLS, dtype=np.float32)[None, :]
    v = np.float32(10.0) * np.sin(x * (two_pi / 4096)) * np.cos(y * (two_pi / 3000))
    # sin((x + y) * k) as a sum of separable products, so no 2-D trig is needed
    k = two_pi / 700
    v += np.float32(2.0) * (np.sin(x * k) * np.cos(y * k) + np.cos(x * k) * np.sin(y * k))
    v += np.float32(15.0) + np.float32(0.002) * y
    rng = np.random.default_rng(12345 + r0)
    v += rng.standard_normal(v.shape, dtype=np.float32) * np.float32(0.05)
    v.view(np.uint32)[...] &= np.uint32(0xFFFFE000)
    return v


def dataset_valid(path: Path, spec: dict) -> bool:
    marker = path / "bench-complete.json"
    try:
        if json.loads(marker.read_text()) != spec:
            return False
        arr = zarr.open_array(str(path / ARRAY_NAME), mode="r")
        if list(arr.shape) != spec["shape"] or list(arr.chunks) != spec["chunks"]:
            return False
        if np.dtype(arr.dtype) != DTYPE or arr.metadata.zarr_format != 2:
            return False
        if arr.metadata.compressor.get_config() != spec["compressor"]:
            return False
        stored = [n for n in os.listdir(path / ARRAY_NAME) if not n.startswith(".")]
        return len(stored) == n_chunks(spec["shape"])
    except (OSError, ValueError, KeyError, AttributeError, zarr.errors.BaseZarrError):
        return False


def write_dataset(path: Path, spec: dict) -> None:
    shutil.rmtree(path, ignore_errors=True)
    rows, cols = spec["shape"]
    t0 = time.perf_counter()
    group = zarr.open_group(str(path), mode="w", zarr_format=2)
    group.attrs["description"] = "zarrmount benchmark dataset (scripts/bench)"
    arr = group.create_array(
        ARRAY_NAME,
        shape=(rows, cols),
        chunks=CHUNKS,
        dtype=DTYPE,
        compressors=compressor(),
        fill_value=0.0,
        attributes={"units": "arbitrary", "generator": f"scripts/_bench.py v{DATA_VERSION}"},
    )
    for r0 in range(0, rows, CHUNKS[0]):
        r1 = min(rows, r0 + CHUNKS[0])
        arr[r0:r1, :] = generate_block(r0, r1)  # one row of chunks (64 MiB) at a time
        if sys.stdout.isatty():
            print(f"\r  writing {r1 / rows:6.1%}", end="", flush=True)
    if sys.stdout.isatty():
        print()
    (path / "bench-complete.json").write_text(json.dumps(spec))
    log(f"  wrote {path} in {time.perf_counter() - t0:.1f} s")


def stored_bytes(path: Path) -> int:
    d = path / ARRAY_NAME
    return sum(e.stat().st_size for e in os.scandir(d) if not e.name.startswith("."))


# ---------------------------------------------------------------------------------------------
# system helpers


def drop_caches() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        log(f"  WARNING: cannot drop the page cache ({e}); reads are not cold")
        return False


def is_mounted(mnt: Path) -> bool:
    with open("/proc/mounts") as f:
        return any(line.split()[1] == str(mnt) for line in f if line.strip())


def bdi_of(mnt: Path) -> Path | None:
    out = subprocess.run(["mountpoint", "-d", str(mnt)], capture_output=True, text=True)
    dev = out.stdout.strip()
    p = Path("/sys/class/bdi") / dev
    return p if out.returncode == 0 and dev and p.is_dir() else None


def read_ahead_kb(mnt: Path) -> int | None:
    bdi = bdi_of(mnt)
    try:
        return int((bdi / "read_ahead_kb").read_text()) if bdi else None
    except OSError:
        return None


def set_read_ahead_kb(mnt: Path, kb: int) -> bool:
    bdi = bdi_of(mnt)
    try:
        if bdi:
            (bdi / "read_ahead_kb").write_text(f"{kb}\n")
            return read_ahead_kb(mnt) == kb
    except OSError as e:
        log(f"  WARNING: cannot set read_ahead_kb: {e}")
    return False


def daemon_pid(mnt: Path) -> int | None:
    """The zarrmount daemon serving mnt: a process with /dev/fuse open whose argv names mnt."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if not any(b"zarrmount" in a for a in argv):
                continue
            if not any(os.path.realpath(a.decode()) == str(mnt) for a in argv if a):
                continue
            if any(os.readlink(fd) == "/dev/fuse" for fd in (d / "fd").iterdir()):
                return int(d.name)
        except (OSError, UnicodeDecodeError):
            continue
    return None


def cpu_seconds(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


class Mount:
    """A fresh zarrmount mount of src at mnt for the duration of a with block."""

    def __init__(self, zm: str, src: Path, mnt: Path, logfile: Path, opts: list[str]):
        self.zm, self.src, self.mnt, self.logfile, self.opts = zm, src, mnt, logfile, opts
        self.mount_seconds = 0.0
        self.pid: int | None = None

    def __enter__(self) -> Mount:
        unmount(self.zm, self.mnt)
        self.mnt.mkdir(parents=True, exist_ok=True)
        opts = ",".join(["ro", f"log={self.logfile}", *self.opts])
        cmd = [self.zm, str(self.src), str(self.mnt), "-o", opts]
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired as e:
            unmount(self.zm, self.mnt)
            raise BenchError(f"mount timed out after 120 s: {' '.join(cmd)}") from e
        self.mount_seconds = time.perf_counter() - t0
        if r.returncode != 0 or not is_mounted(self.mnt):
            unmount(self.zm, self.mnt)
            raise BenchError(
                f"mount failed (exit {r.returncode}): {' '.join(cmd)}\n"
                f"  stdout: {r.stdout.strip()}\n  stderr: {r.stderr.strip()}\n"
                f"  daemon log: {self.logfile}"
            )
        self.pid = daemon_pid(self.mnt)
        return self

    def __exit__(self, *exc) -> None:
        unmount(self.zm, self.mnt)


def unmount(zm: str, mnt: Path) -> None:
    if not is_mounted(mnt):
        return
    try:
        r = subprocess.run([zm, "-u", str(mnt)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            log(f"  WARNING: zarrmount -u exited {r.returncode}: {r.stderr.strip()}")
    except subprocess.TimeoutExpired:
        log("  WARNING: zarrmount -u timed out")
    for cmd in (["fusermount3", "-u"], ["fusermount3", "-uz"], ["umount", "-l"]):
        if not is_mounted(mnt):
            break
        log(f"  WARNING: still mounted, trying {' '.join(cmd)}")
        subprocess.run([*cmd, str(mnt)], capture_output=True, timeout=60)
    if is_mounted(mnt):
        raise BenchError(f"cannot unmount {mnt}")


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# correctness guard


def verify(path: Path, arr: zarr.Array, seed: int = 7) -> list[str]:
    """Compare the mounted file's bytes with zarr-python's; returns a list of problems."""
    problems: list[str] = []
    rows, cols = arr.shape
    rowbytes = cols * DTYPE.itemsize
    size = rows * rowbytes
    st = os.stat(path)
    if st.st_size != size:
        problems.append(f"file size {st.st_size} != array nbytes {size}")
    for name, want in (("dtype", None), ("shape", [rows, cols])):
        try:
            got = os.getxattr(path, f"user.zarr.{name}").decode()
        except OSError as e:
            problems.append(f"xattr user.zarr.{name}: {e}")
            continue
        if name == "dtype" and np.dtype(got) != DTYPE:
            problems.append(f"user.zarr.dtype {got!r} is not {DTYPE.str}")
        if name == "shape" and json.loads(got) != want:
            problems.append(f"user.zarr.shape {got!r} is not {want}")
    rng = random.Random(seed)
    sample = {0, 1, CHUNKS[0] - 1, CHUNKS[0], rows // 2, rows - 1}
    sample |= {rng.randrange(rows) for _ in range(6)}
    sample = sorted(r for r in sample if 0 <= r < rows)
    fd = os.open(path, os.O_RDONLY)
    try:
        for r in sample:
            got = os.pread(fd, rowbytes, r * rowbytes)
            want = np.ascontiguousarray(arr[r, :], dtype=DTYPE).tobytes()
            if got != want:
                problems.append(f"row {r}: mount bytes differ from zarr-python")
        # unaligned ranges that cross element, chunk and row boundaries
        ranges = [(CHUNKS[1] * 4 - 3, 10), (rowbytes - 5, 9), (CHUNKS[0] * rowbytes - 7, 3 << 20)]
        ranges += [(rng.randrange(size), rng.randrange(1, 3 << 20)) for _ in range(4)]
        for off, length in ranges:
            length = min(length, size - off)
            if length <= 0:
                continue
            r0, r1 = off // rowbytes, (off + length - 1) // rowbytes + 1
            block = np.ascontiguousarray(arr[r0:r1, :], dtype=DTYPE).view(np.uint8).reshape(-1)
            want = block[off - r0 * rowbytes : off - r0 * rowbytes + length].tobytes()
            got = os.pread(fd, length, off)
            if got != want:
                problems.append(f"range offset={off} length={length}: bytes differ")
        if os.pread(fd, 4096, size) != b"":
            problems.append("read at EOF did not return 0 bytes")
    finally:
        os.close(fd)
    log(
        f"  checked size, xattrs, {len(sample)} rows {sample[:4]}...{sample[-2:]} and "
        f"{len(ranges)} unaligned ranges: {'OK' if not problems else 'FAILED'}"
    )
    return problems


# ---------------------------------------------------------------------------------------------
# timed reads


def read_sequential(path: Path, buf: mmap.mmap, expected: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        t0 = time.perf_counter()
        while n := os.readv(fd, [buf]):
            total += n
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
    if total != expected:
        raise BenchError(f"read {total} bytes from {path}, expected {expected}")
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Cold sequential read through zarrmount vs zarr-python arr[:].",
    )
    ap.add_argument("--size-gib", type=float, default=1.0, help="array size (default 1)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per variant (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the dataset in .bench/ after")
    ap.add_argument(
        "--ra-kb",
        type=int,
        default=1024,
        help="also measure the mount with read_ahead_kb set to this (default 1024; 0: don't)",
    )
    ap.add_argument(
        "--no-zarr-out", action="store_true", help="skip zarr-python into a reused out= buffer"
    )
    ap.add_argument(
        "--zarr-only", action="store_true", help="only write the dataset and time zarr-python"
    )
    ap.add_argument("--cache-size", default=None, help="zarrmount cache_size= (default: its own)")
    ap.add_argument("--zarrmount", default=str(ROOT / ".venv/bin/zarrmount"))
    ap.add_argument("--dir", default=str(ROOT / ".bench"), help="work directory (.bench)")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.size_gib <= 0:
        ap.error("--reps must be >= 1 and --size-gib > 0")

    def on_term(signum, frame):
        log(f"bench: interrupted by signal {signum}; cleaning up")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    spec = dataset_spec(args.size_gib)
    rows, cols = spec["shape"]
    ds = work / f"f32_{rows}x{cols}_lz4.zarr"
    mnt = work / "mnt"
    logfile = work / "zarrmount.log"
    opts = [f"cache_size={args.cache_size}"] if args.cache_size else []
    nbytes = rows * cols * DTYPE.itemsize

    log("zarrmount benchmark: cold sequential read, mount vs zarr-python")
    log(
        f"  {platform.node()} kernel {platform.release()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, zarr {zarr.__version__}, "
        f"numcodecs {numcodecs.__version__}, numpy {np.__version__}"
    )
    if os.geteuid() != 0:
        log("  WARNING: not root: cannot drop the page cache or set read_ahead_kb")
    load1 = os.getloadavg()[0]
    log(f"  load average (1 min) at start: {load1:.2f}")
    if load1 > 0.5:
        log("  WARNING: the machine is busy; other processes share the 2 cores and skew timings")

    try:
        log(f"dataset: {ds.relative_to(ROOT) if ds.is_relative_to(ROOT) else ds}")
        if dataset_valid(ds, spec):
            log("  present and valid: reusing it")
        else:
            log(f"  writing {nbytes / 2**30:.3g} GiB float32 {rows}x{cols}, chunks {CHUNKS}")
            write_dataset(ds, spec)
            if not dataset_valid(ds, spec):
                raise BenchError("the dataset just written does not validate")
        comp = stored_bytes(ds)
        log(
            f"  {nbytes / 1e9:.3f} GB raw, {comp / 1e9:.3f} GB stored in "
            f"{n_chunks(spec['shape'])} chunks (blosc-lz4 clevel 5 shuffle, ratio "
            f"{nbytes / comp:.2f})"
        )
        arr = zarr.open_array(str(ds / ARRAY_NAME), mode="r")
        target = mnt / ARRAY_NAME

        variants = []
        if not args.zarr_only:
            log("correctness guard (fresh mount):")
            with Mount(args.zarrmount, ds, mnt, logfile, opts) as m:
                ra_default = read_ahead_kb(mnt)
                log(
                    f"  mounted in {m.mount_seconds:.2f} s, daemon pid {m.pid}, "
                    f"read_ahead_kb as mounted: {ra_default}"
                )
                problems = verify(target, arr)
            if problems:
                for p in problems:
                    log(f"  MISMATCH: {p}")
                raise BenchError("the mount's bytes differ from zarr-python's; not timing it")
            variants.append(f"mount (ra {ra_default} KiB)")
            if ra_default is None:
                log("  WARNING: read_ahead_kb of the mount not found; not varying it")
            elif args.ra_kb and args.ra_kb != ra_default:
                variants.append(f"mount (ra {args.ra_kb} KiB)")
        variants.append("zarr arr[:]")
        if not args.no_zarr_out:
            variants.append("zarr arr[:] -> out")

        buf = mmap.mmap(-1, READ_SIZE)  # page-aligned, reused, touched before timing
        buf.write(b"\1" * READ_SIZE)
        out = None
        if not args.no_zarr_out:
            from zarr.core.buffer.cpu import NDBuffer

            out_map = mmap.mmap(-1, nbytes)
            out = np.frombuffer(out_map, dtype=DTYPE).reshape(rows, cols)
            out[...] = 1.0  # touch every page once, outside the timings
            out_nd = NDBuffer.from_numpy_array(out)

        results: dict[str, list[dict]] = {v: [] for v in variants}
        cold = True
        for rep in range(args.reps):
            order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
            log(f"repetition {rep + 1}/{args.reps}: {' | '.join(order)}")
            for v in order:
                rec: dict = {}
                if v.startswith("mount"):
                    with Mount(args.zarrmount, ds, mnt, logfile, opts) as m:
                        if v != variants[0] and not set_read_ahead_kb(mnt, args.ra_kb):
                            raise BenchError(f"could not set read_ahead_kb={args.ra_kb}")
                        rec["read_ahead_kb"] = read_ahead_kb(mnt)
                        rec["mount_s"] = m.mount_seconds
                        cold &= drop_caches()
                        d0, c0 = cpu_seconds(m.pid), own_cpu_seconds()
                        dt = read_sequential(target, buf, nbytes)
                        d1, c1 = cpu_seconds(m.pid), own_cpu_seconds()
                        rec["daemon_cpu_s"] = None if d0 is None or d1 is None else d1 - d0
                        rec["reader_cpu_s"] = c1 - c0
                else:
                    cold &= drop_caches()
                    a = zarr.open_array(str(ds / ARRAY_NAME), mode="r")
                    c0 = own_cpu_seconds()
                    t0 = time.perf_counter()
                    if v.endswith("out"):
                        a.get_basic_selection(Ellipsis, out=out_nd)
                        res = out
                    else:
                        res = a[:]
                    dt = time.perf_counter() - t0
                    rec["reader_cpu_s"] = own_cpu_seconds() - c0
                    if res.shape != (rows, cols) or res.dtype != DTYPE:
                        raise BenchError(f"{v} returned {res.shape} {res.dtype}")
                    del res
                rec["seconds"] = dt
                rec["gbps"] = nbytes / dt / 1e9
                results[v].append(rec)
                extra = ""
                if rec.get("daemon_cpu_s") is not None:
                    extra = f", daemon CPU {rec['daemon_cpu_s']:.2f} s"
                log(
                    f"  {v:<22} {rec['gbps']:6.3f} GB/s ({dt:.2f} s, reader CPU "
                    f"{rec['reader_cpu_s']:.2f} s{extra})"
                )

        report(results, variants, nbytes, args.reps, cold)
        log(f"  load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
        (work / "last-results.json").write_text(
            json.dumps(
                {
                    "spec": spec,
                    "nbytes": nbytes,
                    "stored": comp,
                    "cold": cold,
                    "results": results,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                },
                indent=1,
            )
        )
        return 0
    except KeyboardInterrupt:
        log("bench: interrupted; cleaning up")
        return 130
    except (BenchError, OSError) as e:
        log(f"bench: {e}")
        if logfile.exists() and not args.zarr_only:
            tail = logfile.read_text(errors="replace").splitlines()[-15:]
            log(f"last lines of the daemon log {logfile}:")
            for line in tail:
                log(f"  | {line}")
        return 1
    finally:
        try:
            unmount(args.zarrmount, mnt)
        except BenchError as e:
            log(f"bench: {e}")
        if mnt.is_dir() and not is_mounted(mnt):
            with contextlib.suppress(OSError):
                mnt.rmdir()
        if not args.keep and ds.exists():
            shutil.rmtree(ds, ignore_errors=True)
            log(f"removed {ds} (use --keep to keep it)")


def report(results: dict, variants: list[str], nbytes: int, reps: int, cold: bool) -> None:
    zmed = statistics.median(r["gbps"] for r in results["zarr arr[:]"])
    log()
    log(
        f"results: {nbytes / 1e9:.3f} GB, 1 MiB reads, median of {reps} "
        f"{'cold ' if cold else 'NOT cold '}repetitions (GB/s = 1e9 bytes/s)"
    )
    reps_hdr = " ".join(f"{'rep ' + str(i + 1):>7}" for i in range(reps))
    hdr = f"  {'variant':<22} {reps_hdr} {'median':>7} {'vs zarr':>8} {'CPU s':>11}"
    log(hdr)
    log("  " + "-" * (len(hdr) - 2))
    for v in variants:
        rs = results[v]
        med = statistics.median(r["gbps"] for r in rs)
        cpu = statistics.median(r["reader_cpu_s"] for r in rs)
        dcpu = [r["daemon_cpu_s"] for r in rs if r.get("daemon_cpu_s") is not None]
        cpu_s = f"{cpu:.2f}" + (f"+{statistics.median(dcpu):.2f}d" if dcpu else "")
        per = " ".join(f"{r['gbps']:7.3f}" for r in rs)
        log(f"  {v:<22} {per} {med:7.3f} {med / zmed:7.2f}x {cpu_s:>11}")
    log("  (vs zarr = median / median of 'zarr arr[:]'; CPU s = reader [+ daemon 'd'], median)")


if __name__ == "__main__":
    sys.exit(main())
