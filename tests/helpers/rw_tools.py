"""Tools for the read-write mount tests (``tests/integration/test_rw_*.py``).

The oracles are never zarrmount: what the store holds is read with zarr-python
(``np.ascontiguousarray(zarr.open_array(...)[...])``), and what a file must show is a NumPy
model, a flat ``uint8`` array of the C-order bytes (byte ``o`` is byte ``o % itemsize`` of
element ``o // itemsize``).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numcodecs
import numpy as np
import pytest
import zarr

from helpers import mounting
from helpers.oracle import describe_mismatch

TMP_PREFIX = ".zarrmount-tmp-"


def v3_spec(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    *,
    fill_value: int = 0,
    shards: tuple[int, ...] | None = None,
    compressor=None,
) -> dict:
    """``make_store`` arguments of a v3 array, sharded when ``shards`` is given; the
    compressor defaults to zstd level 1 (quick to encode, as the write tests want)."""
    spec = dict(
        zarr_format=3,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressors=compressor or zarr.codecs.ZstdCodec(level=1),
        fill_value=fill_value,
    )
    if shards is not None:
        spec["shards"] = shards
    return spec


def v2_spec(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    *,
    fill_value: float = 0,
    order: str = "C",
    compressor=None,
) -> dict:
    """``make_store`` arguments of a v2 array; as in :func:`v3_spec`, the compressor defaults
    to zstd level 1."""
    return dict(
        zarr_format=2,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressors=compressor or numcodecs.Zstd(level=1),
        order=order,
        fill_value=fill_value,
    )


# Small arrays with small odd chunks (many chunks, edge chunks everywhere).
#   v2: compressor + order F + big-endian + a fill value that is not zero;
#   v3: compressor; sharded: compressor inside the shards, edge shards and edge inner chunks.
SPECS: dict[str, dict] = {
    "v2f": v2_spec((61, 47), (7, 5), ">i4", order="F", fill_value=7),
    "v3": v3_spec((83, 59), (6, 5), "<u2", compressor=zarr.codecs.GzipCodec(level=1)),
    "sharded": v3_spec((95, 77), (3, 5), "<i2", fill_value=-3, shards=(9, 10)),
}


@dataclass
class Store:
    """A Zarr hierarchy on disk whose root is a group holding one array ``name``."""

    root: str
    name: str

    @property
    def array_dir(self) -> str:
        return os.path.join(self.root, self.name)

    def open(self) -> zarr.Array:
        return zarr.open_array(self.root, path=self.name, mode="r")

    def read_bytes(self) -> np.ndarray:
        """The array's C-order bytes as zarr-python reads the store (flat ``uint8``)."""
        arr = self.open()
        return np.ascontiguousarray(arr[...]).reshape(-1).view(np.uint8).copy()

    def dtype(self) -> np.dtype:
        return self.open().dtype

    def fill_bytes(self) -> bytes:
        """One element of fill value, as the file shows it."""
        arr = self.open()
        return np.asarray(arr.fill_value, dtype=arr.dtype).reshape(1).tobytes()

    def chunk_files(self) -> list[str]:
        """Keys of the stored chunk/shard objects (metadata and temporary files left out)."""
        found = []
        for dirpath, _dirs, files in os.walk(self.array_dir):
            for f in files:
                if f in (".zarray", ".zattrs", "zarr.json", ".zgroup") or f.startswith(TMP_PREFIX):
                    continue
                found.append(os.path.relpath(os.path.join(dirpath, f), self.array_dir))
        return sorted(found)

    def temp_files(self) -> list[str]:
        found = []
        for dirpath, _dirs, files in os.walk(self.root):
            found += [os.path.join(dirpath, f) for f in files if f.startswith(TMP_PREFIX)]
        return found


def make_store(
    parent: str | os.PathLike,
    name: str,
    spec: dict,
    *,
    rng: np.random.Generator | None = None,
    initial: str = "partial",
    group: str | None = None,
) -> Store:
    """Create group ``parent/NAME.zarr`` with array ``name``; ``initial`` data written by
    zarr-python: ``"partial"`` (a random block, so some chunks exist and some do not),
    ``"full"`` (everything) or ``"none"``. With ``group``, the array is added to the group
    ``parent/GROUP.zarr``, made if absent."""
    root = os.path.join(os.fspath(parent), f"{group or name}.zarr")
    if group is None:
        shutil.rmtree(root, ignore_errors=True)
    spec = dict(spec)
    fmt = spec.pop("zarr_format")
    group = zarr.open_group(root, mode="a" if group else "w", zarr_format=fmt)
    arr = group.create_array(name, **spec)
    rng = rng or np.random.default_rng(0)
    if initial != "none":
        values = random_values(arr.dtype, arr.shape, rng)
        if initial == "full":
            arr[...] = values
        else:
            sel = []
            for s in arr.shape:
                a = int(rng.integers(0, s // 3 + 1))
                sel.append(slice(a, int(rng.integers(a + 1, s + 1))))
            arr[tuple(sel)] = values[tuple(sel)]
    return Store(root, name)


def seeded_store(
    parent: str | os.PathLike, name: str, seed: int
) -> tuple[Store, np.ndarray, np.random.Generator]:
    """``make_store`` of ``SPECS[name]`` from ``seed``, its bytes (the model the test
    updates) and the generator, so the test's later random writes follow the same seed."""
    rng = np.random.default_rng(seed)
    store = make_store(parent, name, SPECS[name], rng=rng)
    return store, store.read_bytes(), rng


def random_values(dtype: np.dtype, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Random bit patterns of ``dtype`` (integer dtypes only: every pattern is a value)."""
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, math.prod(shape) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def assert_store_equals(store: Store, expected: np.ndarray | bytes, what: str = "") -> None:
    got = store.read_bytes()
    exp = np.frombuffer(bytes(expected), np.uint8) if isinstance(expected, bytes) else expected
    if got.shape == exp.shape and np.array_equal(got, exp):
        return
    raise AssertionError(
        f"zarr-python reads the store different from the model{' (' + what + ')' if what else ''}:"
        f" {describe_mismatch(got.tobytes(), exp.tobytes(), store.dtype())}"
    )


def assert_bytes_match(got: bytes, expected: np.ndarray, offset: int, what: str) -> None:
    exp = expected.tobytes()
    if got == exp:
        return
    first = next((i for i in range(min(len(got), len(exp))) if got[i] != exp[i]), None)
    raise AssertionError(
        f"{what}: read {len(got)} bytes at {offset}, expected {len(exp)}; first difference at "
        f"file offset {None if first is None else offset + first}"
    )


# ----------------------------------------------------------------------------- file I/O


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    done = 0
    while done < len(view):
        n = os.pwrite(fd, view[done:], offset + done)
        assert n > 0, f"pwrite returned {n}"
        done += n


def pread_all(fd: int, size: int, offset: int) -> bytes:
    parts, done = [], 0
    while done < size:
        got = os.pread(fd, min(size - done, 1 << 20), offset + done)
        if not got:
            break
        parts.append(got)
        done += len(got)
    return b"".join(parts)


def expect_errno(codes: int | Sequence[int], fn, *args) -> OSError:
    codes = (codes,) if isinstance(codes, int) else tuple(codes)
    try:
        fn(*args)
    except OSError as e:
        assert e.errno in codes, (
            f"{getattr(fn, '__name__', fn)}: errno {errno.errorcode.get(e.errno, e.errno)}, "
            f"expected {[errno.errorcode[c] for c in codes]}"
        )
        return e
    raise AssertionError(
        f"{getattr(fn, '__name__', fn)} succeeded, expected {[errno.errorcode[c] for c in codes]}"
    )


def dd_over(src: str | os.PathLike, dst: str, timeout: float) -> None:
    """``dd`` of ``src`` over ``dst`` in 1 MiB blocks without truncating it (how raw data
    is copied into a mounted array in place); asserts dd succeeded."""
    done = subprocess.run(
        ["dd", f"if={src}", f"of={dst}", "bs=1M", "conv=notrunc"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr


# ----------------------------------------------------------------------------- mounts


@contextlib.contextmanager
def rw_mount(store: Store | str, options: Sequence[str] = (), **kw) -> Iterator[mounting.Mount]:
    """A foreground ``-o rw,...`` mount of ``store`` (torn down like every test mount)."""
    root = store.root if isinstance(store, Store) else store
    with mounting.mounted(root, ["rw", *options], **kw) as m:
        yield m


@contextlib.contextmanager
def seeded_mount(
    parent: str | os.PathLike, name: str, seed: int, options: Sequence[str] = (), *, tag: str
) -> Iterator[tuple[Store, np.ndarray, mounting.Mount]]:
    """``seeded_store`` mounted rw: the store, its model and the mount. Store and model
    stay bound after the ``with``, for the test's check of the store after unmount."""
    store, model, _rng = seeded_store(parent, name, seed)
    with rw_mount(store, options, tag=tag) as m:
        yield store, model, m


def stats(path: str) -> dict:
    import json

    return json.loads(os.getxattr(path, "user.zarrmount.stats"))


def vm_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class RssSampler:
    """Samples ``VmRSS`` of ``pid`` every ``interval`` seconds in a thread; ``peak_kib``."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = vm_rss_kib(self.pid)
            if rss is not None:
                self.peak_kib = max(self.peak_kib, rss)
                self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def wait_exit(proc: subprocess.Popen, timeout: float) -> int | None:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


@contextlib.contextmanager
def killed_after(store: Store | str, name: str, options: Sequence[str], tag: str):
    """An rw mount whose daemon is SIGKILLed when the block ends, its file ``name`` still
    open (nothing closed, nothing fsynced): yields the mount and a descriptor of it."""
    with rw_mount(store, ["writeback_delay=600", *options], tag=tag) as m:
        fd = os.open(m.p(name), os.O_RDWR)
        try:
            yield m, fd
            assert m.stats()["cache_dirty_bytes"] > 0  # nothing stored it for us
            os.kill(m.proc.pid, signal.SIGKILL)
            assert wait_exit(m.proc, 10) == -signal.SIGKILL
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)  # the mount is dead: ENOTCONN
        lazy_unmount_dead(m.path)


def lazy_unmount_dead(mnt: str) -> None:
    """Clean up a FUSE mount whose daemon died: ``fusermount3 -uz``."""
    if mounting.is_mounted(mnt):
        subprocess.run([mounting.FUSERMOUNT, "-uz", mnt], capture_output=True, timeout=15)
    assert not mounting.is_mounted(mnt), f"{mnt} is still mounted after fusermount3 -uz"


# ----------------------------------------------------------------------------- tmpfs


@contextlib.contextmanager
def _mounted_filesystem(args: Sequence[str], tag: str) -> Iterator[str]:
    """``mount ARGS DIR`` on a new directory under /tmp; always unmounted."""
    path = tempfile.mkdtemp(prefix=f"zarrmount-it-{tag}-", dir="/tmp")
    try:
        subprocess.run(["mount", *args, path], check=True, capture_output=True, timeout=30)
        try:
            yield path
        finally:
            for _ in range(50):
                done = subprocess.run(["umount", path], capture_output=True, timeout=30)
                if done.returncode == 0 or not mounting.is_mounted(path):
                    break
                time.sleep(0.1)
            if mounting.is_mounted(path):
                subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)
    finally:
        if not mounting.is_mounted(path):
            with contextlib.suppress(OSError):
                os.rmdir(path)


def tmpfs(size: str, tag: str = "tmpfs") -> contextlib.AbstractContextManager[str]:
    """A fresh tmpfs of ``size`` mounted on a new directory under /tmp; always unmounted."""
    return _mounted_filesystem(["-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs"], tag)


@contextlib.contextmanager
def failing_ext4(mib: int, tag: str = "ext4") -> Iterator[str]:
    """A fresh ext4 of ``mib`` MiB in an image on a loop device, mounted ``errors=remount-ro``:
    :func:`fail_disk` makes it read-only at once, files open for writing included, as an
    error of its disk does (``mount -o remount,ro`` refuses while a file is open for
    writing)."""
    with tempfile.NamedTemporaryFile(prefix=f"zarrmount-it-{tag}-", dir="/tmp") as image:
        image.truncate(mib << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", image.name], check=True, capture_output=True)
        with _mounted_filesystem(["-o", "loop,errors=remount-ro", image.name], tag) as path:
            yield path


def disk_error_trigger(path: str) -> str | None:
    """The file that reports an error of the ext4 mounted at ``path`` (None: this kernel
    has none)."""
    source = subprocess.run(
        ["findmnt", "-no", "SOURCE", path], check=True, capture_output=True, text=True
    ).stdout.strip()
    trigger = f"/sys/fs/ext4/{os.path.basename(source)}/trigger_fs_error"
    return trigger if os.path.exists(trigger) else None


def fail_disk(path: str) -> None:
    """An error of the disk of :func:`failing_ext4` ``path``: read-only from now on."""
    trigger = disk_error_trigger(path)
    assert trigger is not None, f"no ext4 error trigger for {path}"
    with open(trigger, "w") as f:
        f.write("zarrmount test\n")
    # newer kernels keep the mount's flags and refuse every write (EROFS)
    with pytest.raises(OSError, match="Read-only"), open(os.path.join(path, "probe"), "wb"):
        pass


def fill_filesystem(directory: str, name: str = "filler") -> str:
    """Write a file in ``directory`` until the filesystem is full (ENOSPC); its path."""
    path = os.path.join(directory, name)
    block = b"\xa5" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            try:
                if os.write(fd, block) < len(block):
                    break
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return path


# ----------------------------------------------------------------------------- workers


def write_runs_worker(
    path: str,
    target: bytes,
    runs: list[tuple[int, int]],
    seed: int,
    fsync_every: int,
    use_direct: bool,
) -> None:
    """Child process body: write ``target[o:o+n]`` at ``o`` for each run, in random order."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(runs))
    flags = os.O_WRONLY | (os.O_DIRECT if use_direct else 0)
    fd = os.open(path, flags)
    try:
        for i, k in enumerate(order):
            off, n = runs[k]
            pwrite_all(fd, target[off : off + n], off)
            if fsync_every and i % fsync_every == fsync_every - 1:
                os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- layout


def chunk_of_bytes(shape: Sequence[int], chunks: Sequence[int], itemsize: int) -> np.ndarray:
    """For each byte of the C-order file, the (C-order) number of the chunk holding it."""
    idx = np.indices(tuple(shape)).reshape(len(shape), -1)
    grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
    coords = tuple(i // c for i, c in zip(idx, chunks, strict=True))
    per_element = np.ravel_multi_index(coords, grid) if shape else np.zeros(1, np.intp)
    return np.repeat(per_element, itemsize)


def unexplained_chunks(
    got: np.ndarray, start: np.ndarray, writes: Sequence[tuple[int, bytes]], chunk_ids: np.ndarray
) -> np.ndarray:
    """Chunks whose bytes in ``got`` match no single moment of the history (``start``, then
    ``writes`` applied one by one): a torn or mixed chunk. Returns their numbers."""
    n = int(chunk_ids.max()) + 1
    explained = np.zeros(n, bool)
    state = start.copy()

    def check() -> None:
        bad = np.bincount(chunk_ids[state != got], minlength=n)
        explained[bad == 0] = True

    check()
    for off, data in writes:
        state[off : off + len(data)] = np.frombuffer(data, np.uint8)
        check()
    return np.flatnonzero(~explained)
