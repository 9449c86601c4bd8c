"""Write-backs under pressure without FUSE: a relief names every dirty inner chunk of a
shard, and those callers must not take the turns (``WRITE_BACKS``) other shards wait for;
a caller that takes another's outcome still gets one when that other is cancelled; two
write-backs of one unit never store it side by side."""

from __future__ import annotations

import os
import threading

import numpy as np
import trio
import trio.testing
import zarr
from helpers.store_doubles import GatedStore

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.cache.chunks import WRITE_BACKS
from zarrmount.errors import FsError
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

SHAPE, CHUNKS, SHARDS = (32, 16), (4, 4), (16, 16)  # two shards of 16 inner chunks
INNER = (SHARDS[0] // CHUNKS[0]) * (SHARDS[1] // CHUNKS[1])
A, B = "c/0/0", "c/1/0"


def _mounted(tmp_path):
    """A rw mount, without FUSE, of a fresh sharded array whose shard A's store waits at
    a gate; its root, store and mount."""
    root = str(tmp_path / "s.zarr")
    zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="u1", fill_value=0)
    store = GatedStore(root, A)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    options.apply("rw")
    return root, store, assemble(dialect, node, pipeline, options)


def _stored(root) -> bytes:
    return np.ascontiguousarray(zarr.open_array(root, mode="r")[:]).tobytes()


def test_a_relief_of_a_whole_shard_leaves_turns_to_other_shards(tmp_path):
    """Shard A's 16 dirty inner chunks and one of shard B are written back by one relief
    while A's store hangs: B is stored meanwhile, A once, and the relief reports no error."""
    assert INNER > WRITE_BACKS  # A's callers alone could take every turn
    root, store, mount = _mounted(tmp_path)
    fs = mount.fs
    model = np.zeros(SHAPE, dtype=np.uint8).reshape(-1)
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
    assert _stored(root) == model.tobytes()


def test_a_cancelled_write_back_leaves_its_waiters_to_store(tmp_path):
    """Two fsyncs of one dirty shard wait for a turn, the second on the first's outcome;
    the first is cancelled: the second stores the shard and succeeds."""
    root, store, mount = _mounted(tmp_path)
    fs = mount.fs
    model = np.zeros(SHAPE, dtype=np.uint8).reshape(-1)
    model[SHARDS[0] * SHARDS[1] + 5] = 9

    async def main() -> None:
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        await fs.write(fh, SHARDS[0] * SHARDS[1] + 5, b"\x09")  # one of B
        turns = [object() for _ in range(WRITE_BACKS)]
        for t in turns:  # every turn taken: both fsyncs wait
            await mount.cache.write_backs.acquire_on_behalf_of(t)
        async with trio.open_nursery() as nursery:
            first = trio.CancelScope()

            async def cancelled() -> None:
                with first:
                    await fs.fsync(fh)

            nursery.start_soon(cancelled)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(fs.fsync, fh)
            await trio.testing.wait_all_tasks_blocked()
            first.cancel()
            await trio.testing.wait_all_tasks_blocked()
            for t in turns:
                mount.cache.write_backs.release_on_behalf_of(t)
        assert B in store.stored
        await fs.release(fh)

    trio.run(main)
    assert _stored(root) == model.tobytes()


class _ReadGated(LocalStore):
    """Holds reads of one key until the test opens the gate."""

    def __init__(self, root: str, gated: str) -> None:
        super().__init__(root)
        self.gated, self.gate = gated, threading.Event()

    def read_into(self, key, buffer_for):
        if key == self.gated:
            assert self.gate.wait(60), "the test never opened the gate"
        return super().read_into(key, buffer_for)


def test_two_write_backs_of_a_unit_completing_at_once_store_it_once(tmp_path):
    """A chunk begun unloaded (its first half written) is completed from the store before
    its write-back; a second fsync begins its own write-back while the first completes
    (the read held at a gate): it waits for the first instead of storing beside it, and
    both succeed."""
    root = str(tmp_path / "u.zarr")
    zarr.create_array(root, shape=(32, 16), chunks=(16, 16), dtype="u1", fill_value=3)
    store = _ReadGated(root, "c/0/0")
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    options.apply("rw,journal=none")
    fs = assemble(dialect, node, pipeline, options).fs
    model = np.full((32, 16), 3, dtype=np.uint8)
    model[:8] = 9
    errors = []

    async def fsync(fh) -> None:
        try:
            await fs.fsync(fh)
        except FsError as e:
            errors.append(e)

    async def main() -> None:
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        await fs.write(fh, 0, b"\x09" * 128)  # the first half of chunk (0, 0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fsync, fh)
            await trio.testing.wait_all_tasks_blocked()  # completing: at the gate
            nursery.start_soon(fsync, fh)
            await trio.testing.wait_all_tasks_blocked()
            store.gate.set()
        await fs.release(fh)

    trio.run(main)
    assert errors == []
    assert np.array_equal(zarr.open_array(root, mode="r")[:], model)
