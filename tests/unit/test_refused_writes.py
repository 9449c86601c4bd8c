"""Writes refused after they began, without FUSE: a journal that refuses an entry, or a
dirty limit whose write-backs cannot be stored, leaves the chunks of the refused part as
they were (nothing dirty, nothing stored), and a write accepted for its first pieces
returns their length. Expected values: a NumPy model of the accepted writes over what
zarr-python wrote, and zarr-python reading the store.
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import trio
import trio.testing
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import Mount, assemble
from zarrmount.errors import FsError
from zarrmount.journal import Journal
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

SHAPE, CHUNKS = (12, 100), (2, 100)  # a chunk: two rows, contiguous in the file
CHUNK_BYTES = 2 * 100 * 4
TINY = 1024  # elements of an array in chunks of one element: a write of 300 is 2 pieces


class RefusingJournal(Journal):
    """A journal that takes ``room`` entries, then refuses every other with ``error``."""

    room = 0
    error = OSError(errno.ENOSPC, "full")

    def append(self, path: str, ident: str, offset: int, data: bytes | memoryview) -> None:
        if self.entries >= self.room:
            raise self.error
        super().append(path, ident, offset, data)


def _journal(tmp_path, error: int, room: int) -> RefusingJournal:
    journal = RefusingJournal.open(tmp_path / "journal", "test")
    journal.error, journal.room = OSError(error, os.strerror(error)), room
    return journal


def _mounted(tmp_path, shape, chunks, journal=None, *options: str) -> tuple[str, np.ndarray, Mount]:
    """A rw mount without FUSE of an array zarr-python filled; its root, model and mount."""
    root = str(tmp_path / "a.zarr")
    array = zarr.create_array(root, shape=shape, chunks=chunks, dtype="<i4", fill_value=-1)
    array[:] = np.random.default_rng(5).integers(0, 1 << 30, shape, dtype="<i4")
    model = np.asarray(array[:]).reshape(-1).view(np.uint8).copy()
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    mount_options = MountOptions()
    mount_options.apply(",".join(["rw", *options]))
    return root, model, assemble(dialect, node, pipeline, mount_options, journal)


def _stored(root: str) -> np.ndarray:
    return np.asarray(zarr.open_array(root, mode="r")[:]).reshape(-1).view(np.uint8)


def _data(n: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


async def _open(mount: Mount) -> int:
    return mount.fs.open((await mount.fs.lookup(1, "array")).ino, os.O_RDWR)


# (offset, length) of refused writes: a chunk whole (never loaded), one begun at its
# first element (not loaded: a mask), part of one read before, part of one loaded to be
# patched, and one into the chunk the accepted write left dirty
REFUSED = [
    (CHUNK_BYTES, CHUNK_BYTES),
    (2 * CHUNK_BYTES, 40),
    (3 * CHUNK_BYTES + 8, 40),
    (4 * CHUNK_BYTES + 8, 40),
    (4, 8),
]


@pytest.mark.parametrize(
    ("error", "told"),
    [(errno.ENOSPC, errno.ENOSPC), (errno.EROFS, errno.EIO), (errno.EIO, errno.EIO)],
    ids=["full", "read-only", "io-error"],
)
def test_a_write_the_journal_refuses_changes_nothing(tmp_path, error, told):
    journal = _journal(tmp_path, error, room=1)
    root, model, mount = _mounted(tmp_path, SHAPE, CHUNKS, journal)
    fs, cache = mount.fs, mount.cache

    async def main() -> bytes:
        fh = await _open(mount)
        accepted = _data(CHUNK_BYTES // 2, 1)
        assert await fs.write(fh, 0, accepted) == len(accepted)
        model[: len(accepted)] = np.frombuffer(accepted, np.uint8)
        await fs.read(fh, 3 * CHUNK_BYTES, 4)  # chunk 3 cached clean
        dirty = cache.dirty_bytes
        for i, (offset, n) in enumerate(REFUSED):
            with pytest.raises(FsError) as refused:
                await fs.write(fh, offset, _data(n, 10 + i))
            assert refused.value.errno == told
            assert cache.dirty_bytes == dirty, (offset, n)
        engine = fs.table[(await fs.lookup(1, "array")).ino].engine
        masks = [c for c in range(SHAPE[0] // CHUNKS[0]) if (c, 0) in engine.source.unloaded]
        assert masks == [0]  # the accepted write's: none of a chunk begun and refused
        assert fs.stats()["writes_refused"] == len(REFUSED)
        assert fs.stats()["writes_refused_bytes"] == sum(n for _o, n in REFUSED)
        got = bytes(await fs.read(fh, 0, model.size))
        await fs.fsync(fh)
        assert fs.stats()["store_sets"] == 1  # the accepted write's chunk, nothing else
        await fs.release(fh)
        return got

    assert trio.run(main) == model.tobytes()
    assert np.array_equal(_stored(root), model)


def test_a_write_refused_after_its_first_piece_is_short(tmp_path):
    """300 chunks of one element: two pieces; the journal takes the first only."""
    journal = _journal(tmp_path, errno.ENOSPC, room=1)
    root, model, mount = _mounted(tmp_path, (TINY,), (1,), journal)
    data = _data(300 * 4, 2)

    async def main() -> bytes:
        fh = await _open(mount)
        assert await mount.fs.write(fh, 8, data) == 150 * 4
        got = bytes(await mount.fs.read(fh, 0, model.size))
        await mount.fs.fsync(fh)
        await mount.fs.release(fh)
        return got

    got = trio.run(main)
    model[8 : 8 + 150 * 4] = np.frombuffer(data[: 150 * 4], np.uint8)
    assert (journal.entries, journal.written) == (1, 150 * 4)  # what was applied
    assert got == model.tobytes()
    assert np.array_equal(_stored(root), model)
    assert mount.fs.stats()["writes_refused_bytes"] == 150 * 4


def test_a_dirty_limit_that_cannot_be_relieved_mid_write_makes_it_short(tmp_path):
    """The store refuses every write-back; the dirty limit is passed after the first
    piece: the second is refused with the store's errno, the first kept dirty."""
    root, model, mount = _mounted(tmp_path, (TINY,), (1,), None, "fault=write_error")
    stored = model.copy()
    data = _data(300 * 4, 3)

    async def main() -> bytes:
        fh = await _open(mount)
        mount.fs.table[(await mount.fs.lookup(1, "array")).ino].engine.dirty_limit = 100
        assert await mount.fs.write(fh, 0, data) == 150 * 4
        with pytest.raises(FsError) as refused:  # nothing of this one accepted
            await mount.fs.write(fh, 2000, b"\x01\x02\x03\x04")
        assert refused.value.errno == errno.EIO
        return bytes(await mount.fs.read(fh, 0, model.size))

    got = trio.run(main)
    model[: 150 * 4] = np.frombuffer(data[: 150 * 4], np.uint8)
    assert got == model.tobytes()
    assert mount.cache.dirty_bytes == 150 * 4
    assert np.array_equal(_stored(root), stored)
    assert mount.fs.stats()["writes_refused"] == 2


def test_a_chunk_written_while_a_write_held_its_copy_keeps_both_writes(tmp_path):
    """Chunks of half a row: write 1 patches row 0's end, in chunk (0, 1), then row 1's
    start, in chunk (0, 0), loading each; while (0, 0) loads, write 2 patches (0, 1)
    further on. Write 1 applies onto write 2's copy, not onto the one it made before."""
    root, model, mount = _mounted(tmp_path, SHAPE, (2, 50))
    first, second = _data(20 * 4, 4), _data(4 * 4, 5)
    at_first, at_second = 90 * 4, 160 * 4  # elements (0, 90) and (1, 60)

    async def main() -> bytes:
        fh = await _open(mount)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mount.fs.write, fh, at_first, first)
            await trio.testing.wait_all_tasks_blocked()  # write 1 waits for a load
            nursery.start_soon(mount.fs.write, fh, at_second, second)
        await mount.fs.fsync(fh)
        return bytes(await mount.fs.read(fh, 0, model.size))

    got = trio.run(main)
    model[at_first : at_first + len(first)] = np.frombuffer(first, np.uint8)
    model[at_second : at_second + len(second)] = np.frombuffer(second, np.uint8)
    assert got == model.tobytes()
    assert np.array_equal(_stored(root), model)
