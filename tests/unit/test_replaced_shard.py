"""A shard another writer replaced after its index was cached: its inner chunks are read
with the index read again, never from where the old index said (garbage, or EIO)."""

from __future__ import annotations

import os

import numpy as np
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore


def test_inner_chunks_of_a_replaced_shard_are_read_by_its_new_index(tmp_path):
    root = str(tmp_path / "s.zarr")
    shape, inner = (8, 4096), (1, 4096)
    array = zarr.create_array(
        root, shape=shape, chunks=inner, shards=(8, 4096), dtype="<f4", zarr_format=3
    )
    rng = np.random.default_rng(0)
    array[:] = rng.random(shape, dtype="<f4")  # incompressible: inner chunks of one size
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions(metadata_ttl=None, negative_ttl=None)  # the index stays cached
    fs = assemble(dialect, node, pipeline, options).fs
    row = shape[1] * 4

    async def main() -> bytes:
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        await fs.read(fh, 0, row)  # the shard's index is cached now, and row 0
        replaced = np.arange(shape[0] * shape[1], dtype="<f4").reshape(shape)
        replaced[4:] = 7  # compresses: the inner chunks lie elsewhere in the new shard
        zarr.open_array(root, mode="r+")[:] = replaced
        return bytes(await fs.read(fh, 5 * row, row))

    got = trio.run(main)
    expected = zarr.open_array(root, mode="r")[5]
    assert np.frombuffer(got, "<f4").tolist() == expected.tolist()
