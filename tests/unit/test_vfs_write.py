"""Writes through the FUSE-shaped API (no mount) against a NumPy model, tiny caches included.

Tiny caches force write-back under pressure, eviction of clean chunks and the reuse of
their buffers between every two requests: the model must still match after each step,
and zarr-python must read the store equal to the model after a flush.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import trio
import zarr
from helpers.rw_tools import v2_spec
from helpers.store_doubles import GatedStore

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

ARRAYS = {
    "v2": v2_spec((100, 37), (16, 10), ">f4", order="F", fill_value=-1.0),
    "v3": dict(zarr_format=3, shape=(100, 37), chunks=(16, 10), dtype="f4", fill_value=-1),
    "sharded": dict(zarr_format=3, shape=(70, 61), chunks=(8, 8), shards=(32, 32), dtype="i2"),
    # tiny chunks: whole reads touch thousands, served from a listing of the stored ones
    "tiny": dict(
        zarr_format=2, shape=(20, 90), chunks=(1, 3), dtype="u1", fill_value=7, compressors=None
    ),
    "tiny-sharded": dict(
        zarr_format=3, shape=(20, 90), chunks=(1, 3), shards=(4, 30), dtype="u1", fill_value=7
    ),
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
    fs = assemble(dialect, node, pipeline, options).fs
    rng = np.random.default_rng(7)
    most = 300 if kind.startswith("tiny") else 2500  # bytes a write covers at most

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for step in range(150):
            off = int(rng.integers(0, flat.size))
            n = min(int(rng.integers(1, most)), flat.size - off)
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


@pytest.mark.parametrize("kind", ["v3", "sharded"])
def test_a_chunk_written_again_during_write_back_is_no_failure(tmp_path, kind):
    """Pressure writes back chunks A and B together; A is stored and written again while
    B's store is still under way. A is simply dirty again: the write that waited for the
    two must not fail (it did, with EIO, when a dirty entry after the batch meant failure)."""
    root = str(tmp_path / "w.zarr")
    spec = ARRAYS[kind]
    zarr.create_array(root, **spec)
    model = np.asarray(zarr.open_array(root, mode="r")[:]).copy()
    flat = model.view(np.uint8).reshape(-1)
    # A, B and C: the first element of chunks in three different stored objects.
    step = spec.get("shards", spec["chunks"])[0]
    row = model.nbytes // model.shape[0]
    a, b, c = (i * step * row for i in range(3))
    store = GatedStore(root, "c/1/0")  # B's chunk or shard
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    # Room for A clean beside B dirty, and a dirty limit (half the cache) below two chunks.
    chunk = int(np.prod(spec["chunks"])) * model.dtype.itemsize
    options.apply(f"rw,cache_size={chunk * 5 // 2}")
    mount = assemble(dialect, node, pipeline, options)
    fs = mount.fs
    results = {}

    async def write(fh, offset: int, value: int) -> int:
        flat[offset : offset + 4] = value
        return await fs.write(fh, offset, bytes([value]) * 4)

    async def write_c(fh) -> None:
        results["c"] = await write(fh, c, 3)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        await write(fh, a, 1)
        await write(fh, b, 2)  # two chunks dirty: above the limit
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_c, fh)  # writes back A and B first
            with trio.fail_after(30):
                while len(mount.cache.dirty()) != 1:  # until A is stored and clean
                    await trio.sleep(0.01)
            assert "c/0/0" in store.stored and "c/1/0" not in store.stored
            await write(fh, a + 4, 4)  # A dirty again while B is being stored
            store.gate.set()
        assert results["c"] == 4
        await fs.flush(fh)
        await fs.release(fh)

    trio.run(main)
    stored = np.ascontiguousarray(zarr.open_array(root, mode="r")[:])
    assert stored.tobytes() == model.tobytes()
