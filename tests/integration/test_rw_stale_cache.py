"""Reads racing with write-backs must never bring older store contents back into the
daemon's cache: read-after-write through the mount, and no update lost by a later
read-modify-write of a chunk the cache holds in a stale form.

Both tests pass whatever the timing when the daemon is right; they are built so that the
race windows are wide (slow-to-decode chunks; many concurrent readers), so that a wrong
daemon fails them nearly every run.
"""

from __future__ import annotations

import os
import threading
import time

import numcodecs
import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount


def test_load_in_flight_during_overwrite_and_fsync_is_not_cached(tmp_path):
    """A reader's load of chunk C is in flight (bz2: ~20 ms to decode) while another fd
    overwrites all of C in one request and fsyncs (C stored). The finished load must not
    replace the new content in the cache: re-reads show the new bytes, and a later 1-byte
    write (read-modify-write of C) must not store C's old bytes again."""
    width = 256 * 1024  # one chunk = one row = one O_DIRECT write request
    rows = 8
    spec = dict(
        zarr_format=2,
        shape=(rows, width),
        chunks=(1, width),
        dtype="u1",
        compressors=numcodecs.BZ2(level=9),
        fill_value=0,
    )
    store = rw_tools.make_store(tmp_path, "bz", spec, rng=np.random.default_rng(51), initial="full")
    model = store.read_bytes()
    problems = []
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwstale") as m:
        path = m.p("bz")
        rfd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        wfd = os.open(path, os.O_RDWR | os.O_DIRECT)
        try:
            for r in range(rows):
                off = r * width
                reader = threading.Thread(target=os.pread, args=(rfd, 16, off + 100))
                reader.start()
                time.sleep(0.003)  # the reader's load is now decoding
                new = bytes([5 + r]) * width
                assert os.pwrite(wfd, new, off) == width
                model[off : off + width] = 5 + r
                os.fsync(wfd)
                reader.join()
                got = os.pread(wfd, width, off)
                if got != new:
                    problems.append(
                        f"chunk {r}: re-read after overwrite + fsync shows "
                        f"{np.count_nonzero(np.frombuffer(got, np.uint8) != 5 + r)}"
                        f" old bytes"
                    )
                os.pwrite(wfd, b"\x01", off)  # read-modify-write of the chunk
                model[off] = 1
                os.fsync(wfd)
                stored = store.read_bytes()[off : off + width]
                if not np.array_equal(stored, model[off : off + width]):
                    problems.append(
                        f"chunk {r}: after a 1-byte write + fsync the store holds "
                        f"{np.count_nonzero(stored != model[off : off + width])} "
                        "bytes of the overwritten (older) content"
                    )
        finally:
            os.close(rfd)
            os.close(wfd)
    assert not problems, "\n".join(problems)
    assert_store_equals(store, model, "after unmount")


def test_shard_reads_racing_with_write_backs_of_the_same_shard(tmp_path):
    """Three readers load inner chunks that nobody writes, while a writer keeps rewriting
    other inner chunks of the same shards and fsyncs after every write (each fsync
    rewrites a shard with a new layout and index: the written inner chunk's stored size
    changes every time, which moves the inner chunks after it). Readers must always see the stored
    values; afterwards the mount and the store must agree with the model, also after a
    read-modify-write of every inner chunk."""
    n, c, s = 256, 8, 128
    spec = dict(
        zarr_format=3,
        shape=(n, n),
        chunks=(c, c),
        shards=(s, s),
        dtype="<u2",
        compressors=zarr.codecs.ZstdCodec(level=1),
        fill_value=0,
    )
    store = rw_tools.make_store(tmp_path, "sh", spec, rng=np.random.default_rng(52), initial="full")
    model = store.read_bytes().view("<u2").reshape(n, n).copy()
    base = model.copy()
    grid = n // c

    def written_by_writer(i: int, j: int) -> bool:
        return i % 4 == 0 and j % 4 == 0

    stop = threading.Event()
    bad_reads: list[str] = []
    reads = [0]
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwstale") as m:
        path = m.p("sh")

        def reader(seed: int) -> None:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            rng = np.random.default_rng(seed)
            try:
                while not stop.is_set():
                    i, j = (int(v) for v in rng.integers(0, grid, 2))
                    if written_by_writer(i, j):
                        continue
                    row = i * c + int(rng.integers(0, c))
                    try:
                        got = os.pread(fd, 2 * c, (row * n + j * c) * 2)
                    except OSError as e:
                        bad_reads.append(f"row {row} inner chunk ({i},{j}): {e}")
                        continue
                    reads[0] += 1
                    if got != base[row, j * c : (j + 1) * c].tobytes():
                        bad_reads.append(f"row {row} inner chunk ({i},{j}): wrong values")
            finally:
                os.close(fd)

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        wfd = os.open(path, os.O_RDWR | os.O_DIRECT)
        rng = np.random.default_rng(53)
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 4.0:
                i, j = (4 * int(v) for v in rng.integers(0, grid // 4, 2))
                row = i * c + int(rng.integers(0, c))
                # values of varying entropy: the inner chunk's stored size changes with
                # every write, so every shard rewrite moves the inner chunks after it
                top = int(rng.choice([1, 3, 300, 65536]))
                vals = rng.integers(0, top, c, dtype=np.uint16).astype("<u2")
                os.pwrite(wfd, vals.tobytes(), (row * n + j * c) * 2)
                model[row, j * c : (j + 1) * c] = vals
                os.fsync(wfd)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        try:
            whole = np.frombuffer(rw_tools.pread_all(wfd, n * n * 2, 0), "<u2").reshape(n, n)
            wrong_in_mount = int(np.count_nonzero(whole != model))
            # Rewrite one element of every inner chunk with its own value: a stale cached
            # chunk would now reach the store.
            for i in range(grid):
                for j in range(grid):
                    r0, c0 = i * c, j * c
                    os.pwrite(wfd, model[r0, c0 : c0 + 1].tobytes(), (r0 * n + c0) * 2)
            os.fsync(wfd)
        finally:
            os.close(wfd)
        stored = store.read_bytes().view("<u2").reshape(n, n)
        wrong_in_store = int(np.count_nonzero(stored != model))
    assert reads[0] > 100, reads
    assert not bad_reads and not wrong_in_mount and not wrong_in_store, (
        f"{len(bad_reads)} of {reads[0]} reads of never-written inner chunks were wrong "
        f"(e.g. {bad_reads[:3]}); afterwards {wrong_in_mount} elements read wrong through the "
        f"mount and, after a read-modify-write of every inner chunk, {wrong_in_store} "
        "elements are wrong in the store"
    )
    assert_store_equals(store, model.reshape(-1).view(np.uint8), "after unmount")
