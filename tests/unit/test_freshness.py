"""Revalidation of cached chunks without FUSE: after the period, chunks another writer
changed, added or deleted are read anew, the others are kept (no second read of them), and
the listings kept stay within their share of the cache."""

from __future__ import annotations

import os
import time

import numpy as np
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.array.freshness import LIST_MOST, UNIT_BYTES, Revalidation, Ttl
from zarrmount.array.stored_units import list_units
from zarrmount.assemble import assemble
from zarrmount.cache import ChunkCache
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

TTL = 0.05
ROWS, COLS = 6, 1024


def _mount(root: str, ttl: float | None = TTL):
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions(metadata_ttl=ttl, negative_ttl=ttl, cache_size=64 << 20)
    return assemble(dialect, node, pipeline, options).fs


def test_changed_added_and_deleted_chunks_are_read_anew_the_rest_kept(tmp_path):
    root = str(tmp_path / "a.zarr")
    array = zarr.create_array(root, shape=(ROWS, COLS), chunks=(1, COLS), dtype="<i4")
    array[:3] = 1  # rows 3.. absent
    fs = _mount(root)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        nbytes = ROWS * COLS * 4
        await fs.read(fh, 0, nbytes)
        gets = fs.stats()["store_gets"]
        array[0] = 5  # changed
        array[4] = 6  # added
        os.remove(os.path.join(root, "c", "2", "0"))  # deleted
        time.sleep(TTL * 2)  # the period has run out since the change
        got = np.frombuffer(bytes(await fs.read(fh, 0, nbytes)), "<i4").reshape(ROWS, COLS)
        return got, fs.stats(), gets

    got, stats, gets = trio.run(main)
    assert (got == zarr.open_array(root, mode="r")[:]).all()
    assert stats["store_gets"] - gets == 3  # the changed, added and deleted ones alone
    assert stats["cache_stale"] == 3 and stats["cache_revalidated"] == 3


def test_with_no_ttl_nothing_is_listed_or_read_again(tmp_path):
    root = str(tmp_path / "a.zarr")
    array = zarr.create_array(root, shape=(ROWS, COLS), chunks=(1, COLS), dtype="<i4")
    array[:] = 1
    fs = _mount(root, ttl=None)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        first = bytes(await fs.read(fh, 0, COLS * 4))
        array[0] = 5
        time.sleep(TTL * 2)
        return first, bytes(await fs.read(fh, 0, COLS * 4))

    first, second = trio.run(main)
    assert first == second  # trusted for good: the old bytes
    assert fs.stats()["cache_revalidations"] == 0


def test_list_once_lists_an_array_at_its_first_read_and_never_again():
    """rw mounts with a disk cache: validators from one listing, then trusted for good."""
    revalidation = Revalidation(Ttl(None, None, list_once=True), None, ChunkCache(1 << 20))
    validity = revalidation.of("a")
    assert revalidation.expired(validity)  # no listing yet
    validity.listed_end = time.monotonic()  # as a listing leaves it
    assert not revalidation.expired(validity)
    assert revalidation.fresh_for("a") is None  # nothing to count down
    plain = Revalidation(Ttl(None, None), None, ChunkCache(1 << 20))
    assert not plain.expired(plain.of("a"))  # no disk cache: never listed


def test_kept_listings_stay_within_their_budget(tmp_path):
    """Listings of many arrays: the least recently used are let go (their next listing
    drops their cached chunks), the memory they take stays bounded."""
    root = str(tmp_path / "g.zarr")
    group = zarr.open_group(root, mode="w")
    for i in range(8):
        group.create_array(f"a{i}", shape=(64,), chunks=(1,), dtype="u1")[:] = i + 1
    fs = _mount(root)
    revalidation: Revalidation = fs.table.arrays.shared.revalidation
    revalidation.budget = 3 * 64 * UNIT_BYTES  # three arrays' listings

    async def main():
        for i in range(8):
            fh = fs.open((await fs.lookup(1, f"a{i}")).ino, os.O_RDONLY)
            assert bytes(await fs.read(fh, 0, 64)) == bytes([i + 1]) * 64
            kept = {p: v.nbytes for p, v in revalidation._arrays.items() if v.units}
            assert sum(kept.values()) <= revalidation.budget, kept
            assert f"a{i}" in kept

    trio.run(main)


def test_a_wide_read_uses_the_revalidation_listing_not_a_second_one(tmp_path):
    """A sparse array read across many chunks needs its stored units: the listing its
    revalidation just made gives them."""
    root = str(tmp_path / "sparse.zarr")
    array = zarr.create_array(root, shape=(4096,), chunks=(1,), dtype="u1", fill_value=0)
    array[[5, 700, 4000]] = 9
    one = LocalStore(root)
    _, node, _ = hierarchy.open_hierarchy(one)
    list_units(one, "", node.meta.key_encoding, 1)  # what one listing of its units costs
    fs = _mount(root)

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        return bytes(await fs.read(fh, 0, 4096))

    got = trio.run(main)
    assert got == zarr.open_array(root, mode="r")[:].tobytes()
    assert fs.stats()["store_lists"] == one.list_calls


def test_an_array_of_more_chunks_than_a_listing_page_is_never_listed(tmp_path):
    """Past LIST_MOST units a read waits for no listing: cached chunks are trusted for a
    period from their load, then fetched again when read; no request but the gets."""
    root = str(tmp_path / "a.zarr")
    side = 40  # 1,600 chunks of one element
    array = zarr.create_array(root, shape=(side, side), chunks=(1, 1), dtype="<i4")
    array[:] = np.arange(side * side, dtype="<i4").reshape(side, side)
    assert side * side > LIST_MOST
    fs = _mount(root)

    async def element(fh, i: int, j: int) -> int:
        return int(np.frombuffer(bytes(await fs.read(fh, (i * side + j) * 4, 4)), "<i4")[0])

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        seen = [await element(fh, 0, 0)]
        array[0, 0] = -1
        time.sleep(TTL * 2)  # (0, 0) is older than a period
        seen += [await element(fh, 5, 5), await element(fh, 5, 5), await element(fh, 0, 0)]
        return seen, fs.stats()

    seen, stats = trio.run(main)
    assert seen == [0, 5 * side + 5, 5 * side + 5, -1]
    assert stats["store_lists"] == 0
    assert stats["store_gets"] == 3  # (0, 0) twice, (5, 5) once: kept within its period
