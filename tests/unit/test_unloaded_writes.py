"""Chunks a sequential writer begins are not loaded first (no FUSE): a chunk written
whole in pieces from its first element costs no read of the store; one left part-written
has its other elements loaded once, when read or written back. Expected values: a NumPy
model of the writes over the data zarr-python wrote, and zarr-python reading the store.
"""

from __future__ import annotations

import os

import numpy as np
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

SHAPE, CHUNKS = (64, 100), (16, 100)  # a chunk: 16 rows, contiguous in the file
CHUNK_BYTES = 16 * 100 * 4
PIECE = CHUNK_BYTES // 4  # the kernel hands a long write over in pieces


def _setup(tmp_path):
    root = str(tmp_path / "w.zarr")
    array = zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=-1)
    array[:] = np.random.default_rng(3).random(SHAPE, dtype="<f4")
    model = np.asarray(array[:]).copy()
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions()
    options.apply("rw")
    return root, model, assemble(dialect, node, pipeline, options).fs


def _new(n: int, seed: int) -> bytes:
    return np.random.default_rng(seed).random(n // 4, dtype="<f4").tobytes()


def test_whole_chunks_written_in_pieces_are_never_loaded(tmp_path):
    root, model, fs = _setup(tmp_path)
    flat = model.view(np.uint8).reshape(-1)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for at in range(0, 2 * CHUNK_BYTES, PIECE):  # chunks 0 and 1, whole
            data = _new(PIECE, at)
            assert await fs.write(fh, at, data) == PIECE
            flat[at : at + PIECE] = np.frombuffer(data, np.uint8)
        gets = fs.stats()["store_gets"]
        await fs.fsync(fh)
        got = bytes(await fs.read(fh, 0, 2 * CHUNK_BYTES))
        await fs.release(fh)
        return gets, got

    gets, got = trio.run(main)
    assert gets == 0  # nothing of the store was read to write them
    assert got == flat[: 2 * CHUNK_BYTES].tobytes()
    assert (zarr.open_array(root, mode="r")[:] == model).all()


def test_a_chunk_left_part_written_keeps_its_other_elements(tmp_path):
    """Read before its write-back (chunk 1), or only written back (chunk 2): the elements
    not written are the stored ones, each chunk loaded once."""
    root, model, fs = _setup(tmp_path)
    flat = model.view(np.uint8).reshape(-1)
    one = slice(CHUNK_BYTES, 2 * CHUNK_BYTES)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDWR)
        for chunk in (1, 2):
            at = chunk * CHUNK_BYTES
            data = _new(PIECE, chunk)  # a quarter of it, from its first element
            assert await fs.write(fh, at, data) == PIECE
            flat[at : at + PIECE] = np.frombuffer(data, np.uint8)
        read = bytes(await fs.read(fh, CHUNK_BYTES, CHUNK_BYTES))  # chunk 1, merged
        expected = flat[one].tobytes()
        more = _new(PIECE, 9)  # written after the merge: kept
        await fs.write(fh, CHUNK_BYTES + PIECE, more)
        flat[CHUNK_BYTES + PIECE : CHUNK_BYTES + 2 * PIECE] = np.frombuffer(more, np.uint8)
        await fs.fsync(fh)
        await fs.release(fh)
        return read, expected, fs.stats()["store_gets"]

    read, expected, gets = trio.run(main)
    assert read == expected
    assert gets == 2  # chunks 1 and 2, once each
    assert (zarr.open_array(root, mode="r")[:] == model).all()
