"""A group holding an OME-Zarr image shows ``GROUP.ome.tif``, one pyramidal OME-TIFF
(tiles are chunks, each plane's lower resolutions its SubIFDs), read here without a
kernel: tifffile reads every level equal to zarr-python's arrays, and the OME-XML
validates with ome-types and gives the sizes, pixel sizes and channel names the
writer, ome-zarr-py, was given."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import tifffile
import trio
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

ome_types = pytest.importorskip("ome_types")


async def _read(root: str, name: str) -> bytes:
    options = MountOptions()
    options.apply("sidecars=tiff")
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    fs = assemble(dialect, node, pipeline, options).fs
    ino = (await fs.lookup(1, name)).ino
    fh = fs.open(ino, os.O_RDONLY)
    size = fs.getattr(ino).size
    data = b"".join([bytes(await fs.read(fh, at, 1 << 20)) for at in range(0, size, 1 << 20)])
    await fs.release(fh)
    return data


def _image(tmp_path, fmt, axes: str, shape, scale, units, labels=None):
    root = str(tmp_path / "image.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    data = np.random.default_rng(2).integers(0, 4000, shape).astype("<u2")
    write_image(
        data,
        group,
        fmt=fmt,
        axes=axes,
        scale_factors=(2, 4),
        scale=dict(zip(axes, scale, strict=True)),
        axes_units=units,
        storage_options={"chunks": (1,) * (len(shape) - 2) + (32, 32)},
    )
    if labels:  # OME-Zarr's omero block, beside the multiscales (under "ome" in 0.5)
        omero = {"channels": [{"label": n} for n in labels]}
        if fmt.zarr_format == 3:
            group.attrs["ome"] = {**group.attrs["ome"], "omero": omero}
        else:
            group.attrs["omero"] = omero
    read = zarr.open_group(root, mode="r")
    levels = sorted((np.asarray(a[...]) for _, a in read.arrays()), key=lambda a: -a.size)
    return root, levels


CASES = {
    "yx": ("yx", (100, 140), (0.25, 0.25), {"y": "micrometer", "x": "micrometer"}, None),
    "cyx": (
        "cyx",
        (2, 100, 140),
        (1.0, 0.5, 0.25),
        {"y": "micrometer", "x": "micrometer"},
        ["DAPI", "GFP"],
    ),
    "tczyx": (
        "tczyx",
        (2, 2, 3, 64, 96),
        (2.0, 1.0, 0.5, 0.1, 0.1),
        {"t": "second", "z": "micrometer", "y": "micrometer", "x": "micrometer"},
        None,
    ),
}


@pytest.mark.parametrize("version", ["0.4", "0.5"])
@pytest.mark.parametrize("case", CASES)
def test_an_ome_zarr_image_is_one_pyramidal_ome_tiff(tmp_path, case, version):
    axes, shape, scale, units, labels = CASES[case]
    fmt = FormatV04() if version == "0.4" else FormatV05()
    root, levels = _image(tmp_path, fmt, axes, shape, scale, units, labels)
    data = trio.run(_read, root, "root.ome.tif")
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        assert tif.is_ome and tif.pages[0].is_tiled
        assert len(tif.pages) == int(np.prod(shape[:-2]))  # the planes alone in the chain
        series = tif.series[0]
        assert len(series.levels) == 3
        for level, expected in zip(series.levels, levels, strict=True):
            assert np.array_equal(level.asarray(squeeze=False).reshape(expected.shape), expected)
        ome = ome_types.from_xml(tif.ome_metadata)
    pixels = ome.images[0].pixels
    sizes = dict(zip(axes.upper(), shape, strict=True))
    for d in "XYZCT":
        assert getattr(pixels, f"size_{d.lower()}") == sizes.get(d, 1)
    given = dict(zip(axes, scale, strict=True))
    assert pixels.physical_size_x == given["x"] and pixels.physical_size_y == given["y"]
    assert pixels.physical_size_x_unit.value == "µm"
    if "z" in given:
        assert pixels.physical_size_z == given["z"]
    if "t" in given:
        assert pixels.time_increment == given["t"] and pixels.time_increment_unit.value == "s"
    if labels:
        assert [c.name for c in pixels.channels] == labels


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_each_level_s_tif_is_a_calibrated_stack_fiji_reads(tmp_path, version):
    """A level with a physical space is tiled as a z-stack of pages with ImageJ's
    calibration (a map's leading dimension would be bands)."""
    fmt = FormatV04() if version == "0.4" else FormatV05()
    units = {"z": "nanometer", "y": "micrometer", "x": "micrometer"}
    root, levels = _image(tmp_path, fmt, "zyx", (5, 100, 140), (400.0, 0.25, 0.2), units)
    first = sorted(zarr.open_group(root, mode="r").arrays(), key=lambda a: -a[1].size)[0][0]
    data = trio.run(_read, root, f"{first}.tif")
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        assert tif.pages[0].is_tiled and len(tif.pages) == 5
        meta = tif.imagej_metadata
        assert meta["slices"] == 5 and meta["unit"] == "micron"
        assert meta["spacing"] == pytest.approx(0.4)  # 400 nm in the plane's micrometres
        x = tif.pages[0].tags["XResolution"].value
        assert x[0] / x[1] == pytest.approx(1 / 0.2)
        assert np.array_equal(tif.asarray(), levels[0])


def test_units_as_written_are_omes_units(tmp_path):
    """Units written "µm" and "ms" (no UDUNITS names, but in use) give OME's pixel size
    and time increment as the UDUNITS names do."""
    root, _ = _image(tmp_path, FormatV04(), "tyx", (2, 64, 64), (5.0, 0.5, 0.5), {"t": "second"})
    group = zarr.open_group(root, mode="r+")
    multiscales = group.attrs["multiscales"]
    multiscales[0]["axes"] = [
        {"name": "t", "type": "time", "unit": "ms"},
        {"name": "y", "type": "space", "unit": "µm"},
        {"name": "x", "type": "space", "unit": "micron"},
    ]
    group.attrs["multiscales"] = multiscales
    data = trio.run(_read, root, "root.ome.tif")
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        pixels = ome_types.from_xml(tif.ome_metadata).images[0].pixels
    assert (pixels.physical_size_x, pixels.physical_size_x_unit.value) == (0.5, "µm")
    assert (pixels.physical_size_y, pixels.physical_size_y_unit.value) == (0.5, "µm")
    assert (pixels.time_increment, pixels.time_increment_unit.value) == (5.0, "ms")
