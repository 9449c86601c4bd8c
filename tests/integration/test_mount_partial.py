"""Through the kernel: small cold reads decode part of a chunk, and the bytes are right.

Arrays are written by zarr-python, which is also the oracle. The daemon's statistics
(``user.zarrmount.stats``) say how many reads were served from part of a chunk.
"""

from __future__ import annotations

import json
import os

import numcodecs
import numpy as np
import pytest
import zarr
from helpers.oracle import assert_bytes_equal

pytestmark = pytest.mark.mount

SHAPE, CHUNKS = (1024, 1536), (256, 512)  # 512 KiB chunks
DTYPE = np.dtype("<f4")
ROW = SHAPE[1] * DTYPE.itemsize
COMPRESSORS = {
    # 64 KiB blocks (c-blosc's least for lz4 with shuffle): 8 in each chunk
    "lz4": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, 16384),
    "raw": None,
    # one frame per chunk: reads in a chunk's first 64 KiB (rows 0-31) decode that far
    "zstd": numcodecs.Zstd(level=3),
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("partial") / "data.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    rng = np.random.default_rng(11)
    values = np.cumsum(rng.standard_normal(SHAPE), axis=1).astype(DTYPE)
    expected = {}
    for name, compressor in COMPRESSORS.items():
        a = group.create_array(
            name, shape=SHAPE, chunks=CHUNKS, dtype=DTYPE, compressors=compressor
        )
        a[:] = values
        expected[name] = np.ascontiguousarray(
            zarr.open_array(root, path=name, mode="r")[:]
        ).tobytes()
    return root, expected


def stats(mount) -> dict:
    return json.loads(os.getxattr(mount.path, "user.zarrmount.stats"))


@pytest.mark.parametrize("name", COMPRESSORS)
def test_small_cold_reads_then_a_full_read(mount_factory, source, name):
    root, expected = source
    mount = mount_factory(root, tag=f"partial-{name}")
    rng = np.random.default_rng(2)
    offsets = [0, ROW * 300 + 4096, len(expected[name]) - 4096]
    offsets += [int(o) // 4096 * 4096 for o in rng.integers(0, len(expected[name]), 20)]
    fd = os.open(mount.p(name), os.O_RDONLY | os.O_DIRECT)
    try:
        for offset in offsets:
            got = os.pread(fd, 4096, offset)
            assert_bytes_equal(got, expected[name][offset : offset + 4096], DTYPE)
        assert stats(mount)["cache_partial_reads"] > 0
    finally:
        os.close(fd)
    with open(mount.p(name), "rb") as f:  # parts, follow-up loads and cache agree
        assert_bytes_equal(f.read(), expected[name], DTYPE)
    mount.assert_alive()
