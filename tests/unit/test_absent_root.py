"""An absent chunk is the fill value only in a store that is there: a store whose root is
gone (a deleted bucket, an unmounted disk) fails the reads, and nothing of it is kept."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import trio
import trio.testing
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.aio import ROOT_CHECK_S
from zarrmount.store.local import LocalStore
from zarrmount.vfs import FsError


@pytest.mark.parametrize("fmt", [2, 3])
def test_absent_chunks_of_a_vanished_store_fail_and_nothing_is_kept(tmp_path, fmt):
    root = str(tmp_path / "data.zarr")
    a = zarr.create_array(
        root, shape=(40,), chunks=(10,), dtype="<i2", fill_value=-7, zarr_format=fmt
    )
    a[:10] = np.arange(10)  # chunks 1, 2 and 3 are absent
    expected = np.ascontiguousarray(zarr.open_array(root, mode="r")[:]).tobytes()
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    fs = assemble(dialect, node, pipeline, MountOptions()).fs
    clock = trio.testing.MockClock()

    async def main():
        fh = fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)
        assert bytes(await fs.read(fh, 20, 2)) == expected[20:22]  # chunk 1: fill
        os.rename(root, root + ".gone")
        clock.jump(ROOT_CHECK_S)
        with pytest.raises(FsError) as e:
            await fs.read(fh, 40, 2)  # chunk 2: absent, but so is the store
        assert e.value.errno == errno.EIO
        os.rename(root + ".gone", root)
        assert bytes(await fs.read(fh, 40, 40)) == expected[40:80]  # no error was kept

    trio.run(main, clock=clock)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_group_of_a_vanished_store_lists_as_an_error_not_as_empty(tmp_path, fmt):
    """Deleted between the mount and the first listing: EIO, and the listing is tried
    again on next use (nothing kept), when the store is back."""
    root = str(tmp_path / "data.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=fmt)
    group.create_array("x", shape=(4,), dtype="u1")
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    fs = assemble(dialect, node, pipeline, MountOptions()).fs

    async def main():
        os.rename(root, root + ".gone")
        with pytest.raises(FsError) as e:
            await fs.readdir(1)
        assert e.value.errno == errno.EIO
        os.rename(root + ".gone", root)
        assert [name for name, _ in await fs.readdir(1)] == ["x"]

    trio.run(main)
