"""The disk cache of a remote store's objects, through real mounts of a moto S3 server: a
remount and a restart fetch no chunk again, damage to the cache files never reaches a
read, a full disk and a small limit are kept to, and a changed object is fetched anew.

The expected bytes are zarr-python's, read through s3fs.
"""

from __future__ import annotations

import itertools
import os
import signal

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted
from helpers.remote_servers import (  # noqa: F401 - fixture
    BUCKET,
    FaultProxy,
    s3_fixture,
    zarr_s3_store,
)

pytestmark = pytest.mark.mount

ROWS, COLS = 16, 65536  # chunks of one row: 256 KiB each, 4 MiB in all
CHUNK = COLS * 4
_prefixes = itertools.count()


def _write(s3, fmt: int = 3, shards: tuple[int, int] | None = None) -> tuple[str, np.ndarray]:
    """A new array in the bucket; its URL and zarr-python's view of it."""
    url = f"s3://{BUCKET}/disk-cache/{os.getpid()}-{next(_prefixes)}.zarr"
    values = np.arange(ROWS * COLS, dtype="<f4").reshape(ROWS, COLS)
    array = zarr.create_array(
        zarr_s3_store(url, s3.url),
        shape=values.shape,
        chunks=(1, COLS),
        shards=shards,
        dtype="<f4",
        zarr_format=fmt,
        compressors=None,
    )
    array[:] = values
    return url, _oracle(url, s3)


def _oracle(url: str, s3) -> np.ndarray:
    return zarr.open_array(zarr_s3_store(url, s3.url, read_only=True), mode="r")[:]


def _read(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), "<f4").reshape(ROWS, COLS)


def _options(s3, directory, *more: str) -> list[str]:
    return [f"so.endpoint_url={s3.url}", f"disk_cache={directory}", *more]


def _entries(directory) -> list[str]:
    return [os.path.join(d, n) for d, _, names in os.walk(directory) for n in names]


@pytest.mark.parametrize("shards", [None, (4, COLS)], ids=["chunks", "shards"])
def test_a_remount_and_a_restart_fetch_no_chunk_again(s3, tmp_path, shards):
    url, expected = _write(s3, shards=shards)
    disk = tmp_path / "disk"
    with mounted(url, _options(s3, disk), tag="dc1") as m:
        assert (_read(m.p("array")) == expected).all()
        first = m.stats()
    assert first["disk_cache_stored"] >= ROWS, first
    with mounted(url, _options(s3, disk), tag="dc2") as m:
        assert (_read(m.p("array")) == expected).all()
        again = m.stats()
        m.proc.send_signal(signal.SIGKILL)  # a daemon killed: the cache outlives it
        m.proc.wait()
    assert again["disk_cache_hits"] >= ROWS, again
    assert again["store_get_bytes"] < CHUNK // 4, again  # metadata and root checks alone
    with mounted(url, _options(s3, disk), tag="dc3") as m:
        assert (_read(m.p("array")) == expected).all()
        restarted = m.stats()
    assert restarted["disk_cache_hits"] >= ROWS and restarted["store_get_bytes"] < CHUNK // 4


def test_damaged_cache_files_never_reach_a_read(s3, tmp_path):
    url, expected = _write(s3)
    disk = tmp_path / "disk"
    # a chunk cache of two chunks: every read of the array goes to the disk cache again
    with mounted(url, _options(s3, disk, "cache_size=512K", "direct_io"), tag="dcbad") as m:
        assert (_read(m.p("array")) == expected).all()
        entries = sorted(_entries(disk))
        assert len(entries) >= ROWS
        for i, path in enumerate(entries):
            if i % 4 == 0:
                with open(path, "r+b") as f:  # one bit flipped in the payload
                    f.seek(os.path.getsize(path) - 100)
                    byte = f.read(1)
                    f.seek(-1, os.SEEK_CUR)
                    f.write(bytes([byte[0] ^ 1]))
            elif i % 4 == 1:
                os.truncate(path, os.path.getsize(path) // 2)
            elif i % 4 == 2:
                os.remove(path)
        for _ in range(2):
            assert (_read(m.p("array")) == expected).all()
        stats = m.stats()
        assert stats["disk_cache_dropped"] >= ROWS // 2, stats
        assert m.wait_for_log("damaged"), m.read_log()[-2000:]
        m.assert_alive()


def test_a_full_disk_stops_caching_while_reads_go_on(s3):
    url, expected = _write(s3)
    with (
        rw_tools.tmpfs("1M", tag="dcfull") as small,
        mounted(url, _options(s3, small, "disk_cache_size=1G"), tag="dcfull") as m,
    ):
        assert (_read(m.p("array")) == expected).all()
        assert m.read_log().count("the disk is full") == 1, m.read_log()[-2000:]
        m.assert_alive()


def test_the_cache_stays_within_its_size_while_streaming_four_times_it(s3, tmp_path):
    url, expected = _write(s3)
    disk = tmp_path / "disk"
    limit = 1 << 20  # a quarter of the array
    options = _options(s3, disk, f"disk_cache_size={limit}", "cache_size=512K")
    with mounted(url, options, tag="dcsize") as m:
        for _ in range(2):
            assert (_read(m.p("array")) == expected).all()
            assert sum(os.path.getsize(p) for p in _entries(disk)) <= limit
        assert m.stats()["disk_cache_evictions"] > 0


def test_an_object_changed_by_another_writer_is_fetched_anew(s3, tmp_path):
    url, _ = _write(s3)
    disk = tmp_path / "disk"
    with mounted(url, _options(s3, disk), tag="dcchg1") as m:
        _read(m.p("array"))
    writer = zarr.open_array(zarr_s3_store(url, s3.url), mode="r+")
    writer[3] = -1.0
    expected = _oracle(url, s3)
    assert (expected[3] == -1).all()
    with mounted(url, _options(s3, disk), tag="dcchg2") as m:
        assert (_read(m.p("array")) == expected).all()
        stats = m.stats()
    assert stats["disk_cache_hits"] >= ROWS - 1, stats
    assert CHUNK <= stats["store_get_bytes"] < 2 * CHUNK, stats  # the changed chunk alone


def test_a_daemon_killed_while_it_fills_the_cache_leaves_nothing_wrong(s3, tmp_path):
    """SIGKILL while read-ahead loads are storing entries: whatever was cut is never
    served; the next mount reads every byte right."""
    url, expected = _write(s3)
    disk = tmp_path / "disk"
    with mounted(url, _options(s3, disk), tag="dckill") as m:
        with open(m.p("array"), "rb") as f:
            assert f.read(CHUNK * ROWS // 2) == expected.tobytes()[: CHUNK * ROWS // 2]
        m.proc.send_signal(signal.SIGKILL)  # read-ahead is still storing the rest
        m.proc.wait()
    with mounted(url, _options(s3, disk), tag="dckill2") as m:
        assert (_read(m.p("array")) == expected).all()
        m.assert_alive()


@pytest.mark.parametrize("shards", [None, (4, COLS)], ids=["chunks", "shards"])
def test_an_rw_mount_writes_through_and_rereads_from_disk(s3, tmp_path, shards):
    """What an rw mount stores goes to the disk cache too: with a memory cache of one
    chunk, rereading all it wrote fetches no chunk; zarr-python reads the same values
    from the store; a remount (the store's validators now) reads them right."""
    url, expected = _write(s3, shards=shards)
    disk = tmp_path / "disk"
    options = _options(s3, disk, "rw", f"cache_size={CHUNK}")
    new = expected[::-1] + 0.5  # every row changed
    with mounted(url, options, tag="dcrw") as m:
        with open(m.p("array"), "r+b") as f:
            f.write(new.tobytes())
            f.flush()
            os.fsync(f.fileno())
        written = m.stats()
        assert written["disk_cache_stored"] >= ROWS, written
        fd = os.open(m.p("array"), os.O_RDONLY | os.O_DIRECT)
        try:
            buf = bytearray(CHUNK)  # page-aligned enough for O_DIRECT on FUSE
            for row in range(ROWS):
                assert os.preadv(fd, [buf], row * CHUNK) == CHUNK
                assert (np.frombuffer(buf, "<f4") == new[row]).all(), row
        finally:
            os.close(fd)
        reread = m.stats()
    assert reread["store_get_bytes"] - written["store_get_bytes"] < CHUNK // 4, reread
    assert reread["disk_cache_hits"] - written["disk_cache_hits"] >= ROWS - 1, reread
    assert (_oracle(url, s3) == new).all()
    with mounted(url, _options(s3, disk), tag="dcrw2") as m:
        assert (_read(m.p("array")) == new).all()


def test_an_immutable_remount_reads_its_metadata_from_disk(s3, tmp_path):
    """With ``immutable`` the metadata documents are kept too: a remount makes no request
    for them, nor for a chunk (a group of two arrays, no consolidated metadata)."""
    url = f"s3://{BUCKET}/disk-cache/{os.getpid()}-{next(_prefixes)}-docs.zarr"
    group = zarr.open_group(zarr_s3_store(url, s3.url), mode="w", zarr_format=3)
    values = np.arange(ROWS * 1024, dtype="<i4").reshape(ROWS, 1024)
    for name in ("a", "b"):
        group.create_array(name, shape=values.shape, chunks=(4, 1024), dtype="<i4")[:] = values
    oracle = zarr.open_group(zarr_s3_store(url, s3.url, read_only=True), mode="r")
    disk = tmp_path / "disk"
    with FaultProxy(s3.url) as proxy:
        options = [f"so.endpoint_url={proxy.url}", f"disk_cache={disk}", "immutable"]
        for round_ in range(2):
            proxy.clear()
            with mounted(url, options, tag=f"dcdocs{round_}") as m:
                assert sorted(os.listdir(m.p(""))) == ["a", "b"]
                for name in ("a", "b"):
                    with open(m.p(name), "rb") as f:
                        assert f.read() == oracle[name][:].astype("<i4").tobytes(), name
            gets = [r.path for r in proxy.requests if r.method == "GET"]
            if round_ == 0:
                assert any(p.endswith("zarr.json") for p in gets), gets
    assert not [p for p in gets if p.endswith("zarr.json") or "/c/" in p], gets
