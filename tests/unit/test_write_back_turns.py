"""Write-backs under pressure without FUSE: a relief names every dirty inner chunk of a
shard, and those callers must not take the turns (``WRITE_BACKS``) other shards wait for."""

from __future__ import annotations

import os

import numpy as np
import trio
import zarr
from helpers.store_doubles import GatedStore

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.cache.chunks import WRITE_BACKS
from zarrmount.options import MountOptions

SHAPE, CHUNKS, SHARDS = (32, 16), (4, 4), (16, 16)  # two shards of 16 inner chunks
INNER = (SHARDS[0] // CHUNKS[0]) * (SHARDS[1] // CHUNKS[1])
A, B = "c/0/0", "c/1/0"


def test_a_relief_of_a_whole_shard_leaves_turns_to_other_shards(tmp_path):
    """Shard A's 16 dirty inner chunks and one of shard B are written back by one relief
    while A's store hangs: B is stored meanwhile, A once, and the relief reports no error."""
    assert INNER > WRITE_BACKS  # A's callers alone could take every turn
    root = str(tmp_path / "s.zarr")
    zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="u1", fill_value=0)
    model = np.zeros(SHAPE, dtype=np.uint8).reshape(-1)
    store = GatedStore(root, A)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    options.apply("rw")
    mount = assemble(dialect, node, pipeline, options)
    fs = mount.fs
    shard_a = np.random.default_rng(32).integers(1, 255, SHARDS[0] * SHARDS[1], dtype=np.uint8)
    model[: shard_a.size] = shard_a
    model[shard_a.size + 5] = 9
    relieved = {}

    async def relieve() -> None:
        relieved["error"] = await mount.cache.relieve(0)

    async def main() -> None:
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        await fs.write(fh, 0, shard_a.tobytes())  # every inner chunk of A, oldest first
        await fs.write(fh, shard_a.size + 5, b"\x09")  # one of B
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relieve)
            with trio.fail_after(30):
                while B not in store.stored:
                    await trio.sleep(0.01)
            assert A not in store.stored  # still held at the gate
            store.gate.set()
        await fs.release(fh)

    trio.run(main)
    assert relieved["error"] is None
    assert store.stored.count(A) == 1 and store.stored.count(B) == 1
    stored = np.ascontiguousarray(zarr.open_array(root, mode="r")[:]).reshape(-1)
    assert stored.tobytes() == model.tobytes()
