"""Writes through the FUSE-shaped API (no mount) against a NumPy model, tiny caches included.

Tiny caches force write-back under pressure, eviction of clean chunks and the reuse of
their buffers between every two requests: the model must still match after each step,
and zarr-python must read the store equal to the model after a flush.
"""

from __future__ import annotations

import os

import numcodecs
import numpy as np
import pytest
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import Filesystem

ARRAYS = {
    "v2": dict(zarr_format=2, shape=(100, 37), chunks=(16, 10), dtype=">f4",
               compressors=numcodecs.Zstd(level=1), order="F", fill_value=-1.0),
    "v3": dict(zarr_format=3, shape=(100, 37), chunks=(16, 10), dtype="f4", fill_value=-1),
    "sharded": dict(zarr_format=3, shape=(70, 61), chunks=(8, 8), shards=(32, 32), dtype="i2"),
}


@pytest.mark.parametrize("cache", ["1K", "20K", "64M"])
@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_random_writes_match_model(tmp_path, kind, cache):
    root = str(tmp_path / "w.zarr")
    zarr.create_array(root, **ARRAYS[kind])
    model = np.asarray(zarr.open_array(root, mode="r")[:]).copy()
    flat = model.view(np.uint8).reshape(-1)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions()
    options.apply(f"rw,cache_size={cache}")
    fs = Filesystem(dialect, node, pipeline, options)
    rng = np.random.default_rng(7)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for step in range(150):
            off = int(rng.integers(0, flat.size))
            n = min(int(rng.integers(1, 2500)), flat.size - off)
            data = rng.integers(0, 256, n, dtype=np.uint8)
            assert await fs.write(fh, off, data.tobytes()) == n
            flat[off : off + n] = data
            if step % 10 == 0:
                got = np.frombuffer(bytes(await fs.read(fh, 0, flat.size)), np.uint8)
                assert np.array_equal(got, flat), f"step {step}"
            if step % 50 == 49:
                await fs.flush(fh)
        await fs.flush(fh)
        await fs.release(fh)

    trio.run(main)
    stored = np.ascontiguousarray(zarr.open_array(root, mode="r")[:])
    assert stored.tobytes() == model.tobytes()
