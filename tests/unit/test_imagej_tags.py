"""The strips ``.tif`` view carries ImageJ's calibration: tifffile (the reader Fiji's
files are checked with) reads back the unit, the z spacing or frame interval and the
pixel size given, as numbers, never as our own header's text."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tifffile

from zarrmount.format.multiscales import Axis
from zarrmount.format.physical import Space
from zarrmount.headers.imagej import imagej_description, resolution_tags
from zarrmount.headers.tiff import strip_layout

SPACE_2D = (Axis("y", "space", "micrometer"), Axis("x", "space", "micrometer"))


def _read(arr: np.ndarray, space: Space) -> tifffile.TiffFile:
    tags = (*imagej_description(arr.shape, space), *resolution_tags(space))
    lay = strip_layout(arr.shape, arr.dtype, tags)
    return tifffile.TiffFile(io.BytesIO(lay.header_range(0, lay.size) + arr.tobytes()))


def test_a_z_stack_has_its_spacing_and_pixel_size():
    arr = np.arange(3 * 4 * 5, dtype="<u2").reshape(3, 4, 5)
    axes = (Axis("z", "space", "nanometer"), *SPACE_2D)
    space = Space(axes, (500.0, 0.2, 0.125), (0.0, 0.0, 0.0), "OME-Zarr 0.4")
    with _read(arr, space) as tif:
        meta = tif.imagej_metadata
        page = tif.pages[0]
        assert meta["slices"] == 3 and meta["unit"] == "micron"
        assert meta["spacing"] == pytest.approx(0.5)  # 500 nm in the plane's micrometres
        x, y = page.tags["XResolution"].value, page.tags["YResolution"].value
        assert x[0] / x[1] == pytest.approx(8.0) and y[0] / y[1] == pytest.approx(5.0)
        assert np.array_equal(tif.asarray(), arr)


def test_a_time_series_has_its_frame_interval_in_seconds():
    arr = np.zeros((4, 6, 7), "<f4")
    axes = (Axis("t", "time", "millisecond"), *SPACE_2D)
    space = Space(axes, (250.0, 1.0, 1.0), (0.0, 0.0, 0.0), "OME-Zarr 0.4")
    with _read(arr, space) as tif:
        meta = tif.imagej_metadata
        assert meta["frames"] == 4 and meta["finterval"] == pytest.approx(0.25)


def test_a_plane_without_length_units_is_left_uncalibrated():
    arr = np.zeros((6, 7), "u1")
    axes = (Axis("y", "space", None), Axis("x", "space", None))
    space = Space(axes, (2.0, 2.0), (0.0, 0.0), "OME-Zarr 0.4")
    assert resolution_tags(space) == ()
    with _read(arr, space) as tif:
        assert "unit" not in tif.imagej_metadata
        assert tif.pages[0].tags["XResolution"].value == (1, 1)
