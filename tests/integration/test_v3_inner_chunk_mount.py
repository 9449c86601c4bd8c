"""A 64 MiB shard through a real mount: one 4 KiB pread at the start of an inner chunk
fetches the shard index and (with kernel read-ahead) at most that one 1 MiB inner chunk.
Also the ``read_ahead_kb`` option."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import v3_fixtures as v3
from helpers.mounting import background_mount, mounted
from helpers.oracle import assert_bytes_equal, read_file

pytestmark = pytest.mark.mount

MIB = 1 << 20


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("v3-bigshard-mount") / "big.zarr"
    info = v3.build_big_shard(root)
    info["root"] = root
    info["expected"] = np.ascontiguousarray(info.pop("data")).tobytes()
    return info


def read_ahead_kb(mountpoint: str) -> int:
    dev = os.stat(mountpoint).st_dev
    with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb") as f:
        return int(f.read())


def _one_pread(m, big, k: int) -> tuple[bytes, dict, dict]:
    path = m.p(big["path"])
    assert os.stat(path).st_size == 64 * MIB
    with open(path, "rb") as f:
        before = m.stats()
        got = os.pread(f.fileno(), 4096, k * MIB)
        after = m.stats()
    return got, before, after


@pytest.mark.parametrize("options", [(), ("read_ahead_kb=256",)], ids=["default", "ra256"])
def test_4k_pread_fetches_index_and_at_most_one_inner_chunk(big, options):
    with mounted(big["root"], options, tag="v3big") as m:
        k = 41
        got, before, after = _one_pread(m, big, k)
        assert got == big["expected"][k * MIB : k * MIB + 4096]
        fetched = after["store_get_bytes"] - before["store_get_bytes"]
        gets = after["store_gets"] - before["store_gets"]
        bound = big["index_nbytes"] + big["inner_nbytes"][k]
        assert 0 < fetched <= bound, (fetched, bound, before, after)
        assert fetched < 2 * MIB < big["shard_size"]
        assert gets <= 2, (gets, before, after)
        # another inner chunk of the same shard: the index is not fetched again
        k2 = 7
        with open(m.p(big["path"]), "rb") as f:
            s0 = m.stats()
            assert (
                os.pread(f.fileno(), 4096, k2 * MIB) == big["expected"][k2 * MIB : k2 * MIB + 4096]
            )
            s1 = m.stats()
        assert s1["store_get_bytes"] - s0["store_get_bytes"] <= big["inner_nbytes"][k2]
        m.assert_alive()


@pytest.mark.parametrize(
    "options,want", [((), 1024), (("read_ahead_kb=256",), 256)], ids=["default", "256"]
)
def test_read_ahead_kb_option(big, tmp_path, options, want):
    """Without -f the command returns once the mount is ready, read-ahead included."""
    log = tmp_path / "daemon.log"
    with background_mount(big["root"], (*options, f"log={log}"), tag="v3ra") as bg:
        assert bg.result.returncode == 0, bg.result.stderr
        assert read_ahead_kb(bg.path) == want
        with open(os.path.join(bg.path, big["path"]), "rb") as f:
            assert os.pread(f.fileno(), 16, 3 * MIB) == big["expected"][3 * MIB : 3 * MIB + 16]


def test_whole_big_file_reads(big):
    with mounted(big["root"], tag="v3big-all") as m:
        assert_bytes_equal(read_file(m.p(big["path"])), big["expected"], np.dtype("<f4"))
        stats = m.stats()
        # every inner chunk fetched once (plus the index): no refetching of the shard
        assert stats["store_get_bytes"] <= big["shard_size"] + 64 * 1024, stats
