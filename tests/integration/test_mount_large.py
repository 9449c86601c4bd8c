"""An 80 GB (virtual) array: 64-bit sizes and offsets, reads far past 4 GiB, reads at EOF.

Almost every chunk is missing (fill value); two chunks are written. The oracle for a byte
range is zarr-python reading the rows that contain it.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import zarr
from helpers.oracle import assert_bytes_equal

pytestmark = pytest.mark.mount

SHAPE = (200_000, 100_000)
CHUNKS = (1000, 1000)
DTYPE = np.dtype("<f4")
ROW = SHAPE[1] * DTYPE.itemsize
SIZE = SHAPE[0] * ROW


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    root = tmp_path_factory.mktemp("huge") / "huge.zarr"
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            str(root),
            name="h",
            shape=SHAPE,
            chunks=CHUNKS,
            dtype=DTYPE,
            zarr_format=2,
            fill_value=1.25,
        )
        arr[199_000:200_000, 99_000:100_000] = rng.standard_normal((1000, 1000)).astype(DTYPE)
        arr[100_000:101_000, 0:1000] = rng.standard_normal((1000, 1000)).astype(DTYPE)
    reader = zarr.open_array(str(root), path="h", mode="r", zarr_format=2)
    return root, reader


def oracle(reader, offset: int, size: int) -> bytes:
    """zarr-python's bytes for file range [offset, offset+size), clipped at EOF."""
    end = min(offset + size, SIZE)
    if offset >= end:
        return b""
    r0, r1 = offset // ROW, (end - 1) // ROW
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = np.ascontiguousarray(reader[r0 : r1 + 1, :]).tobytes()
    base = r0 * ROW
    return rows[offset - base : end - base]


@pytest.fixture(scope="module")
def huge_mount(huge):
    from helpers.mounting import mounted

    root, _ = huge
    with mounted(root, tag="huge") as m:
        yield m


def test_size_is_64_bit(huge_mount):
    st = os.stat(huge_mount.p("h"))
    assert st.st_size == SIZE == 80_000_000_000


@pytest.mark.parametrize(
    "offset,size",
    [
        (0, 4096),
        (2**31 - 6, 12),  # across 2 GiB
        (2**32 - 2, 8),  # across 4 GiB
        (2**33 + 3, 5000),
        (100_000 * ROW - 10, 40_000),  # into the written chunk at row 100000
        (100_500 * ROW + 3990, 20),  # across the written chunk's right edge
        (199_500 * ROW + 98_990 * 4, 80),  # across the left edge of the last chunk
        (SIZE - 4000, 4000),  # the last written bytes
        (SIZE - 8, 100),  # short read at EOF
        (SIZE, 10),  # at EOF: empty
        (SIZE + 10**9, 10),  # far past EOF: empty
    ],
)
def test_far_reads(huge_mount, huge, offset, size):
    _, reader = huge
    want = oracle(reader, offset, size)
    for flags in (os.O_RDONLY, os.O_RDONLY | os.O_DIRECT):
        fd = os.open(huge_mount.p("h"), flags)
        try:
            got = os.pread(fd, size, offset)
        finally:
            os.close(fd)
        assert_bytes_equal(got, want, DTYPE)
    huge_mount.assert_alive()
