"""The write-amplification case of scripts/bench --more (``--cases amplification``, issue
#30): random 4 KiB writes into a sharded array of 64 inner chunks per shard.

A v3 array of 64 MiB float32 (4096 x 4096) in shards of 1024 x 1024 holding 8 x 8 inner
chunks of 128 x 128 (blosc-lz4), written whole first. Then the same 500 random 4 KiB
writes (each inside one row of the array, at 4-byte aligned offsets), through a fresh
``rw`` mount (``pwrite`` each, one ``fsync`` at the end) and by zarr-python (an assignment
of the same 1024 elements each). Write amplification: bytes the store took per byte
written (the mount's own statistics; zarr-python's store counted by a wrapper). Target:
the mount's at or below zarr-python's.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import _bench_sys as b
import numpy as np
import zarr
from zarr.codecs import BloscCodec
from zarr.storage import LocalStore

SIDE, SHARD, INNER, WRITES, SIZE = 4096, 1024, 128, 500, 4096


class CountingStore(LocalStore):
    """zarr-python's local store, counting the bytes it is given to store."""

    stored = 0

    async def set(self, key, value) -> None:
        CountingStore.stored += len(value)
        await super().set(key, value)


def _fresh(path: Path, store=None) -> zarr.Array:
    shutil.rmtree(path, ignore_errors=True)
    arr = zarr.create_array(
        store if store is not None else str(path),
        shape=(SIDE, SIDE),
        chunks=(INNER, INNER),
        shards=(SHARD, SHARD),
        dtype="<f4",
        compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
    )
    arr[:] = np.random.default_rng(0).standard_normal((SIDE, SIDE), dtype=np.float32)
    return arr


def _writes() -> list[tuple[int, bytes]]:
    """Offsets (within one row each) and 4 KiB of values."""
    rng = random.Random(30)
    rowbytes = SIDE * 4
    out = []
    for _ in range(WRITES):
        row, col = rng.randrange(SIDE), rng.randrange(0, rowbytes - SIZE + 1, 4)
        out.append((row * rowbytes + col, np.float32(rng.random()).tobytes() * (SIZE // 4)))
    return out


def run(args, work: Path) -> list[str]:
    writes = _writes()
    written = WRITES * SIZE
    mine, theirs = work / "amplification-mount.zarr", work / "amplification-zarr.zarr"
    _fresh(mine)
    with b.Mount(args.zarrmount, mine, work / "mnt", work / "zarrmount.log", [], mode="rw") as m:
        before = b.daemon_stats(m.mnt)["store_set_bytes"]
        fd = os.open(m.mnt / "array", os.O_WRONLY)
        try:
            for off, data in writes:
                os.pwrite(fd, data, off)
            os.fsync(fd)
        finally:
            os.close(fd)
        ours = b.daemon_stats(m.mnt)["store_set_bytes"] - before
    arr = _fresh(theirs, CountingStore(str(theirs)))
    CountingStore.stored = 0
    for off, data in writes:
        row, col = divmod(off // 4, SIDE)
        arr[row, col : col + SIZE // 4] = np.frombuffer(data, "<f4")
    zarr_bytes = CountingStore.stored
    check = zarr.open_array(str(mine), mode="r")[:]
    if not np.array_equal(check, zarr.open_array(str(theirs), mode="r")[:]):
        raise b.BenchError("amplification: the mount's array differs from zarr-python's")
    a, z = ours / written, zarr_bytes / written
    b.log(f"  mount {ours / 1e6:.1f} MB stored, zarr-python {zarr_bytes / 1e6:.1f} MB")
    for path in (mine, theirs):
        shutil.rmtree(path, ignore_errors=True)
    return [
        f"random 4 KiB writes into shards of {(SHARD // INNER) ** 2} inner chunks "
        f"({WRITES} writes, {written / 1e6:.1f} MB)",
        f"  {'ok  ' if a <= z else 'MISS'} bytes stored per byte written: mount {a:.1f}, "
        f"zarr-python {z:.1f}",
    ]
