"""Nothing outside the store root is served or written, whatever symlinks and metadata say.

Each store is written by zarr-python; symlinks and consolidated keys are then added by
hand. Files outside the root hold a marker that must never be read through the mount.
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted
from helpers.oracle import read_file
from helpers.outside import assert_nothing_outside_served

pytestmark = pytest.mark.mount

MARKER = b"OUTSIDE-THE-STORE-ROOT!!" * 4  # 96 bytes: a chunk of a (96,) uint8 array


def _array(root, path: str, fmt: int, values: np.ndarray) -> None:
    a = zarr.create_array(
        root,
        name=path,
        shape=values.shape,
        chunks=values.shape,
        dtype=values.dtype,
        zarr_format=fmt,
        compressors=None,
    )
    a[:] = values


@pytest.fixture
def hostile(tmp_path):
    """A v2 store whose symlinks lead out, and an outside tree they lead to."""
    outside = tmp_path / "outside"
    root = tmp_path / "store.zarr"
    zarr.open_group(root, mode="w", zarr_format=2)
    ones = np.ones(96, np.uint8)
    for name in ("healthy", "chunk_link", "inner_link", "dir_link_target"):
        _array(str(root), name, 2, ones)
    _array(str(outside), "arr", 2, ones)  # a valid array outside the root
    (outside / "arr" / "0").write_bytes(MARKER)
    (outside / "secret").write_bytes(MARKER)
    os.remove(root / "chunk_link" / "0")
    os.symlink(outside / "secret", root / "chunk_link" / "0")  # a chunk leading out
    os.remove(root / "inner_link" / "0")
    os.symlink(root / "healthy" / "0", root / "inner_link" / "0")  # within the root: fine
    os.symlink(outside / "arr", root / "array_link")  # an array directory leading out
    os.symlink(outside, root / "group_link")  # a directory leading out
    return root, outside


def test_symlinks_never_lead_out_of_the_store_root(hostile):
    root, outside = hostile
    expected = zarr.open_array(root / "healthy", mode="r")[:].tobytes()
    with mounted(root, tag="links") as m:
        names = set(os.listdir(m.path))
        assert {"healthy", "chunk_link", "inner_link"} <= names, names
        assert "array_link" not in names  # its metadata leads out: hidden
        with pytest.raises(OSError) as e:
            read_file(m.p("chunk_link"))
        assert e.value.errno == errno.EIO
        assert m.wait_for_log("chunk_link/0"), m.read_log()[-2000:]
        assert read_file(m.p("inner_link")) == expected
        assert read_file(m.p("healthy")) == expected
        assert_nothing_outside_served(m.path, MARKER, skip={"chunk_link"})
        assert "group_link" not in names or not os.listdir(m.p("group_link"))
        m.assert_alive()


def test_consolidated_keys_leaving_the_root_serve_nothing(tmp_path):
    outside = tmp_path / "outside"
    _array(str(outside), "arr", 2, np.ones(96, np.uint8))
    (outside / "arr" / "0").write_bytes(MARKER)
    root = tmp_path / "store.zarr"
    zarr.open_group(root, mode="w", zarr_format=2)
    _array(str(root), "healthy", 2, np.arange(96, dtype=np.uint8))
    zarray = json.loads((outside / "arr" / ".zarray").read_text())
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "healthy/.zarray": json.loads((root / "healthy" / ".zarray").read_text()),
        "../outside/arr/.zarray": zarray,
        "g/.zgroup": {"zarr_format": 2},
        "g/../../outside/arr/.zarray": zarray,
        "x/.zarray": zarray,
    }
    (root / ".zmetadata").write_text(
        json.dumps({"zarr_consolidated_format": 1, "metadata": metadata})
    )
    with mounted(root, tag="zmeta") as m:
        assert_nothing_outside_served(m.path, MARKER)
        assert read_file(m.p("healthy")) == bytes(range(96))
        m.assert_alive()


def test_rw_writes_never_leave_the_store_root(tmp_path):
    """An array whose chunk directory leads out: its writes fail, nothing lands outside."""
    store = rw_tools.make_store(
        tmp_path,
        "arr",
        dict(zarr_format=3, shape=(64,), chunks=(16,), dtype="u1", fill_value=0),
        initial="none",
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, os.path.join(store.array_dir, "c"))
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="rwout") as m:
        fd = os.open(m.p("arr"), os.O_RDWR)
        os.pwrite(fd, b"\x07" * 64, 0)
        for step in (os.fsync, os.close):  # the data stays dirty: close reports it too
            with pytest.raises(OSError) as e:
                step(fd)
            assert e.value.errno == errno.EIO
        assert m.wait_for_log("leads outside the store root"), m.read_log()[-2000:]
        m.assert_alive()
    assert os.listdir(outside) == []
