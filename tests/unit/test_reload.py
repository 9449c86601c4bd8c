"""Reloading the hierarchy without FUSE (``Filesystem.reload``): unchanged nodes keep their
inodes (an array of strings is not measured again), changed and new ones are made anew,
removed ones leave the listing, and a new real node takes a sidecar's name."""

from __future__ import annotations

import os

import numpy as np
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs.table import ROOT_INODE


def _open(root: str):
    return hierarchy.open_hierarchy(LocalStore(root))


def test_reload_keeps_what_did_not_change(tmp_path):
    root = str(tmp_path / "r.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    group.create_array("same", shape=(4, 4), dtype="<f4")[...] = 1
    group.create_array("changes", shape=(4, 4), dtype="<f4")[...] = 2
    group.create_array("goes", shape=(2,), dtype="u1")
    group.create_array("names", shape=(3,), dtype=str)[:] = ["a", "b", "c"]
    dialect, node, pipeline = _open(root)
    fs = assemble(dialect, node, pipeline, MountOptions(sidecars=["envi", "text"])).fs

    async def main() -> None:
        before = dict(await fs.table[ROOT_INODE].children())
        measured = fs.table[before["names.txt"]].text.starts
        group["changes"].attrs["units"] = "m"
        del group["goes"]
        group.create_array("same.hdr", shape=(1,), dtype="u1")  # takes the sidecar's name
        group.create_array("new", shape=(2,), dtype="u1")
        done = await fs.reload(*_open(root)[:2])
        after = await fs.table[ROOT_INODE].children()
        assert after["same"] == before["same"] and after["names.txt"] == before["names.txt"]
        assert fs.table[after["names.txt"]].text.starts is measured  # not measured again
        assert after["changes"] != before["changes"]
        assert after["same.hdr"] != before["same.hdr"]  # the real array now
        assert fs.table[after["same.hdr"]].size() == 1
        assert "goes" not in after and "new" in after
        assert sorted(done.added) == ["new"] and sorted(done.removed) == ["goes"]
        assert {"changes", "same.hdr"} <= set(done.replaced)
        assert {name for _, name in done.stale} >= {"new", "goes", "changes", "same.hdr"}

    trio.run(main)
    assert np.array_equal(zarr.open_array(root, path="same", mode="r")[...], np.ones((4, 4)))


def test_nodes_a_reload_removed_go_with_their_last_reference(tmp_path):
    """Inodes a reload retires are dropped at once when nothing holds them, else when the
    kernel forgets its lookups and the last handle closes; numbers are never reused."""
    root = str(tmp_path / "r.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    group.create_array("keep", shape=(2,), dtype="u1")
    sub = group.create_group("sub")
    sub.create_array("inner", shape=(2,), dtype="u1")
    options = MountOptions(sidecars=["envi", "netcdf"], dataset_name="r")
    fs = assemble(*_open(root), options).fs

    async def main() -> None:
        await fs.table[ROOT_INODE].children()
        start = len(fs.table)
        for round in range(3):  # an array comes and goes: nothing looked it up
            group.create_array("brief", shape=(4, 4), dtype="<f4")
            await fs.reload(*_open(root)[:2])
            del group["brief"]
            await fs.reload(*_open(root)[:2])
            assert len(fs.table) == start, round
        group.create_array("held", shape=(4, 4), dtype="<f4")
        await fs.reload(*_open(root)[:2])
        held = (await fs.lookup(ROOT_INODE, "held")).ino
        listed = (await fs.lookup(ROOT_INODE, "sub")).ino
        inner = (await fs.lookup(listed, "inner")).ino
        fh = fs.open(held, os.O_RDONLY)
        numbers = set(range(1, max(fs.table._nodes) + 1))
        del group["held"]
        del group["sub"]
        await fs.reload(*_open(root)[:2])
        assert fs.table[held].size() == 64 and fs.table[inner].size() == 2  # still held
        fs.forget([(held, 1), (listed, 1), (inner, 1)])
        assert fs.table[held].size() == 64  # open
        await fs.release(fh)
        assert len(fs.table) == start - 1  # sub, with sub/inner and sub/sub.nc, went
        group.create_array("later", shape=(2,), dtype="u1")
        await fs.reload(*_open(root)[:2])
        assert (await fs.table[ROOT_INODE].children())["later"] > max(numbers)

    trio.run(main)


def test_an_array_a_reload_replaced_is_read_anew(tmp_path):
    """Chunks cached of an array a reload found removed or replaced (other metadata) are
    not served for its successor at the same path, even when cached chunks are trusted for
    good (an array whose metadata did not change keeps its chunks until the period)."""
    root = str(tmp_path / "r.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    group.create_array("a", shape=(8,), chunks=(4,), dtype="<i4")[...] = np.arange(8)
    options = MountOptions(sidecars=[], metadata_ttl=None, negative_ttl=None)
    fs = assemble(*_open(root), options).fs

    async def read(name: str, parent: int = ROOT_INODE) -> np.ndarray:
        ino = (await fs.lookup(parent, name)).ino
        fh = fs.open(ino, os.O_RDONLY)
        try:
            return np.frombuffer(bytes(await fs.read(fh, 0, 32)), "<i4").copy()
        finally:
            await fs.release(fh)

    async def main() -> None:
        assert (await read("a")).tolist() == list(range(8))
        del group["a"]
        again = group.create_array("a", shape=(8,), chunks=(2,), dtype="<i4")
        again[...] = 100 + np.arange(8)
        done = await fs.reload(*_open(root)[:2])
        assert done.replaced == ["a"]
        assert (await read("a")).tolist() == (100 + np.arange(8)).tolist()
        del group["a"]
        await fs.reload(*_open(root)[:2])
        group.create_array("a", shape=(8,), chunks=(2,), dtype="<i4")[...] = 200
        await fs.reload(*_open(root)[:2])  # gone, then back: read anew too
        assert (await read("a")).tolist() == [200] * 8
        group.create_group("g").create_array("b", shape=(8,), chunks=(4,), dtype="<i4")[...] = 1
        await fs.reload(*_open(root)[:2])
        g = (await fs.lookup(ROOT_INODE, "g")).ino
        assert (await read("b", g)).tolist() == [1] * 8
        del group["g"]
        await fs.reload(*_open(root)[:2])
        group.create_group("g").create_array("b", shape=(8,), chunks=(2,), dtype="<i4")[...] = 3
        await fs.reload(*_open(root)[:2])  # a group gone and back: its arrays read anew
        g = (await fs.lookup(ROOT_INODE, "g")).ino
        assert (await read("b", g)).tolist() == [3] * 8

    trio.run(main)
