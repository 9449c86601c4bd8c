"""``-o byteorder``: array files (and their views) show elements in the asked byte order,
whatever pieces they are read or written in; ``user.zarr.dtype`` says that order. The
expected bytes are zarr-python's values converted by NumPy."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

SHAPE = (13, 17)


def _store(tmp_path, dtype: str) -> str:
    root = str(tmp_path / "a.zarr")
    values = (np.arange(np.prod(SHAPE)) * 1001 - 7000).reshape(SHAPE).astype(dtype)
    zarr.create_array(root, shape=SHAPE, chunks=(4, 8), dtype=dtype, zarr_format=2)[...] = values
    return root


def _fs(root: str, text: str):
    options = MountOptions()
    options.apply(text)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    return assemble(dialect, node, pipeline, options).fs


def _oracle(root: str, order: str) -> np.ndarray:
    values = np.asarray(zarr.open_array(root, mode="r")[...])
    return values.astype(values.dtype.newbyteorder(order))


async def _read(fs, name: str, pieces: int) -> bytes:
    ino = (await fs.lookup(1, name)).ino
    fh = fs.open(ino, os.O_RDONLY)
    size = fs.getattr(ino).size
    got = b"".join([bytes(await fs.read(fh, at, pieces)) for at in range(0, size, pieces)])
    await fs.release(fh)
    return got


@pytest.mark.parametrize("stored,shown", [("<i4", "big"), (">f8", "little"), ("<u2", "native")])
@pytest.mark.parametrize("pieces", [3, 64, 1 << 20])
def test_files_and_views_show_the_asked_byte_order(tmp_path, stored, shown, pieces):
    root = _store(tmp_path, stored)
    fs = _fs(root, f"byteorder={shown},sidecars=npy")
    expected = _oracle(root, {"big": ">", "little": "<", "native": "="}[shown])

    async def main():
        return await _read(fs, "array", pieces), await _read(fs, "array.npy", pieces)

    raw, npy = trio.run(main)
    assert raw == expected.tobytes()
    loaded = np.load(io.BytesIO(npy))
    assert loaded.dtype == expected.dtype and np.array_equal(loaded, expected)
    shown_label = fs.getxattr((trio.run(fs.lookup, 1, "array")).ino, "user.zarr.dtype", 0)
    assert shown_label.decode() == expected.dtype.str


def test_writes_in_the_shown_order_are_stored_in_the_stored_order(tmp_path):
    root = _store(tmp_path, "<i4")
    fs = _fs(root, "rw,byteorder=big")
    expected = np.asarray(zarr.open_array(root, mode="r")[...]).copy()
    expected[2, 3:6] = [1, -2, 300000]
    new = np.array([1, -2, 300000], dtype=">i4").tobytes()
    at = (2 * SHAPE[1] + 3) * 4

    async def main():
        ino = (await fs.lookup(1, "array")).ino
        fh = fs.open(ino, os.O_RDWR)
        await fs.write(fh, at + 1, new[1:7])  # partial elements at both edges
        await fs.write(fh, at, new[:1])
        await fs.write(fh, at + 7, new[7:])
        await fs.release(fh)

    trio.run(main)
    assert np.array_equal(zarr.open_array(root, mode="r")[...], expected)
