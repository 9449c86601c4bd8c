"""Read-modify-write: a chunk partly written is read and patched; a chunk fully covered by
a write is not fetched from the store. Measured with the daemon's ``store_gets`` counter
on arrays whose chunks are whole rows (so a chunk is one contiguous byte range of the file
and one O_DIRECT request can cover it exactly).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import rw_tools
from helpers.rw_tools import assert_store_equals, v3_spec

pytestmark = pytest.mark.mount

ROWS = {
    # 16 KiB chunks of whole rows, 4-byte elements
    "rows": v3_spec((64, 1024), (4, 1024), "<u4"),
    # sharded: 64 KiB shards of 8 inner chunks of 8 KiB, all whole rows
    "shrows": v3_spec((256, 512), (8, 512), "<u2", shards=(64, 512)),
}
CHUNK = {"rows": 16384, "shrows": 8192}  # bytes of one (inner) chunk


def _setup(tmp_path, name):
    store = rw_tools.make_store(
        tmp_path, name, ROWS[name], rng=np.random.default_rng(61), initial="full"
    )
    return store, store.read_bytes()


def _direct_write(store, name, data, off, size):
    """One O_DIRECT pwrite of ``data`` at ``off``: the daemon's stats before and after it,
    and the whole file read back through the mount."""
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwrmw") as m:
        fd = os.open(m.p(name), os.O_RDWR | os.O_DIRECT)
        try:
            before = m.stats()
            assert os.pwrite(fd, data.tobytes(), off) == data.size
            after = m.stats()
            return before, after, rw_tools.pread_all(fd, size, 0)
        finally:
            os.close(fd)


def test_dd_of_whole_file_fetches_nothing(tmp_path):
    store, model = _setup(tmp_path, "rows")
    raw = tmp_path / "raw.bin"
    new = np.random.default_rng(62).integers(0, 256, model.size, dtype=np.uint8)
    new.tofile(raw)
    with rw_tools.rw_mount(store, tag="rwrmw") as m:
        before = m.stats()
        rw_tools.dd_over(raw, m.p("rows"), timeout=60)
        after = m.stats()
    assert after["store_gets"] == before["store_gets"], (before, after)
    assert after["store_sets"] - before["store_sets"] == model.size // CHUNK["rows"]
    assert_store_equals(store, new)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_aligned_write_covering_chunks_fetches_only_partial_ones(tmp_path, name):
    """One O_DIRECT request: the tail of chunk 1, chunks 2..4 whole, the head of chunk 5.
    Only chunks 1 and 5 may be fetched (inner chunks for the sharded array)."""
    store, model = _setup(tmp_path, name)
    ch = CHUNK[name]
    off, end = ch + ch // 2, 5 * ch + ch // 4
    data = np.random.default_rng(63).integers(0, 256, end - off, dtype=np.uint8)
    model[off:end] = data
    before, after, got = _direct_write(store, name, data, off, model.size)
    fetched = after["store_gets"] - before["store_gets"]
    limit = 2 if name == "rows" else 2 + 1  # + the shard index, read once for both
    assert fetched <= limit, f"{fetched} store reads for 2 partial chunks ({before}, {after})"
    rw_tools.assert_bytes_match(got, model, 0, "read back through the mount")
    assert_store_equals(store, model)


def test_unaligned_write_fetches_only_chunks_it_covers_partly(tmp_path):
    """One O_DIRECT request from byte 1 (the middle of element 0) to the end of chunk 4:
    chunk 0 holds a partly written element and must be read; chunks 1..3 are covered whole
    and must not be fetched ("fully covered chunks are not fetched", at any offset)."""
    name = "rows"
    store, model = _setup(tmp_path, name)
    ch = CHUNK[name]
    off, end = 1, 4 * ch
    data = np.random.default_rng(64).integers(0, 256, end - off, dtype=np.uint8)
    model[off:end] = data
    before, after, _ = _direct_write(store, name, data, off, model.size)
    assert_store_equals(store, model)  # correctness first
    fetched = after["store_gets"] - before["store_gets"]
    assert fetched <= 1, (
        f"{fetched} chunks fetched for a write that covers only chunk 0 partly "
        f"(chunks 1-3 are overwritten whole); stats before {before}, after {after}"
    )
