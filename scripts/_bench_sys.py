"""System helpers for scripts/bench: page cache, mounts, read-ahead, daemon CPU and memory.

See shared/notes (machine.md, fuse.md) for why reads go into one reused, page-aligned,
pre-touched buffer and why every cold measurement drops the page cache first.
"""

from __future__ import annotations

import json
import mmap
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
READ_SIZE = 1 << 20


def log(msg: str = "") -> None:
    print(msg, flush=True)


class BenchError(Exception):
    pass


def touched_buffer(nbytes: int) -> mmap.mmap:
    """A page-aligned buffer, every page touched once outside the timings."""
    buf = mmap.mmap(-1, nbytes)
    buf.write(b"\1" * nbytes)
    return buf


def drop_caches() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        log(f"  WARNING: cannot drop the page cache ({e}); reads are not cold")
        return False


def cold_start(store: Path | None = None) -> None:
    """Make the next read cold for the mount, fair to every variant, and free of VM noise.

    The page cache is dropped (the mounted file's pages and the store's), then the store's
    files are read back in: the disk here reads about 1 GB/s, so a disk-cold store would
    measure the disk, not the read path. Last, 2 GiB are touched and freed: on these VMs
    memory first touched since the host reclaimed it costs a host fault (0.5-2 GB/s), which
    otherwise lands on whichever variant allocates page cache or buffers next.
    """
    drop_caches()
    if store is not None:
        read_tree(store)
    touch_and_free()


WARM_BYTES = 2 << 30
_WARM_BUF = bytearray(1 << 20)


def touch_and_free(nbytes: int = WARM_BYTES) -> None:
    """Touch ``nbytes`` of fresh memory and free it, so the host faults of first touch
    (shared/notes/machine.md) do not land on whichever variant allocates memory next."""
    block = np.ones(nbytes, dtype=np.uint8)
    del block


def read_tree(root: Path) -> int:
    """Read every file under ``root``; the number of bytes read."""
    total = 0
    for d, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(d, name), "rb", buffering=0) as f:
                while n := f.readinto(_WARM_BUF):
                    total += n
    return total


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
    """A fresh zarrmount mount of src at mnt for the duration of a with block (``mode`` ro
    or rw)."""

    def __init__(
        self, zm: str, src: Path, mnt: Path, logfile: Path, opts: list[str], mode: str = "ro"
    ):
        self.zm, self.src, self.mnt, self.logfile, self.opts = zm, src, mnt, logfile, opts
        self.mode = mode
        self.mount_seconds = 0.0
        self.pid: int | None = None

    def __enter__(self) -> Mount:
        unmount(self.zm, self.mnt)
        self.mnt.mkdir(parents=True, exist_ok=True)
        opts = ",".join([self.mode, f"log={self.logfile}", *self.opts])
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


class CeilingMount:
    """The trivial in-memory FUSE file (scripts/_bench_triv.py) at mnt, read-ahead as asked."""

    def __init__(self, mnt: Path, size: int, ra_kb: int | None) -> None:
        self.mnt, self.size, self.ra_kb = mnt, size, ra_kb
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    def __enter__(self) -> CeilingMount:
        self.mnt.mkdir(parents=True, exist_ok=True)
        script = Path(__file__).resolve().parent / "_bench_triv.py"
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.mnt), str(self.size)])
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise BenchError("the trivial FUSE file (the ceiling) did not mount")
            time.sleep(0.02)
        if self.ra_kb and not set_read_ahead_kb(self.mnt, self.ra_kb):
            self.__exit__()
            raise BenchError(f"could not set read_ahead_kb={self.ra_kb} on the ceiling mount")
        return self

    def __exit__(self, *exc) -> None:
        for cmd in (["fusermount3", "-u"], ["fusermount3", "-uz"]):
            if not is_mounted(self.mnt):
                break
            subprocess.run([*cmd, str(self.mnt)], capture_output=True, timeout=60)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def peak_rss_mib(pid: int | None) -> float | None:
    """The high-water mark of a process's resident memory (VmHWM), MiB."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def random_latencies_paired(
    paths: list[Path], offsets: list[int], size: int = 4096, batch: int = 50
) -> list[list[float]]:
    """Seconds per ``pread`` at each offset in each file, with the kernel's read-ahead off:
    ``batch`` reads of one file, then the same of the next, and so on, the first file of
    each round rotating, so that every file meets the same moments of the machine."""
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        for fd in fds:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        out: list[list[float]] = [[] for _ in paths]
        for k, start in enumerate(range(0, len(offsets), batch)):
            for j in range(len(fds)):
                i = (k + j) % len(fds)
                for off in offsets[start : start + batch]:
                    t0 = time.perf_counter()
                    n = len(os.pread(fds[i], size, off))
                    out[i].append(time.perf_counter() - t0)
                    if n != size:
                        raise BenchError(f"pread of {size} at {off} in {paths[i]} returned {n}")
        return out
    finally:
        for fd in fds:
            os.close(fd)


def daemon_stats(mnt: Path) -> dict | None:
    """The statistics of the zarrmount daemon at ``mnt``; None for a mount without (the
    ceiling)."""
    try:
        return json.loads(os.getxattr(mnt, "user.zarrmount.stats"))
    except OSError:
        return None


def wait_for_loads(mnt: Path, timeout: float = 30.0) -> None:
    """Until the zarrmount daemon at ``mnt`` has no chunk load in flight; at once for a
    mount without statistics."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = daemon_stats(mnt)
        if stats is None or not stats.get("cache_loading"):
            return
        time.sleep(0.01)
    raise BenchError(f"chunk loads at {mnt} still in flight after {timeout:.0f} s")


def time_to_first_byte(path: Path) -> float:
    """Seconds from open to the first 4 KiB of a file in hand."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        n = len(os.pread(fd, 4096, 0))
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    if n == 0:
        raise BenchError(f"{path}: first read returned nothing")
    return dt


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
