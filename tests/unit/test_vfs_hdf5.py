"""A group's ``NAME.h5`` through the FUSE-shaped API (no mount): what its making lists, what
its reads cost, and the file's bytes, written out, read back by h5py equal to zarr-python."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numcodecs
import numpy as np
import pytest
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.regions import OPEN_ARRAYS

ROOT = 1
WIDE = 20  # arrays in the wide group: more than a handle keeps open


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """Arrays of both byte orders two groups deep, and a group of WIDE arrays."""
    root = str(tmp_path_factory.mktemp("vfs-h5") / "data.zarr")
    top = zarr.open_group(root, mode="w", zarr_format=2)
    rng = np.random.default_rng(3)
    a = top.create_array("a", shape=(300, 70), chunks=(64, 32), dtype=">i4", fill_value=-1)
    a[:200] = rng.integers(-5000, 5000, (200, 70))
    deep = top.create_group("sub").create_group("deep")
    b = deep.create_array(
        "b", shape=(50_000,), chunks=(4096,), dtype="<f8", compressors=numcodecs.Zstd(level=1)
    )
    b[...] = rng.random(50_000)
    wide = top.create_group("wide")
    for i in range(WIDE):
        wide.create_array(f"w{i:02d}", shape=(1000,), dtype="<u2")[...] = i
    return root


def make_fs(root: str):
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions(sidecars=["hdf5"], dataset_name="data")
    return assemble(dialect, node, pipeline, options).fs


async def lookup(fs, path: str) -> int:
    ino = ROOT
    for part in path.split("/"):
        ino = (await fs.lookup(ino, part)).ino
    return ino


async def read_all(fs, fh: int, size: int, step: int = 128 << 10) -> bytes:
    return b"".join([bytes(await fs.read(fh, at, step)) for at in range(0, size, step)])


def assert_h5_equal_to_zarr(path: Path, root: str, group: str) -> None:
    below = f"{group}/" if group else ""
    with h5py.File(path, "r") as f:
        found = []
        f.visititems(lambda name, o: found.append(name) if isinstance(o, h5py.Dataset) else None)
        assert found
        for name in found:
            expected = zarr.open_array(root, path=below + name, mode="r")
            assert f[name].dtype == expected.dtype, name  # its stored byte order
            np.testing.assert_array_equal(f[name][...], expected[...], err_msg=name)


def test_looking_up_a_name_beside_the_h5_lists_nothing_below(source):
    fs = make_fs(source)

    async def main():
        await lookup(fs, "a")
        sub = fs.table[await lookup(fs, "sub")]
        assert isinstance(sub, Directory) and not sub.listed
        await lookup(fs, "data.h5")  # the kernel is told its size: the subtree is listed
        assert sub.listed

    trio.run(main)


@pytest.mark.parametrize("group", ["", "sub", "sub/deep", "wide"])
def test_the_h5_read_in_pieces_is_the_subtree(source, tmp_path, group):
    fs = make_fs(source)
    name = (group.rpartition("/")[2] or "data") + ".h5"

    async def main() -> bytes:
        ino = await lookup(fs, f"{group}/{name}" if group else name)
        fh = fs.open(ino, os.O_RDONLY)
        try:
            return await read_all(fs, fh, fs.getattr(ino).size, step=100_003)
        finally:
            await fs.release(fh)

    path = tmp_path / name
    path.write_bytes(trio.run(main))
    assert_h5_equal_to_zarr(path, source, group)


def test_a_read_inside_one_dataset_fills_the_reply_buffer(source):
    fs = make_fs(source)

    async def main():
        ino = await lookup(fs, "sub/deep/deep.h5")
        fh = fs.open(ino, os.O_RDONLY)
        size = fs.getattr(ino).size
        reply = np.empty(4096, np.uint8)
        got = await fs.read(fh, size - 8192, 4096, reply)  # inside b's 400,000 bytes
        assert np.shares_memory(np.frombuffer(got, np.uint8), reply)
        expected = zarr.open_array(source, path="sub/deep/b", mode="r")[...]
        assert bytes(got) == expected.tobytes()[-8192:-4096]
        await fs.release(fh)

    trio.run(main)


def test_a_whole_read_keeps_few_array_files_open(source):
    fs = make_fs(source)

    async def main():
        ino = await lookup(fs, "wide/wide.h5")
        files = [n for n in fs.table[ino].shown_files() if isinstance(n, ArrayFile)]
        assert len(files) == WIDE
        fh = fs.open(ino, os.O_RDONLY)
        most = 0
        for at in range(0, fs.getattr(ino).size, 1024):
            await fs.read(fh, at, 1024)
            most = max(most, sum(f.opens for f in files))
        assert most == OPEN_ARRAYS
        await fs.release(fh)
        assert sum(f.opens for f in files) == 0

    trio.run(main)


def test_arrays_the_listing_hides_are_named_left_out(tmp_path):
    """An array of strings without text files and one whose metadata cannot be read have
    no node in the listing: the .h5 names both, with why, in their group's attribute."""
    root = str(tmp_path / "hidden.zarr")
    top = zarr.open_group(root, mode="w", zarr_format=2)
    sub = top.create_group("sub")
    sub.create_array("kept", shape=(4,), dtype="<i2")[...] = 3
    sub.create_array("names", shape=(2,), dtype=str)[...] = ["a", "bc"]
    (Path(root) / "sub" / "broken").mkdir()
    (Path(root) / "sub" / "broken" / ".zarray").write_text("{not json")
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    options = MountOptions(sidecars=["hdf5"], dataset_name="data")
    fs = assemble(dialect, node, pipeline, options).fs

    async def main() -> bytes:
        ino = await lookup(fs, "data.h5")
        fh = fs.open(ino, os.O_RDONLY)
        try:
            return await read_all(fs, fh, fs.getattr(ino).size)
        finally:
            await fs.release(fh)

    path = tmp_path / "hidden.h5"
    path.write_bytes(trio.run(main))
    with h5py.File(path, "r") as f:
        assert list(f["sub"]) == ["kept"]
        note = f["sub"].attrs["zarrmount_omitted"]
    note = note.decode() if isinstance(note, bytes) else note
    assert "'names': " in note and "strings" in note and "netCDF" not in note, note
    assert "'broken': " in note, note
