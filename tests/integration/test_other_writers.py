"""A read-only mount follows what another writer (zarr-python) does to the store: changed,
added and deleted chunks, new, removed and extended arrays, within the TTLs, and never a
chunk that mixes two versions.

The TTLs are one second. What is asserted is what must hold once a TTL has passed since a
change (any read begun later sees it), never what a read sees before that.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time

import numpy as np
import pytest
import zarr
from helpers.mounting import mounted

pytestmark = pytest.mark.mount

TTL = 1.0
OPTIONS = [f"metadata_ttl={TTL:g}", f"negative_ttl={TTL:g}"]
ROWS, COLS = 8, 4096  # chunks of one row: 16 KiB, four pages each


def _passed() -> None:
    """Let a TTL run out after the change just made (a little more: the clocks' steps)."""
    time.sleep(TTL + 0.2)


def _array(root, name: str = "a", fmt: int = 2, **kw) -> zarr.Array:
    return zarr.create_array(
        str(root),
        name=name,
        shape=(ROWS, COLS),
        chunks=(1, COLS),
        dtype="u4",
        fill_value=0,
        zarr_format=fmt,
        compressors=None if fmt == 2 else "auto",
        **kw,
    )


def _read(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), "<u4").reshape(-1, COLS)


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "moving.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    a = _array(root)
    a[:4] = np.arange(4, dtype="u4")[:, None]  # rows 4.. absent: fill
    return root


def test_changed_added_and_deleted_chunks_are_served_after_the_ttl(store):
    writer = zarr.open_array(str(store / "a"), mode="r+")
    with mounted(store, OPTIONS) as m, open(m.p("a"), "rb") as kept:
        before = _read(m.p("a"))
        assert (before[:4, 0] == np.arange(4)).all() and (before[4:] == 0).all()
        writer[1] = 100  # changed
        writer[5] = 500  # added where there was none
        os.remove(store / "a" / "2.0")  # deleted: fill value from now on
        _passed()
        after = _read(m.p("a"))
        expected = zarr.open_array(str(store / "a"), mode="r")[:]
        assert (after == expected).all()
        assert after[1, 0] == 100 and after[5, 0] == 500 and after[2, 0] == 0
        # a file opened before the change, read from the kernel's pages, sees it too
        kept.seek(0)
        assert (np.frombuffer(kept.read(), "<u4").reshape(-1, COLS) == expected).all()
        stats = m.stats()
        assert stats["cache_revalidations"] >= 1 and stats["cache_stale"] >= 3, stats
        m.assert_alive()


def test_unchanged_chunks_are_revalidated_by_one_listing_not_fetched_again(store):
    with mounted(store, [*OPTIONS, "direct_io"]) as m:  # every read reaches the daemon
        _read(m.p("a"))
        _passed()
        _read(m.p("a"))  # chunks the first listing overlapped are read again
        gets, lists = m.stats()["store_gets"], m.stats()["store_lists"]
        _passed()
        _read(m.p("a"))
        stats = m.stats()
        assert stats["store_gets"] - gets <= 1, stats  # the root's check at most
        assert stats["store_lists"] > lists, stats
        assert stats["cache_revalidated"] >= 8, stats


@pytest.mark.parametrize("fmt", [2, 3])
def test_an_extended_array_shows_its_new_size_and_bytes(tmp_path, fmt):
    root = tmp_path / "grows.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=fmt)
    a = _array(root, fmt=fmt)
    a[:] = 7
    with mounted(root, OPTIONS) as m:
        assert os.stat(m.p("a")).st_size == ROWS * COLS * 4
        assert (_read(m.p("a")) == 7).all()
        a.resize((2 * ROWS, COLS))  # what xarray's append_dim does
        a[ROWS:] = 9
        _passed()
        assert os.stat(m.p("a")).st_size == 2 * ROWS * COLS * 4
        expected = zarr.open_array(str(root / "a"), mode="r")[:]
        assert (_read(m.p("a")) == expected).all()


@pytest.mark.parametrize("consolidated", [False, True])
def test_arrays_added_and_removed_appear_and_go(store, consolidated):
    """Consolidated metadata is read again once its document changed, not before."""
    if consolidated:
        zarr.consolidate_metadata(str(store))
    with mounted(store, OPTIONS) as m:
        assert sorted(os.listdir(m.path)) == ["a"]
        with pytest.raises(FileNotFoundError):
            os.stat(m.p("b"))  # absent: remembered for negative_ttl only
        _passed()
        assert sorted(os.listdir(m.path)) == ["a"]  # the hierarchy is opened again once
        gets = m.stats()["store_gets"]
        _passed()
        assert sorted(os.listdir(m.path)) == ["a"]  # unchanged: its root is not read again
        assert m.stats()["store_gets"] == gets or not consolidated
        b = _array(store, "b")
        b[:] = 3
        if consolidated:
            zarr.consolidate_metadata(str(store))
        _passed()
        assert sorted(os.listdir(m.path)) == ["a", "b"]
        assert (_read(m.p("b")) == 3).all()
        shutil.rmtree(store / "a")
        if consolidated:
            zarr.consolidate_metadata(str(store))
        _passed()
        assert sorted(os.listdir(m.path)) == ["b"]
        with pytest.raises(FileNotFoundError):
            os.stat(m.p("a"))
        m.assert_alive()


def test_a_store_gone_lists_as_an_error_and_comes_back(store, tmp_path):
    away = tmp_path / "away"
    with mounted(store, OPTIONS) as m:
        assert os.listdir(m.path) == ["a"]
        os.rename(store, away)
        _passed()
        with pytest.raises(OSError) as e:
            os.listdir(m.path)
        assert e.value.errno == errno.EIO
        assert m.wait_for_log("cannot read the hierarchy's root again"), m.read_log()[-2000:]
        os.rename(away, store)
        assert os.listdir(m.path) == ["a"]  # a failed listing is not kept
        assert (_read(m.p("a"))[:4, 0] == np.arange(4)).all()
        m.assert_alive()


def test_immutable_trusts_what_it_read(store):
    writer = zarr.open_array(str(store / "a"), mode="r+")
    with mounted(store, ["immutable"]) as m:
        before = _read(m.p("a"))
        writer[1] = 100
        _passed()
        assert (_read(m.p("a")) == before).all()
        assert m.stats()["cache_revalidations"] == 0


@pytest.mark.parametrize("fmt,shards", [(2, None), (3, (4, COLS))])
def test_no_read_mixes_two_versions_of_a_chunk(tmp_path, fmt, shards):
    """Another writer rewrites every chunk with one constant, a new one each round, while
    a reader reads the whole file again and again: each chunk read is one constant."""
    root = tmp_path / "rounds.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=fmt)
    a = _array(root, fmt=fmt, **({"shards": shards} if shards else {}))
    a[:] = 0
    stop = threading.Event()
    rounds = [0]

    def write() -> None:
        writer = zarr.open_array(str(root / "a"), mode="r+")
        while not stop.is_set():
            rounds[0] += 1
            for row in range(ROWS):
                writer[row] = rounds[0] * 100 + row

    with mounted(root, ["metadata_ttl=0.2", "negative_ttl=0.2"]) as m:
        thread = threading.Thread(target=write)
        thread.start()
        reads = 0
        try:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline or reads < 20:
                got = _read(m.p("a"))
                for row in got:
                    assert (row == row[0]).all(), (reads, row[0], np.unique(row))
                reads += 1
        finally:
            stop.set()
            thread.join()
        assert rounds[0] > 2
        assert m.stats()["cache_stale"] > 0
        m.assert_alive()
