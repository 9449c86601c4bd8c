"""Huge arrays of tiny chunks, nearly all absent (10^12 one-byte chunks): stat, a read at a
far offset and a 1 GiB sequential read work in bounded time and memory and return the fill
value, with the few written elements where zarr-python reads them; a sibling keeps
answering meanwhile. The daemon runs under an address-space limit.

Expected bytes: NumPy arrays of zarr-python's fill value, with the elements zarr-python
reads at the written places.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted

from zarrmount.array.stored_units import LIMIT as LISTING_LIMIT

pytestmark = pytest.mark.mount

MIB = 1 << 20
CACHE = 64 * MIB
LIMIT = ["prlimit", f"--as={4 << 30}", "--"]
N = 10**12
FAR = N - 3 * MIB  # a far offset: the last few MiB of the file
# flat indices written by zarr-python; two of them inside the far reads below
WRITTEN = (7, 5 * 10**11, FAR + 1000, FAR + MIB + 12345, N - 1)


def _store(root: str, fmt: int, shape: tuple, chunks: tuple, shards=None) -> None:
    """Arrays ``sparse``, of fill but for WRITTEN, and ``healthy``, a small sibling."""
    group = zarr.open_group(root, mode="a", zarr_format=fmt)
    array = group.create_array(
        "sparse",
        shape=shape,
        chunks=chunks,
        shards=shards,
        dtype="u1",
        fill_value=3,
        compressors=None,
    )
    for i, flat in enumerate(WRITTEN):
        array[np.unravel_index(flat, shape)] = 100 + i
    healthy = group.create_array("healthy", shape=(1 << 18,), chunks=(1 << 14,), dtype="<u4")
    healthy[:] = np.arange(1 << 18, dtype="<u4")


CASES = {
    "v2-1d": (2, (N,), (1,), None),
    "v3-2d": (3, (10**6, 10**6), (1, 1), None),
    "v3-sharded": (3, (N,), (1,), (1000,)),
}


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    roots = {}
    for name, (fmt, shape, chunks, shards) in CASES.items():
        root = str(tmp_path_factory.mktemp(name) / "data.zarr")
        _store(root, fmt, shape, chunks, shards)
        roots[name] = root
    return roots


def _expected(array: zarr.Array, start: int, size: int, written=WRITTEN) -> np.ndarray:
    """The model of bytes ``[start, start + size)``: fill, and what zarr-python reads at
    the written places."""
    model = np.full(size, array.fill_value, dtype=np.uint8)
    for flat in written:
        if start <= flat < start + size:
            model[flat - start] = array[np.unravel_index(flat, array.shape)]
    return model


def _stream(path: str, start: int, size: int, array: zarr.Array) -> float:
    """Read ``size`` bytes from ``start`` in 1 MiB blocks, each checked; the seconds taken."""
    began = time.monotonic()
    with open(path, "rb") as f:
        f.seek(start)
        for at in range(start, start + size, MIB):
            got = np.frombuffer(f.read(MIB), dtype=np.uint8)
            assert np.array_equal(got, _expected(array, at, MIB)), f"bytes at {at}"
    return time.monotonic() - began


def _sibling(path: str, expected: bytes, done: threading.Event, waits: list) -> None:
    """Read ``path`` whole, from the daemon each time, until ``done`` (at least once)."""
    while True:
        began = time.monotonic()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            waits.append((os.pread(fd, len(expected) + 1, 0) == expected, time.monotonic() - began))
        finally:
            os.close(fd)
        if done.is_set():
            return


@pytest.mark.parametrize("name", CASES)
def test_a_sparse_array_of_tiny_chunks_reads_in_bounded_time_and_memory(sparse, name):
    root = sparse[name]
    array = zarr.open_array(root, path="sparse", mode="r")
    healthy = zarr.open_array(root, path="healthy", mode="r")[:].tobytes()
    with mounted(root, [f"cache_size={CACHE // MIB}M"], tag="sparse", wrapper=LIMIT) as m:
        path = m.p("sparse")
        assert os.stat(path).st_size == N
        with rw_tools.RssSampler(m.proc.pid) as rss:
            fd = os.open(path, os.O_RDONLY)
            try:
                began = time.monotonic()
                got = np.frombuffer(os.pread(fd, MIB, FAR), dtype=np.uint8)
                far_s = time.monotonic() - began
            finally:
                os.close(fd)
            assert np.array_equal(got, _expected(array, FAR, MIB))
            done, waits = threading.Event(), []
            sibling = threading.Thread(target=_sibling, args=(m.p("healthy"), healthy, done, waits))
            sibling.start()
            try:
                stream_s = _stream(path, N - 1024 * MIB, 1024 * MIB, array)
            finally:
                done.set()
                sibling.join()
        m.assert_alive()
    print(
        f"{name}: 1 MiB far read {far_s:.2f} s, 1 GiB stream {stream_s:.1f} s, "
        f"sibling reads {len(waits)} (slowest {max(t for _, t in waits):.2f} s), "
        f"peak RSS {rss.peak_kib // 1024} MiB"
    )
    assert all(ok for ok, _ in waits)
    assert rss.peak_kib * 1024 <= CACHE + 150 * MIB


def test_tiny_chunks_too_many_to_list_are_read_a_piece_at_a_time(tmp_path):
    """More stored chunks than a listing holds: each chunk a request touches is read, a
    bounded piece at a time, in bounded memory, and a sibling keeps answering."""
    root = str(tmp_path / "dense.zarr")
    _store(root, 2, (N,), (1,))
    written = range(0, (LISTING_LIMIT + 1000) * 1000, 1000)
    for flat in written:  # stored as zarr-python stores an uncompressed one-byte chunk
        with open(f"{root}/sparse/{flat}", "wb") as f:
            f.write(bytes([flat // 1000 % 200]))
    array = zarr.open_array(root, path="sparse", mode="r")
    assert array[1000 * 1234] == 1234 % 200  # zarr-python reads the chunks so written
    healthy = zarr.open_array(root, path="healthy", mode="r")[:].tobytes()
    with mounted(root, [f"cache_size={CACHE // MIB}M"], tag="dense", wrapper=LIMIT) as m:
        with rw_tools.RssSampler(m.proc.pid) as rss:
            done, waits = threading.Event(), []
            sibling = threading.Thread(target=_sibling, args=(m.p("healthy"), healthy, done, waits))
            sibling.start()
            try:
                fd = os.open(m.p("sparse"), os.O_RDONLY)
                try:
                    for at in (0, FAR):
                        got = np.frombuffer(os.pread(fd, 128 << 10, at), dtype=np.uint8)
                        want = _expected(array, at, 128 << 10, [*written, *WRITTEN])
                        assert np.array_equal(got, want), f"bytes at {at}"
                finally:
                    os.close(fd)
            finally:
                done.set()
                sibling.join()
        m.assert_alive()
    print(
        f"dense: sibling reads {len(waits)} (slowest {max(t for _, t in waits):.2f} s), "
        f"peak RSS {rss.peak_kib // 1024} MiB"
    )
    assert all(ok for ok, _ in waits)
    assert rss.peak_kib * 1024 <= CACHE + 150 * MIB
