"""Cache pressure: a multi-MiB array written sequentially through a mount whose cache is
1 MiB. Dirty data must go out while the writes go on (not at the end), nothing may be lost,
and the daemon's memory must stay bounded.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import rw_tools
from helpers.rw_tools import assert_store_equals, v3_spec

pytestmark = pytest.mark.mount

MIB = 1 << 20
CACHE = "1M"
RSS_LIMIT_KIB = 300 * 1024

ARRAYS = {
    # 16 MiB, 60 KB chunks with edges: one 1 MiB write dirties ~30 chunks
    "v3": v3_spec((2048, 4096), (100, 300), "<u2"),
    # 12 MiB, sharded: each write-back under pressure rewrites a whole shard
    "sharded": v3_spec((1500, 2000), (50, 64), "<i4", fill_value=-1, shards=(200, 256)),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_sequential_write_with_tiny_cache(tmp_path, name):
    store = rw_tools.make_store(tmp_path, name, ARRAYS[name], initial="none")
    arr = store.open()
    rng = np.random.default_rng(41)
    # Mostly compressible data with some noise: realistic and quick to encode.
    values = (np.arange(arr.size, dtype=np.int64) % 1000).astype(arr.dtype).reshape(arr.shape)
    values += rw_tools.random_values(arr.dtype, arr.shape, rng) % 7
    raw = str(tmp_path / "raw.bin")
    values.tofile(raw)
    expected = np.fromfile(raw, np.uint8)
    size = expected.size
    assert size > 8 * MIB

    with rw_tools.rw_mount(
        store, [f"cache_size={CACHE}", "writeback_delay=600"], tag="rwpress"
    ) as m:
        path = m.p(name)
        with rw_tools.RssSampler(m.proc.pid) as rss:
            # 1. Python writes (1 MiB each) of the first half, watching the daemon's stats:
            #    with no idle write-back (600 s), only pressure can store anything yet.
            fd = os.open(path, os.O_WRONLY)
            peak_dirty = 0
            try:
                for off in range(0, size // 2, MIB):
                    n = min(MIB, size // 2 - off)
                    rw_tools.pwrite_all(fd, expected[off : off + n].tobytes(), off)
                    peak_dirty = max(peak_dirty, m.stats()["cache_dirty_bytes"])
                mid = m.stats()
            finally:
                os.close(fd)
            assert mid["store_sets"] > 0, f"nothing stored before close: {mid}"
            # dirty data stays around the cache size (a single write request may dirty a
            # few MiB-wide rows of chunks before the next one waits), never near the file
            assert peak_dirty <= 4 * MIB, f"peak dirty {peak_dirty} bytes of {size // 2}"
            assert_store_equals(
                store,
                np.concatenate(
                    [
                        expected[: size // 2],
                        np.zeros(size - size // 2, np.uint8)
                        if arr.fill_value == 0
                        else store.read_bytes()[size // 2 :],
                    ]
                ),
                "first half written, file closed",
            )
            # 2. dd of the whole file
            rw_tools.dd_over(raw, path, timeout=180)
            after = m.stats()
        m.assert_alive()
        assert after["cache_dirty_bytes"] == 0, after
        assert after["cache_used_bytes"] <= after["cache_capacity_bytes"], after
        assert_store_equals(store, expected, "after dd, still mounted")
    print(f"peak dirty {peak_dirty}, peak rss {rss.peak_kib} KiB, stats {after}")
    assert rss.samples > 10
    assert rss.peak_kib < RSS_LIMIT_KIB, f"daemon VmRSS peaked at {rss.peak_kib} KiB"
    assert_store_equals(store, expected, "after unmount")
