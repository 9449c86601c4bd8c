"""The tiled ``.tif`` view without a kernel: read in any pieces, it is a tiled TIFF that
tifffile and rasterio (GDAL) read equal to zarr-python's array, one tile per chunk, edge
tiles padded with the fill value; arrays whose chunks cannot be tiles keep strips."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
import tifffile
import trio
import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore


def _fs(root: str, options: str = "sidecars=tiff"):
    mount_options = MountOptions()
    mount_options.apply(options)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    return assemble(dialect, node, pipeline, mount_options).fs


async def _read(fs, name: str, piece: int, twice: bool = False) -> bytes:
    """The file read in pieces, each into one reply buffer used again, as the adapter does."""
    ino = (await fs.lookup(1, name)).ino
    fh = fs.open(ino, os.O_RDONLY)
    size = fs.getattr(ino).size
    reply = np.empty(piece, np.uint8)
    rounds = []
    for _ in range(2 if twice else 1):  # the second from cached chunks
        got = [bytes(await fs.read(fh, at, piece, reply)) for at in range(0, size, piece)]
        rounds.append(b"".join(got))
    await fs.release(fh)
    assert all(r == rounds[0] for r in rounds)
    return rounds[0]


def _array(tmp_path, shape, chunks, dtype, fill=0, **kw) -> tuple[str, np.ndarray]:
    """An array with its first chunk never written (it reads as the fill value)."""
    root = str(tmp_path / "a.zarr")
    rng = np.random.default_rng(3)
    values = rng.integers(1, 100, np.prod(shape)).astype(dtype).reshape(shape)
    arr = zarr.create_array(root, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill, **kw)
    arr[...] = values
    first = tuple(slice(0, c) for c in chunks)
    values[first] = fill
    arr[first] = fill  # zarr-python then removes that chunk (it holds the fill value alone)
    return root, np.asarray(zarr.open_array(root, mode="r")[...])


CASES = {
    "edges": ((70, 100), (32, 48), "<f4", {"fill": -9999.0}),
    "bands big-endian v2": ((3, 40, 50), (2, 16, 32), ">u2", {"zarr_format": 2}),
    "pages of bands": ((2, 3, 40, 50), (1, 3, 16, 32), "<i2", {}),
    "sharded": ((64, 80), (16, 16), "<u1", {"shards": (32, 80)}),
}


@pytest.mark.parametrize("piece", [7, 4096, 1 << 20])
@pytest.mark.parametrize("case", CASES)
def test_tifffile_reads_the_tiled_view(tmp_path, case, piece):
    shape, chunks, dtype, kw = CASES[case]
    fill = kw.pop("fill", 0)
    root, expected = _array(tmp_path, shape, chunks, dtype, fill, **kw)
    data = trio.run(_read, _fs(root), "array.tif", piece, piece == 4096)
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        page = tif.pages[0]
        assert page.is_tiled and (page.tilelength, page.tilewidth) == chunks[-2:]
        assert np.array_equal(tif.asarray().reshape(shape), expected)


def test_edge_tiles_are_padded_with_the_fill_value(tmp_path):
    root, expected = _array(tmp_path, (40, 40), (32, 32), "<f4", fill=-1.5)
    data = trio.run(_read, _fs(root), "array.tif", 1 << 16)
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        page = tif.pages[0]
        offsets, counts = page.dataoffsets, page.databytecounts
    assert len(offsets) == 4 and set(counts) == {32 * 32 * 4}
    corner = np.frombuffer(data[offsets[3] : offsets[3] + counts[3]], "<f4").reshape(32, 32)
    assert np.array_equal(corner[:8, :8], expected[32:, 32:])
    assert (corner[8:, :] == -1.5).all() and (corner[:, 8:] == -1.5).all()


def test_rasterio_reads_bands_and_a_window(tmp_path):
    pytest.importorskip("rasterio")
    from rasterio.io import MemoryFile
    from rasterio.windows import Window

    root, expected = _array(tmp_path, (3, 70, 100), (1, 32, 48), "<u2", zarr_format=2)
    data = trio.run(_read, _fs(root), "array.tif", 1 << 20)
    with MemoryFile(data) as memory, memory.open() as ds:
        assert ds.count == 3 and ds.block_shapes == [(32, 48)] * 3
        assert np.array_equal(ds.read(), expected)
        window = ds.read(2, window=Window(40, 20, 50, 45))
    assert np.array_equal(window, expected[1, 20:65, 40:90])


def test_chunks_that_cannot_be_tiles_keep_strips(tmp_path):
    root, expected = _array(tmp_path, (30, 41), (8, 16), "<u2")
    data = trio.run(_read, _fs(root), "array.tif", 1 << 16)
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        assert not tif.pages[0].is_tiled
        assert np.array_equal(tif.asarray(), expected)


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_a_pyramid_is_one_tiff_whose_overviews_are_the_lower_levels(tmp_path, version):
    pytest.importorskip("rasterio")
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image
    from rasterio.io import MemoryFile

    fmt = FormatV04() if version == "0.4" else FormatV05()
    root = str(tmp_path / "image.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    image = np.random.default_rng(5).integers(0, 60000, (150, 200)).astype("<u2")
    write_image(
        image, group, fmt=fmt, axes="yx", scale_factors=(2, 4), storage_options={"chunks": (32, 32)}
    )
    read = zarr.open_group(root, mode="r")
    levels = sorted(
        (np.asarray(a[...]) for _, a in read.arrays()), key=lambda a: a.size, reverse=True
    )
    first = next(n for n, a in read.arrays() if a.shape == image.shape)
    data = trio.run(_read, _fs(root), first + ".tif", 1 << 20)
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        got = [level.asarray() for level in tif.series[0].levels]
    assert len(got) == 3
    for g, expected in zip(got, levels, strict=True):
        assert np.array_equal(g, expected)
    with MemoryFile(data) as memory, memory.open() as ds:
        assert ds.overviews(1) == [2, 4]
        assert np.array_equal(ds.read(1, out_shape=levels[2].shape), levels[2])


def test_inspect_names_the_tiles_the_strips_and_the_pyramid(tmp_path):
    from ome_zarr.format import FormatV04
    from ome_zarr.writer import write_image

    from zarrmount.inspect_tree import inspect

    root = str(tmp_path / "image.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    image = np.zeros((150, 200), "<u2")
    options = {"chunks": (32, 48)}
    write_image(
        image, group, fmt=FormatV04(), axes="yx", scale_factors=(2,), storage_options=options
    )
    group.create_array("odd", shape=(30, 41), chunks=(8, 16), dtype="<u2")
    dialect, node, _ = hierarchy.open_hierarchy(LocalStore(root))
    found = json.loads(inspect(dialect, node, as_json=True, kinds=["tiff"]))
    by_path = {n["path"]: n for n in found["nodes"]}
    assert by_path[""]["pyramid"].startswith("levels s0, s1 ")
    assert by_path["s0"]["sidecars"]["tiff"]["tiles"] == [32, 48]
    assert by_path["odd"]["sidecars"]["tiff"]["tiles"].startswith("strips: TIFF tiles")
    text = inspect(dialect, node, as_json=False, kinds=["tiff"])
    assert "tiff (tiles 32x48)" in text and "pyramid: levels s0, s1" in text


def test_tile_runs_load_ahead_of_whole_rows_and_never_outside_a_window():
    """A window two tiles wide (rows of 16 tiles) reads 0, 1, 16, 17, ...: nothing outside;
    a window of four reads 0-3 (two ahead of 2 and 3 in its first row: unknown yet), then
    exactly up to each row's end; a whole-image reader runs on."""
    from zarrmount.array.tiles import TileRuns

    def loaded(order):
        runs = TileRuns()
        return {i for t in order for i in runs.observe(t)}

    two = [0, 1, 16, 17, 32, 33]
    assert loaded(two) - set(two) == set() and loaded(two) == {17, 33}
    four = [r * 16 + c for r in range(3) for c in range(4)]
    assert loaded(four) - set(four) == {4, 5}
    assert loaded(range(40)) == set(range(3, 42))
    assert loaded([5, 5, 5, 6, 6, 7]) == {8, 9}  # several requests of one tile count once


def test_a_whole_image_reader_keeps_only_the_tiles_around_it(tmp_path):
    """Read tile by tile in the file's order, each chunk goes back to the pool once the
    reader moves on: the cache ends with the last tile and those loaded ahead, not all."""
    root, expected = _array(tmp_path, (64, 640), (16, 32), "<u2")  # 4 x 20 tiles

    async def main():
        options = MountOptions()
        options.apply("sidecars=tiff")
        dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
        mount = assemble(dialect, node, pipeline, options)
        data = await _read(mount.fs, "array.tif", 16 * 32 * 2)  # a tile a request
        return data, len(mount.cache)

    data, held = trio.run(main)
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        assert np.array_equal(tif.asarray(), expected)
    assert held <= 1 + 2  # the last tile's chunk, and at most AHEAD more
