"""The oracles of the read-write mount tests (``helpers.rw_tools``) checked on their own."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from helpers import rw_tools


@pytest.mark.parametrize("name", sorted(rw_tools.SPECS))
def test_chunk_of_bytes_agrees_with_zarr(tmp_path, name):
    store = rw_tools.make_store(tmp_path, name, rw_tools.SPECS[name], initial="none")
    arr = zarr.open_array(store.root, path=name, mode="r+")
    grid = tuple(-(-s // c) for s, c in zip(arr.shape, arr.chunks, strict=True))
    # every element holds the C-order number of its chunk
    numbers = np.zeros(arr.shape, np.int64)
    for idx in np.ndindex(*grid):
        sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, arr.chunks, strict=True))
        numbers[sel] = np.ravel_multi_index(idx, grid)
    ids = rw_tools.chunk_of_bytes(arr.shape, arr.chunks, arr.dtype.itemsize)
    assert np.array_equal(ids[:: arr.dtype.itemsize], numbers.reshape(-1))
    assert ids.size == arr.size * arr.dtype.itemsize


def test_unexplained_chunks_finds_mixed_chunks():
    shape, chunks = (6, 4), (3, 2)
    ids = rw_tools.chunk_of_bytes(shape, chunks, 1)
    start = np.zeros(24, np.uint8)
    writes = [(0, bytes([1] * 24)), (0, bytes([2] * 24))]
    ok = start.copy()
    ok[ids == 0] = 1  # chunk 0 after write 1, the rest before any write
    ok[ids == 3] = 2
    assert rw_tools.unexplained_chunks(ok, start, writes, ids).size == 0
    mixed = ok.copy()
    first_of_chunk_1 = int(np.flatnonzero(ids == 1)[0])
    mixed[first_of_chunk_1] = 2  # one byte of chunk 1 from write 2, the others from before
    assert list(rw_tools.unexplained_chunks(mixed, start, writes, ids)) == [1]


def test_store_helpers_read_what_zarr_wrote(tmp_path):
    store = rw_tools.make_store(
        tmp_path, "v2f", rw_tools.SPECS["v2f"], initial="full", rng=np.random.default_rng(3)
    )
    arr = store.open()
    assert store.read_bytes().tobytes() == np.ascontiguousarray(arr[...]).tobytes()
    assert store.fill_bytes() == np.array([7], ">i4").tobytes()
    files = store.chunk_files()
    assert len(files) == 9 * 10 and "0.0" in files and "8.9" in files
