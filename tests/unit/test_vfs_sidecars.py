"""Sidecar files without a kernel: a view's bytes, read in any pieces, are a file NumPy and
tifffile read equal to zarr-python's array; writes through a ``.npy`` view reach the
array, and its header cannot be changed; ``--inspect`` says why a sidecar is missing."""

from __future__ import annotations

import errno
import io
import os

import numpy as np
import pytest
import tifffile
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.inspect_tree import inspect
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import FsError


def _store(tmp_path, dtype="<u2", shape=(30, 41), chunks=(8, 16)) -> tuple[str, np.ndarray]:
    root = str(tmp_path / "a.zarr")
    values = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    zarr.create_array(root, shape=shape, chunks=chunks, dtype=dtype)[...] = values
    return root, np.asarray(zarr.open_array(root, mode="r")[...])


def _fs(root: str, *options: str):
    mount_options = MountOptions()
    for text in options:
        mount_options.apply(text)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    return assemble(dialect, node, pipeline, mount_options).fs


async def _read_all(fs, ino: int, piece: int) -> bytes:
    fh = fs.open(ino, os.O_RDONLY)
    size = fs.getattr(ino).size
    got = b"".join([bytes(await fs.read(fh, at, piece)) for at in range(0, size, piece)])
    await fs.release(fh)
    return got


@pytest.mark.parametrize("piece", [7, 100, 4096, 1 << 20])
def test_views_read_in_any_pieces_are_files_numpy_and_tifffile_read(tmp_path, piece):
    root, expected = _store(tmp_path)
    fs = _fs(root, "sidecars=npy+tiff")

    async def main():
        npy = await _read_all(fs, (await fs.lookup(1, "array.npy")).ino, piece)
        tif = await _read_all(fs, (await fs.lookup(1, "array.tif")).ino, piece)
        return npy, tif

    npy, tif = trio.run(main)
    assert np.array_equal(np.load(io.BytesIO(npy)), expected)
    assert np.array_equal(tifffile.imread(io.BytesIO(tif)), expected)


def test_npy_view_writes_reach_the_array_and_its_header_stays(tmp_path):
    root, expected = _store(tmp_path)
    fs = _fs(root, "rw,sidecars=npy+tiff")

    async def main():
        npy = (await fs.lookup(1, "array.npy")).ino
        fh = fs.open(npy, os.O_RDWR)
        head = bytes(await fs.read(fh, 0, 128))
        start = np.lib.format.read_array_header_1_0  # the header NumPy parses
        stream = io.BytesIO(head)
        np.lib.format.read_magic(stream)
        start(stream)
        data_at = stream.tell()
        await fs.write(fh, 0, head[:data_at])  # the header as it is: accepted
        with pytest.raises(FsError) as e:
            await fs.write(fh, 0, b"\x00" + head[1:data_at])
        assert e.value.errno == errno.EPERM
        await fs.write(fh, data_at + 2 * 41 * 3, np.full(5, 7, "<u2").tobytes())
        await fs.release(fh)
        tif = (await fs.lookup(1, "array.tif")).ino
        fh = fs.open(tif, os.O_RDWR)
        with pytest.raises(FsError):
            await fs.write(fh, 1000, b"x")  # TIFF views are read-only
        await fs.release(fh)

    trio.run(main)
    expected = expected.copy()
    expected[3, :5] = 7
    assert np.array_equal(zarr.open_array(root, mode="r")[...], expected)


def test_inspect_names_each_sidecar_or_why_it_is_missing(tmp_path):
    root, _ = _store(tmp_path, dtype="|i1", shape=(5, 6))  # ENVI has no int8
    dialect, node, _ = hierarchy.open_hierarchy(LocalStore(root))
    line = inspect(dialect, node, as_json=False, kinds=["envi", "npy"])
    assert "sidecars: npy" in line and "envi: " in line and "int8" in line


def test_a_tiff_view_of_many_pages_is_read_in_parts_of_its_header(tmp_path, monkeypatch):
    """20,000 pages: a 3.5 MB header, never made whole (a read makes the pages it touches)."""
    import zarrmount.headers.tiff as tiff

    root, expected = _store(tmp_path, dtype="|u1", shape=(20000, 2, 3), chunks=(1000, 2, 3))
    fs = _fs(root, "sidecars=tiff")
    made = []
    real = tiff.TiffLayout._ifds

    def counted(lay, image, a, b):
        made.append(b - a)
        return real(lay, image, a, b)

    monkeypatch.setattr(tiff.TiffLayout, "_ifds", counted)

    async def main():
        return await _read_all(fs, (await fs.lookup(1, "array.tif")).ino, 1 << 16)

    tif = trio.run(main)
    assert max(made) < 20000  # each read made only its own pages' directories
    assert np.array_equal(tifffile.imread(io.BytesIO(tif)), expected)
