"""The decoded-chunk cache: a re-read after the page cache is dropped costs no store reads."""

from __future__ import annotations

import json
import os

import pytest
from helpers.oracle import assert_bytes_equal

pytestmark = pytest.mark.mount


def stats(mount) -> dict:
    return json.loads(os.getxattr(mount.path, "user.zarrmount.stats"))


def read_all(fd: int, size: int) -> bytes:
    parts, off = [], 0
    while off < size:
        chunk = os.pread(fd, min(1 << 20, size - off), off)
        if not chunk:
            break
        parts.append(chunk)
        off += len(chunk)
    return b"".join(parts)


def read_twice(mount, case, flags: int, between=lambda fd: None) -> tuple[dict, dict]:
    """Reads the whole of ``case`` twice through one descriptor (``between`` runs between
    the reads), checking the bytes each time; the daemon's stats after the first read and
    after the second, whose difference says where the second read was served from."""
    fd = os.open(mount.p(case.path), flags)
    try:
        assert_bytes_equal(read_all(fd, case.nbytes), case.expected, case.dtype)
        between(fd)
        first = stats(mount)
        assert_bytes_equal(read_all(fd, case.nbytes), case.expected, case.dtype)
        return first, stats(mount)
    finally:
        os.close(fd)


def test_reread_after_dropping_page_cache_hits_chunk_cache(live_main, main_hierarchy):
    before, after = read_twice(
        live_main,
        main_hierarchy.arrays["cache/probe"],
        os.O_RDONLY,
        between=lambda fd: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED),
    )
    assert after["store_gets"] == before["store_gets"], (before, after)
    assert after["cache_hits"] > before["cache_hits"], (
        "the second read did not reach the daemon's chunk cache (page cache not dropped?)",
        before,
        after,
    )


def test_reread_with_o_direct_hits_chunk_cache(live_main, main_hierarchy):
    """Same with O_DIRECT, which never uses the page cache."""
    case = main_hierarchy.arrays["cache/probe"]
    before, after = read_twice(live_main, case, os.O_RDONLY | os.O_DIRECT)
    assert after["store_gets"] == before["store_gets"], (before, after)
    assert after["cache_hits"] > before["cache_hits"], (before, after)


def test_counters_move_on_a_fresh_mount(mount_factory, main_hierarchy):
    """On a fresh mount the first read costs store gets; re-reads then hit the cache."""
    m = mount_factory(main_hierarchy.root, tag="cache")
    case = main_hierarchy.arrays["order/C_ref_3d"]
    start = stats(m)
    first, second = read_twice(m, case, os.O_RDONLY | os.O_DIRECT)
    assert first["store_gets"] > start["store_gets"], (start, first)
    assert second["store_gets"] == first["store_gets"], (first, second)
    assert second["cache_hits"] > first["cache_hits"], (first, second)
