"""The disk cache of fetched objects: served only intact and for the same validator, never
a damaged, cut or foreign entry, bounded in size, and never a reason for a read to fail."""

from __future__ import annotations

import errno
import logging
import os
import time

import pytest

from zarrmount.store import diskcache
from zarrmount.store.diskcache import DiskCache, Part

PAYLOAD = bytes(range(256)) * 64  # 16 KiB


def _entries(cache: DiskCache) -> list[str]:
    return [
        os.path.join(d, n)
        for d, _, names in os.walk(cache.root)
        for n in names
        if not n.startswith(diskcache.TMP_PREFIX)
    ]


@pytest.fixture
def cache(tmp_path) -> DiskCache:
    return DiskCache(str(tmp_path / "dc"), "s3://bucket/data.zarr", 1 << 20, immutable=False)


def test_an_entry_is_served_for_its_validator_only(cache):
    part = Part("a/c/0/0")
    cache.put(part, '"etag-1":16384', PAYLOAD)
    assert bytes(cache.get(part, '"etag-1":16384')) == PAYLOAD
    assert cache.get(Part("a/c/0/1"), '"etag-1":16384') is None  # another key
    assert cache.get(Part("a/c/0/0", 0, 10), '"etag-1":16384') is None  # another range
    assert cache.get(part, None) is None  # unknown version: never served (not immutable)
    assert cache.get(part, '"etag-2":16384') is None  # the object changed
    assert _entries(cache) == []  # and the stale entry is gone
    assert cache.stats.hits == 1 and cache.stats.misses >= 3


def test_immutable_sources_are_served_without_a_validator(tmp_path):
    cache = DiskCache(str(tmp_path), "snapshot", 1 << 20, immutable=True)
    cache.put(Part("k", -16, 16), None, PAYLOAD[-16:])
    assert bytes(cache.get(Part("k", -16, 16), None)) == PAYLOAD[-16:]


def test_entries_survive_a_new_instance_and_are_shared(tmp_path, cache):
    cache.put(Part("x"), "v", PAYLOAD)
    again = DiskCache(str(tmp_path / "dc"), "s3://bucket/data.zarr", 1 << 20, immutable=False)
    assert bytes(again.get(Part("x"), "v")) == PAYLOAD
    assert again.used == cache.used
    other_store = DiskCache(str(tmp_path / "dc"), "s3://bucket/other.zarr", 1 << 20, False)
    assert other_store.get(Part("x"), "v") is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_a_damaged_entry_is_dropped_never_served(cache, damage, caplog):
    cache.put(Part("x"), "v", PAYLOAD)
    (path,) = _entries(cache)
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0x01
    elif damage == "truncate":
        raw = raw[: len(raw) - 100]
    elif damage == "empty":
        raw = bytearray()
    else:
        raw = bytearray(b"\x00" * len(raw))
    with open(path, "wb") as f:
        f.write(raw)
    with caplog.at_level(logging.WARNING):
        assert cache.get(Part("x"), "v") is None
    assert not os.path.exists(path)
    assert cache.stats.dropped == 1
    assert "damaged" in caplog.text and "x" in caplog.text


def test_an_entry_holding_another_part_is_not_served(cache):
    """Two names alike (a hash collision, a renamed file) would not serve the wrong part."""
    cache.put(Part("x"), "v", PAYLOAD)
    (path,) = _entries(cache)
    os.makedirs(os.path.dirname(cache._path(Part("y"))), exist_ok=True)
    os.rename(path, cache._path(Part("y")))
    assert cache.get(Part("y"), "v") is None


def test_a_write_cut_by_a_kill_leaves_nothing_served(cache):
    """A temporary file is all a killed writer leaves: never read, removed once old."""
    path = cache._path(Part("x"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f"{diskcache.TMP_PREFIX}999-1")
    with open(tmp, "wb") as f:
        f.write(PAYLOAD[:100])
    assert cache.get(Part("x"), "v") is None
    old = time.time() - diskcache.TMP_STALE_S - 1
    os.utime(tmp, (old, old))
    DiskCache(str(os.path.dirname(cache.root)), "s3://bucket/data.zarr", 1 << 20, False)
    assert not os.path.exists(tmp)


def test_the_directory_stays_within_its_size(tmp_path):
    size = 200_000
    cache = DiskCache(str(tmp_path), "s", size, immutable=False)
    for i in range(40):  # 40 x 16 KiB: three times the size
        cache.put(Part(f"k{i}"), "v", PAYLOAD)
        on_disk = sum(os.path.getsize(p) for p in _entries(cache))
        assert on_disk <= size, (i, on_disk)
    assert cache.stats.evictions > 0
    assert cache.get(Part("k39"), "v") is not None  # the newest stay


def test_least_recently_used_entries_go_first(tmp_path):
    cache = DiskCache(str(tmp_path), "s", 5 * 16600, immutable=False)
    for i in range(4):
        cache.put(Part(f"k{i}"), "v", PAYLOAD)
        old = time.time() - 100 + i
        os.utime(cache._path(Part(f"k{i}")), (old, old))
    assert cache.get(Part("k0"), "v") is not None  # used: now the most recent
    cache.put(Part("k4"), "v", PAYLOAD)
    cache.put(Part("k5"), "v", PAYLOAD)
    assert cache.get(Part("k0"), "v") is not None
    assert cache.get(Part("k1"), "v") is None


def test_a_full_disk_pauses_caching_with_one_log_line(cache, monkeypatch, caplog):
    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache, "_write", full)
    with caplog.at_level(logging.WARNING):
        for i in range(5):
            cache.put(Part(f"k{i}"), "v", PAYLOAD)
    assert caplog.text.count("disk is full") == 1
    assert cache.stats.stored == 0


def test_an_entry_whose_file_went_meanwhile_is_only_skipped(cache, monkeypatch):
    """Another mount removed the temporary file (a clock that jumped made it look old):
    this entry is not kept, and caching goes on."""

    def gone(*_args):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")

    with monkeypatch.context() as patched:
        patched.setattr(cache, "_write", gone)
        cache.put(Part("x"), "v", PAYLOAD)
    cache.put(Part("y"), "v", PAYLOAD)
    assert cache.get(Part("x"), "v") is None
    assert bytes(cache.get(Part("y"), "v")) == PAYLOAD


def test_a_directory_that_cannot_be_written_turns_caching_off(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        cache = DiskCache(str(blocker / "dc"), "s", 1 << 20, immutable=False)
        cache.put(Part("x"), "v", PAYLOAD)
        assert cache.get(Part("x"), "v") is None
    assert caplog.text.count("disk cache off") == 1


def test_a_directory_deleted_while_in_use_is_made_again(cache):
    import shutil

    cache.put(Part("x"), "v", PAYLOAD)
    shutil.rmtree(cache.root)
    assert cache.get(Part("x"), "v") is None
    cache.put(Part("x"), "v", PAYLOAD)
    assert bytes(cache.get(Part("x"), "v")) == PAYLOAD
