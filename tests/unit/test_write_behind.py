"""Write-behind without FUSE: a sequential writer's finished chunks are stored while it
writes on (before any flush), their buffers go back to the pool, and a random writer's
chunks wait for the usual write-back."""

from __future__ import annotations

import os

import numpy as np
import pytest
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

ROWS, COLS = 12, 4096  # chunks of one row: 4 KiB each


def _array(root: str, sharded: bool) -> None:
    kwargs = {"shards": (4, COLS)} if sharded else {"compressors": None}
    zarr.create_array(root, shape=(ROWS, COLS), chunks=(1, COLS), dtype="u1", **kwargs)


async def _write(root: str, offsets: list[int], size: int, data: np.ndarray, behind: int):
    """Write ``data`` at ``offsets`` in requests of ``size``, the mount's background
    running; the statistics once ``behind`` units are stored (before the flush), and
    after the flush."""
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions()
    options.apply("rw")
    mount = assemble(dialect, node, pipeline, options)
    fs = mount.fs
    async with trio.open_nursery() as nursery:
        mount.background.nursery = nursery
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for off in offsets:
            await fs.write(fh, off, data[off : off + size].tobytes())
        with trio.fail_after(30):  # the stores begun meanwhile, in worker threads
            while fs.stats()["store_sets"] < behind:
                await trio.sleep(0.01)
        before = fs.stats()
        await fs.flush(fh)
        await fs.release(fh)
        mount.background.nursery = None
    return before, fs.stats()


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_a_sequential_writers_finished_chunks_are_stored_before_the_flush(tmp_path, sharded):
    root = str(tmp_path / "w.zarr")
    _array(root, sharded)
    data = np.random.default_rng(3).integers(0, 255, ROWS * COLS, dtype=np.uint8)
    offsets = list(range(0, ROWS * COLS, 1000))
    units = ROWS if not sharded else ROWS // 4
    # every unit is written to its end by the stream, and stored with no flush
    before, after = trio.run(_write, root, offsets, 1000, data, units)
    assert before["cache_dirty_bytes"] == 0
    assert after["store_sets"] == units  # the flush found nothing more to store
    assert before["cache_entries"] <= 4  # stored chunks went back to the pool
    stored = np.asarray(zarr.open_array(root, mode="r")[:]).reshape(-1)
    assert np.array_equal(stored, data)


def test_a_random_writers_chunks_wait_for_the_write_back(tmp_path):
    root = str(tmp_path / "r.zarr")
    _array(root, False)
    data = np.random.default_rng(4).integers(0, 255, ROWS * COLS, dtype=np.uint8)
    offsets = [k * COLS for k in (3, 0, 7, 1, 11, 5)]
    before, after = trio.run(_write, root, offsets, COLS, data, 0)
    assert before["store_sets"] == 0 and after["store_sets"] == len(offsets)
    stored = np.asarray(zarr.open_array(root, mode="r")[:])
    for off in offsets:
        assert np.array_equal(stored[off // COLS], data[off : off + COLS])
