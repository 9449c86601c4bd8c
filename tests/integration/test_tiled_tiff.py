"""Through the kernel: the tiled ``.tif`` view as GIS tools read it. Every tile read by
tifffile and by GDAL (rasterio's wheel, and Debian's command-line tools) equals
zarr-python's array; a pyramid written by ome-zarr-py is one TIFF with its lower levels
as overviews, and a reduced read fetches only the coarser level's chunks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
import tifffile
import zarr
from ome_zarr.format import FormatV04
from ome_zarr.writer import write_image

pytestmark = pytest.mark.mount

GDAL = dict(os.environ, GDAL_PAM_ENABLED="NO")  # no .aux.xml beside a read-only file


def test_every_tile_reads_equal_to_zarr(mount_factory, tmp_path):
    root = str(tmp_path / "bands.zarr")
    shape, chunks = (3, 200, 300), (2, 64, 128)  # edge tiles, a chunk across two bands
    values = np.random.default_rng(7).standard_normal(shape).astype("<f4")
    array = zarr.create_array(root, shape=shape, chunks=chunks, dtype="<f4", fill_value=-1.0)
    array[...] = values
    expected = np.asarray(zarr.open_array(root, mode="r")[...])
    mount = mount_factory(root, ["sidecars=tiff"], tag="tiled-every-tile")
    tif = mount.p("array.tif")
    with tifffile.TiffFile(tif) as t:
        page = t.pages[0]
        assert page.is_tiled and (page.tilelength, page.tilewidth) == chunks[-2:]
        assert len(page.dataoffsets) == 3 * 4 * 3
        assert np.array_equal(t.asarray(), expected)
    with rasterio.open(tif) as ds:
        for band in range(1, 4):
            for _, window in ds.block_windows(band):
                got = ds.read(band, window=window)
                rows, cols = window.toslices()
                assert np.array_equal(got, expected[band - 1, rows, cols]), (band, window)


def _pyramid(tmp_path) -> tuple[str, str, list[np.ndarray], list[int]]:
    """A three-level OME-Zarr 0.4 image: its root, the full resolution's name, the levels
    as zarr-python reads them (full resolution first) and each level's number of chunks."""
    root = str(tmp_path / "pyramid.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    image = np.random.default_rng(8).integers(0, 60000, (1024, 1536)).astype("<u2")
    options = {"chunks": (128, 128)}
    write_image(
        image, group, fmt=FormatV04(), axes="yx", scale_factors=(2, 4), storage_options=options
    )
    arrays = sorted(zarr.open_group(root, mode="r").arrays(), key=lambda a: -a[1].size)
    levels = [np.asarray(a[...]) for _, a in arrays]
    chunks = [int(np.prod(a.cdata_shape)) for _, a in arrays]
    return root, arrays[0][0], levels, chunks


@pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="gdal-bin is not installed")
def test_a_reduced_read_of_a_pyramid_reads_only_the_coarser_level(mount_factory, tmp_path):
    root, first, levels, chunks = _pyramid(tmp_path)
    assert chunks == [96, 24, 6]
    mount = mount_factory(root, ["sidecars=tiff"], tag="tiled-pyramid")
    tif = mount.p(first + ".tif")
    info = json.loads(
        subprocess.run(["gdalinfo", "-json", tif], env=GDAL, capture_output=True, check=True).stdout
    )
    (band,) = info["bands"]
    assert [o["size"] for o in band["overviews"]] == [[768, 512], [384, 256]]
    before = mount.stats()["cache_misses"]
    out = tmp_path / "quarter.tif"
    subprocess.run(
        ["gdal_translate", "-q", "-outsize", "25%", "25%", tif, str(out)],
        env=GDAL,
        check=True,
    )
    assert mount.stats()["cache_misses"] - before == chunks[2]  # the coarser level's alone
    assert np.array_equal(tifffile.imread(out), levels[2])


@pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="gdal-bin is not installed")
def test_a_window_decodes_the_chunks_it_covers_and_no_other(mount_factory, tmp_path):
    """The kernel's read-ahead would run on from the window's last tile of a row into the
    next tile of the file: the view is read past the page cache."""
    root = str(tmp_path / "dem.zarr")
    values = np.random.default_rng(9).standard_normal((1024, 1024)).astype("<f4")
    zarr.create_array(root, shape=values.shape, chunks=(256, 256), dtype="<f4")[...] = values
    mount = mount_factory(root, ["sidecars=tiff"], tag="tiled-window")
    out = tmp_path / "window.tif"
    window = ["-srcwin", "256", "256", "512", "512"]  # chunks (1, 1) to (2, 2)
    subprocess.run(
        ["gdal_translate", "-q", *window, mount.p("array.tif"), str(out)], env=GDAL, check=True
    )
    assert mount.stats()["cache_misses"] == 4
    assert np.array_equal(tifffile.imread(out), values[256:768, 256:768])


def test_an_ome_zarr_image_is_one_pyramidal_ome_tiff(mount_factory, tmp_path):
    ome_types = pytest.importorskip("ome_types")
    from ome_zarr.format import FormatV05

    root = str(tmp_path / "cells.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    image = np.random.default_rng(4).integers(0, 4000, (2, 3, 96, 128)).astype("<u2")
    scale = {"c": 1.0, "z": 0.5, "y": 0.1, "x": 0.1}
    units = {"z": "micrometer", "y": "micrometer", "x": "micrometer"}
    options = {"chunks": (1, 1, 32, 32)}
    write_image(
        image,
        group,
        fmt=FormatV05(),
        axes="czyx",
        scale_factors=(2, 4),
        scale=scale,
        axes_units=units,
        storage_options=options,
    )
    arrays = sorted(zarr.open_group(root, mode="r").arrays(), key=lambda a: -a[1].size)
    mount = mount_factory(root, ["sidecars=tiff", "dataset_name=cells"], tag="tiled-ome")
    with tifffile.TiffFile(mount.p("cells.ome.tif")) as tif:
        assert tif.is_ome and len(tif.series[0].levels) == 3
        for level, (_, array) in zip(tif.series[0].levels, arrays, strict=True):
            got = level.asarray(squeeze=False).reshape(array.shape)
            assert np.array_equal(got, np.asarray(array[...]))
        pixels = ome_types.from_xml(tif.ome_metadata).images[0].pixels
    assert (pixels.size_c, pixels.size_z, pixels.size_y, pixels.size_x) == image.shape
    assert (pixels.physical_size_z, pixels.physical_size_x) == (0.5, 0.1)
