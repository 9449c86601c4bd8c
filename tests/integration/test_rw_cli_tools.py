"""Ordinary tools and system calls on a read-write mount: cp, dd, NumPy memmap, the fixed
file size (EFBIG, EINVAL, no-op truncation), EROFS on read-only mounts, mtime, and the
deletion of chunks that became all fill value. The oracle is zarr-python reading the store.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time

import numpy as np
import pytest
from helpers import mounting, rw_tools
from helpers.rw_tools import SPECS, assert_store_equals, expect_errno

pytestmark = pytest.mark.mount

# Larger arrays (more than 1 MiB, so dd bs=1M writes several blocks) with edge chunks:
# SPECS with other sizes (and 4-byte elements in the sharded one).
BIG = {
    name: {**SPECS[name], **sizes}
    for name, sizes in {
        "v2f": dict(shape=(301, 467), chunks=(37, 53)),
        "v3": dict(shape=(733, 911), chunks=(64, 101)),
        "sharded": dict(shape=(611, 487), chunks=(31, 41), shards=(124, 123), dtype="<i4"),
    }.items()
}


def _raw_file(tmp_path, store: rw_tools.Store, seed: int) -> tuple[str, np.ndarray]:
    """A raw C-order file of random values, written by NumPy ``tofile``; and its bytes."""
    arr = store.open()
    values = rw_tools.random_values(arr.dtype, arr.shape, np.random.default_rng(seed))
    raw = str(tmp_path / "raw.bin")
    np.ascontiguousarray(values).tofile(raw)
    return raw, np.fromfile(raw, np.uint8)


def _run(args: list[str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)}: status {done.returncode}: {done.stderr}"


TOOLS = {
    "cp": lambda raw, dst: ["cp", raw, dst],
    "dd-notrunc": lambda raw, dst: ["dd", f"if={raw}", f"of={dst}", "bs=1M", "conv=notrunc"],
    "dd-trunc": lambda raw, dst: ["dd", f"if={raw}", f"of={dst}", "bs=1M"],
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("name", sorted(BIG))
def test_copy_raw_file_into_array(tmp_path, name, tool):
    store = rw_tools.make_store(tmp_path, name, BIG[name], rng=np.random.default_rng(1))
    raw, expected = _raw_file(tmp_path, store, seed=2)
    with rw_tools.rw_mount(store, tag="rwtool") as m:
        dst = m.p(name)
        _run(TOOLS[tool](raw, dst))
        assert os.stat(dst).st_size == expected.size
        # cp/dd closed the file: close (FUSE flush) stored everything already.
        assert_store_equals(store, expected, f"after {tool}, still mounted")
        assert m.stats()["cache_dirty_bytes"] == 0
        with open(dst, "rb") as f:
            rw_tools.assert_bytes_match(f.read(), expected, 0, "read back through the mount")
    assert_store_equals(store, expected, f"after {tool} and unmount")
    assert not store.temp_files()


def test_numpy_memmap_r_plus(tmp_path):
    name = "sharded"
    store = rw_tools.make_store(tmp_path, name, BIG[name], rng=np.random.default_rng(4))
    arr = store.open()
    expected = store.read_bytes().view(arr.dtype).reshape(arr.shape).copy()
    rng = np.random.default_rng(5)
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwmmap") as m:
        mm = np.memmap(m.p(name), dtype=arr.dtype, mode="r+", shape=arr.shape)
        for _ in range(30):
            r0, c0 = int(rng.integers(0, arr.shape[0])), int(rng.integers(0, arr.shape[1]))
            r1 = min(arr.shape[0], r0 + int(rng.integers(1, 90)))
            c1 = min(arr.shape[1], c0 + int(rng.integers(1, 90)))
            vals = rw_tools.random_values(arr.dtype, (r1 - r0, c1 - c0), rng)
            mm[r0:r1, c0:c1] = vals
            expected[r0:r1, c0:c1] = vals
        mm[-1, -1] = 12345  # the very last element (edge shard, edge inner chunk)
        expected[-1, -1] = 12345
        mm.flush()  # msync: dirty pages reach the daemon, then fsync stores them
        assert_store_equals(store, expected.reshape(-1).view(np.uint8), "after memmap.flush()")
        mm[0, :7] = -1
        expected[0, :7] = -1
        mm.flush()
        del mm
        m.assert_alive()
    assert_store_equals(store, expected.reshape(-1).view(np.uint8), "after del + unmount")


def test_memmap_without_flush_reaches_store_by_unmount(tmp_path):
    """No msync at all: munmap hands the dirty pages over; unmount stores them."""
    name = "v3"
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=np.random.default_rng(6))
    arr = store.open()
    expected = store.read_bytes().view(arr.dtype).reshape(arr.shape).copy()
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwmmap") as m:
        mm = np.memmap(m.p(name), dtype=arr.dtype, mode="r+", shape=arr.shape)
        mm[3:40:3, 1:50:7] = 4242
        expected[3:40:3, 1:50:7] = 4242
        del mm
    assert_store_equals(store, expected.reshape(-1).view(np.uint8), "after del + unmount")


@pytest.mark.parametrize("name", ["v2f", "sharded"])
def test_writes_past_eof_fail_with_efbig(tmp_path, name):
    with rw_tools.seeded_mount(tmp_path, name, 7, tag="rweof") as (store, model, m):
        size, path = model.size, m.p(name)
        for flags in (os.O_WRONLY, os.O_RDWR | os.O_DIRECT):
            fd = os.open(path, flags)
            try:
                expect_errno(errno.EFBIG, os.pwrite, fd, b"x", size)
                expect_errno(errno.EFBIG, os.pwrite, fd, b"xyz", size - 1)  # straddles EOF
                expect_errno(errno.EFBIG, os.pwrite, fd, b"x" * 5000, size + 10**6)
                os.lseek(fd, 0, os.SEEK_END)
                expect_errno(errno.EFBIG, os.write, fd, b"appended")
                # the last byte itself is writable
                assert os.pwrite(fd, b"\x42", size - 1) == 1
                model[size - 1] = 0x42
            finally:
                os.close(fd)
            assert os.stat(path).st_size == size
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            expect_errno(errno.EFBIG, os.write, fd, b"more")
        finally:
            os.close(fd)
        assert os.stat(path).st_size == size
        m.assert_alive()
    assert_store_equals(store, model, "refused writes changed nothing")


@pytest.mark.parametrize("name", ["v2f", "v3"])
def test_truncate_only_to_zero_or_size(tmp_path, name):
    with rw_tools.seeded_mount(tmp_path, name, 8, tag="rwtrunc") as (store, model, m):
        size, path = model.size, m.p(name)
        for bad in (1, size - 1, size + 1, size * 2):
            expect_errno(errno.EINVAL, os.truncate, path, bad)
        fd = os.open(path, os.O_RDWR)
        try:
            expect_errno(errno.EINVAL, os.ftruncate, fd, size // 2)
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        os.truncate(path, 0)
        os.truncate(path, size)
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.close(fd)
        assert os.stat(path).st_size == size
        with open(path, "rb") as f:
            rw_tools.assert_bytes_match(f.read(), model, 0, "after no-op truncations")
        assert m.stats()["store_sets"] == 0 and m.stats()["store_deletes"] == 0
    assert_store_equals(store, model, "no-op truncations")


@pytest.mark.parametrize("options", [[], ["ro"]], ids=["default", "ro"])
def test_read_only_mount_refuses_writes(tmp_path, options):
    name = "v3"
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=np.random.default_rng(9))
    model = store.read_bytes()
    files = store.chunk_files()
    with mounting.mounted(store.root, options, tag="rwro") as m:
        path = m.p(name)
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDONLY | os.O_TRUNC):
            expect_errno(errno.EROFS, os.open, path, flags)
        expect_errno(errno.EROFS, os.truncate, path, 0)
        assert not os.access(path, os.W_OK)
        with pytest.raises(OSError) as info:
            np.memmap(path, dtype=np.uint8, mode="r+")
        assert info.value.errno in (errno.EROFS, errno.EACCES)
        fd = os.open(path, os.O_RDONLY)
        try:
            expect_errno(errno.EBADF, os.pwrite, fd, b"x", 0)
        finally:
            os.close(fd)
        st = m.stats()
        assert st["store_sets"] == 0 and st["store_deletes"] == 0, st
    assert_store_equals(store, model)
    assert store.chunk_files() == files


def test_mtime_changes_on_write_only(tmp_path):
    name = "v2f"
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=np.random.default_rng(10))
    with rw_tools.rw_mount(store, tag="rwmtime") as m:
        path = m.p(name)
        t0 = os.stat(path).st_mtime_ns
        fd = os.open(path, os.O_RDWR)
        try:
            os.pread(fd, 100, 0)
            assert os.stat(path).st_mtime_ns == t0, "a read changed mtime"
            time.sleep(0.02)
            os.pwrite(fd, b"\x01\x02\x03", 1001)
            t1 = os.fstat(fd).st_mtime_ns
            assert t1 > t0, (t0, t1)
            assert os.stat(path).st_mtime_ns == t1
            time.sleep(0.02)
            os.fsync(fd)
            assert os.stat(path).st_mtime_ns == t1, "fsync changed mtime"
            time.sleep(0.02)
            os.pwrite(fd, b"\x04", 7)
            t2 = os.stat(path).st_mtime_ns
            assert t2 > t1, (t1, t2)
        finally:
            os.close(fd)
        assert os.stat(path).st_mtime_ns == t2, "close changed mtime"


def _chunk_key(store: rw_tools.Store, coords: tuple[int, ...]) -> str:
    """Chunk (or shard) key below the array directory, as zarr-python names it."""
    arr = store.open()
    if arr.metadata.zarr_format == 2:
        return ".".join(map(str, coords))
    return "/".join(["c", *map(str, coords)])


def _write_box(
    fd: int, store: rw_tools.Store, box: tuple[slice, slice], data: bytes, model: np.ndarray
) -> None:
    """pwrite ``data`` (one element's bytes, repeated) over a 2-D box, one row at a time."""
    arr = store.open()
    isz = arr.dtype.itemsize
    ncols = arr.shape[1]
    rows, cols = box
    width = cols.stop - cols.start
    for r in range(rows.start, rows.stop):
        off = (r * ncols + cols.start) * isz
        rw_tools.pwrite_all(fd, data * width, off)
        model[off : off + width * isz] = np.frombuffer(data * width, np.uint8)


@pytest.mark.parametrize("keep", [False, True], ids=["default", "write_empty_chunks"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_chunk_of_fill_values_is_deleted(tmp_path, name, keep):
    store = rw_tools.make_store(
        tmp_path, name, SPECS[name], rng=np.random.default_rng(11), initial="full"
    )
    arr = store.open()
    unit = arr.shards or arr.chunks  # what one stored object holds
    model = store.read_bytes()
    fill = store.fill_bytes()
    full_key = _chunk_key(store, (1, 2))
    edge = tuple((s - 1) // u for s, u in zip(arr.shape, unit, strict=True))
    edge_key = _chunk_key(store, edge)
    before = store.chunk_files()
    assert full_key in before and edge_key in before, before
    options = ["write_empty_chunks"] if keep else []
    with rw_tools.rw_mount(store, options, tag="rwfill") as m:
        path = m.p(name)
        fd = os.open(path, os.O_RDWR)
        try:
            # an inner stored object, then the edge one (only its part inside the array)
            _write_box(
                fd,
                store,
                (slice(unit[0], 2 * unit[0]), slice(2 * unit[1], 3 * unit[1])),
                fill,
                model,
            )
            _write_box(
                fd,
                store,
                (slice(edge[0] * unit[0], arr.shape[0]), slice(edge[1] * unit[1], arr.shape[1])),
                fill,
                model,
            )
            if arr.shards:  # one inner chunk only: the shard stays
                _write_box(
                    fd, store, (slice(0, arr.chunks[0]), slice(0, arr.chunks[1])), fill, model
                )
        finally:
            os.close(fd)  # close stores the dirty chunks
        after = store.chunk_files()
        assert_store_equals(store, model, "mounted, after close")
        st = m.stats()
        if keep:
            assert after == before, sorted(set(before) ^ set(after))
            assert st["store_deletes"] == 0, st
        else:
            assert full_key not in after and edge_key not in after, after
            assert sorted(set(before) - set(after)) == sorted({full_key, edge_key})
            assert st["store_deletes"] == 2, st
    assert_store_equals(store, model, "after unmount")


def test_whole_array_of_fill_leaves_no_chunk(tmp_path):
    name = "v2f"
    store = rw_tools.make_store(
        tmp_path, name, SPECS[name], rng=np.random.default_rng(12), initial="full"
    )
    size = store.read_bytes().size
    fill = store.fill_bytes()
    with rw_tools.rw_mount(store, tag="rwfill") as m, open(m.p(name), "r+b") as f:
        f.write(fill * (size // len(fill)))
    assert store.chunk_files() == []
    assert_store_equals(store, np.frombuffer(fill * (size // len(fill)), np.uint8))
