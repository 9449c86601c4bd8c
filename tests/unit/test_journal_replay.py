"""A journal's replay reads one entry at a time: a segment of tens of MiB costs the memory
of its largest entry (and of the cache the entries are applied into), not its size.

The writes go through a mount's engine into its journal, as the daemon's do; the mount is
then dropped with nothing stored (a killed daemon), and a second mount replays the
journal. zarr-python reads the store for the expected values, against a NumPy model.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import trio
import zarr

from zarrmount import hierarchy, recovery
from zarrmount.assemble import Mount, assemble
from zarrmount.journal import Journal
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs.fs import ROOT_ARRAY_NAME

MIB = 1 << 20
ENTRY = MIB  # bytes of each write
WRITES = 40  # a segment of 40 MiB of entries


def _mount(root: str, journal: Journal, cache: str) -> Mount:
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions()
    options.apply(f"rw,cache_size={cache},writeback_delay=600")
    return assemble(dialect, node, pipeline, options, journal)


def _killed_after_writes(root: str, journal_root: Path, model: np.ndarray) -> None:
    """WRITES random writes of ENTRY bytes through a mount whose daemon then dies: in its
    journal, none of them stored. The model follows."""
    journal = Journal.open(journal_root, LocalStore(root).identity)
    fs = _mount(root, journal, "512M").fs
    rng = np.random.default_rng(32)

    async def write() -> None:
        fh = fs.open((await fs.lookup(1, ROOT_ARRAY_NAME)).ino, os.O_RDWR)
        for _ in range(WRITES):
            off = int(rng.integers(0, model.size - ENTRY))  # across chunks, unaligned
            data = rng.integers(0, 256, ENTRY, dtype=np.uint8)
            assert await fs.write(fh, off, data.tobytes()) == ENTRY
            model[off : off + ENTRY] = data

    trio.run(write)
    journal.close(stored=False)


def _replay_peak(root: str, journal: Journal) -> int:
    """The peak of memory traced while a fresh mount (a 4 MiB cache) replays ``journal``."""
    mount = _mount(root, journal, "4M")
    tracemalloc.start()
    try:
        trio.run(recovery.replay, journal, mount.fs, mount.arrays)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_replay_holds_one_entry_at_a_time_not_its_segment(tmp_path):
    root = str(tmp_path / "r.zarr")
    zarr.create_array(root, shape=(48 * MIB,), chunks=(MIB // 2,), dtype="u1", fill_value=3)
    before = np.asarray(zarr.open_array(root, mode="r")[:])
    model = before.copy()
    _killed_after_writes(root, tmp_path / "journal", model)
    assert np.array_equal(zarr.open_array(root, mode="r")[:], before)  # nothing stored
    journal = Journal.open(tmp_path / "journal", LocalStore(root).identity)
    (segment,) = journal.pending
    size = segment.stat().st_size
    assert size > WRITES * ENTRY
    peak = _replay_peak(root, journal)
    stored = np.asarray(zarr.open_array(root, mode="r")[:])
    assert np.array_equal(stored, model)
    assert not journal.pending and not list(journal.directory.glob("*.zj"))
    journal.close(stored=True)
    # a few entries and the 4 MiB cache they are applied into; read whole, the segment
    # was all there too (42.7 MiB traced)
    assert peak < 4 * ENTRY + 4 * MIB, f"{peak / MIB:.1f} MiB traced, of {size / MIB:.0f}"
