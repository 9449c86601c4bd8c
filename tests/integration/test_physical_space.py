"""Through the kernel: the ``.nhdr`` of each level of an OME-Zarr image written by
ome-zarr-py (0.4 on Zarr v2, 0.5 on v3; 2-D to 5-D; with and without a translation) says
where its voxels lie: SimpleITK's spacing and origin are the level's scale and
translation (x, y, z, t: the C order reversed, channels as the pixels' components) and
pynrrd reads the same; the ``.hdr`` of a plane gives ENVI's pixel size in metres.
Expected values come from the numbers given to the writer, the metadata it wrote (read
with zarr-python) and zarr-python's voxels, never from the mount."""

from __future__ import annotations

import json

import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
import zarr
from helpers import mounting
from helpers.mounting import run_cli
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

pytestmark = pytest.mark.mount

FORMATS = {"0.4": FormatV04, "0.5": FormatV05}
UNITS = {"t": "second", "z": "micrometer", "y": "micrometer", "x": "micrometer"}
# image (a group of the store): its axes, level 0's shape, the scale given to the writer,
# and the translation given as the multiscale's own transform (None: none)
IMAGES = {
    "plane": ("yx", (48, 64), (0.5, 0.25), (10.0, -2.0)),
    "volume": ("zyx", (6, 48, 64), (2.0, 0.5, 0.25), None),
    "channels": ("czyx", (2, 6, 32, 48), (1.0, 2.0, 0.5, 0.25), (0.0, 3.0, 1.0, 7.0)),
    "series": ("tczyx", (3, 2, 4, 32, 48), (1.5, 1.0, 2.0, 0.5, 0.25), None),
}


def _store(root: str, version: str) -> None:
    """Each image of IMAGES as a group of the store, two levels (y and x halved)."""
    fmt = FORMATS[version]()
    store = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    rng = np.random.default_rng(44)
    for name, (axes, shape, scale, moved) in IMAGES.items():
        group = store.create_group(name)
        values = rng.integers(0, 60000, shape, dtype="<u2")
        units = {a: UNITS[a] for a in axes if a in UNITS}
        given = dict(zip(axes, scale, strict=True))
        write_image(
            values, group, scale_factors=[2], fmt=fmt, axes=axes, scale=given, axes_units=units
        )
        if moved is not None:
            attributes = group.attrs.asdict()
            _block(attributes)["coordinateTransformations"] = [
                {"type": "scale", "scale": [1.0] * len(axes)},
                {"type": "translation", "translation": list(moved)},
            ]
            group.attrs.update(attributes)


def _block(attributes: dict) -> dict:
    return (attributes.get("ome") or attributes)["multiscales"][0]


def _levels(root: str, name: str):
    """(path, scale, translation) of each level: its transforms as written, then the
    multiscale's translation."""
    block = _block(zarr.open_group(root, path=name, mode="r").attrs.asdict())
    moved = IMAGES[name][3] or (0.0,) * len(IMAGES[name][0])
    for dataset in block["datasets"]:
        steps = {t["type"]: t[t["type"]] for t in dataset["coordinateTransformations"]}
        shift = [t + m for t, m in zip(steps.get("translation", moved), moved, strict=True)]
        yield dataset["path"], steps["scale"], shift


@pytest.fixture(scope="module", params=sorted(FORMATS))
def mounted(request, tmp_path_factory):
    """(version, the store, its mount): one store of every image, mounted once."""
    root = str(tmp_path_factory.mktemp("physical") / f"images-{request.param}.zarr")
    _store(root, request.param)
    tag = f"physical-{request.param}"
    with mounting.mounted(root, sidecars="nrrd+envi+tiff", tag=tag) as mount:
        yield request.param, root, mount


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_simpleitk_and_pynrrd_read_each_level_s_spacing_origin_and_voxels(mounted, name):
    version, root, mount = mounted
    axes = IMAGES[name][0]
    world = [d for d, a in enumerate(axes) if a != "c"][::-1]  # x, y, z, t
    for path, scale, moved in _levels(root, name):
        nhdr = mount.p(f"{name}/{path}.nhdr")
        expected = np.asarray(zarr.open_array(root, path=f"{name}/{path}", mode="r")[...])

        image = sitk.ReadImage(nhdr)
        assert image.GetSpacing() == pytest.approx([scale[d] for d in world])
        assert image.GetOrigin() == pytest.approx([moved[d] for d in world])
        voxels = expected if "c" not in axes else np.moveaxis(expected, axes.index("c"), -1)
        assert np.array_equal(sitk.GetArrayFromImage(image), voxels)

        data, header = nrrd.read(nhdr, index_order="C")
        assert np.array_equal(data, expected)
        directions = header["space directions"]
        assert [directions[len(axes) - 1 - d][k] for k, d in enumerate(world)] == pytest.approx(
            [scale[d] for d in world]
        )
        assert list(header["space origin"]) == pytest.approx([moved[d] for d in world])
        assert header["space units"] == [UNITS[axes[d]] for d in world]


def test_the_envi_header_of_a_plane_gives_its_pixel_size_in_metres(mounted):
    _, root, mount = mounted
    for path, scale, _ in _levels(root, "plane"):
        with open(mount.p(f"plane/{path}.hdr")) as header:
            fields = dict(line.split(" = ", 1) for line in header.read().splitlines()[1:])
        x, y, unit = fields["pixel size"].strip("{}").split(", ")
        assert unit == "units=Meters"
        assert (float(x), float(y)) == pytest.approx((scale[1] * 1e-6, scale[0] * 1e-6))


def test_fiji_reads_each_level_of_a_volume_as_a_calibrated_stack(mounted):
    """tifffile reads ImageJ's calibration of the .tif (tiled or strips, as the level's
    chunks allow): the unit, the z spacing, the pixel size, and the voxels."""
    _, root, mount = mounted
    for path, scale, _ in _levels(root, "volume"):
        expected = np.asarray(zarr.open_array(root, path=f"volume/{path}", mode="r")[...])
        with tifffile.TiffFile(mount.p(f"volume/{path}.tif")) as tif:
            meta = tif.imagej_metadata
            assert meta["unit"] == "micron" and meta["slices"] == expected.shape[0]
            assert meta["spacing"] == pytest.approx(scale[0])
            x = tif.pages[0].tags["XResolution"].value
            assert x[0] / x[1] == pytest.approx(1 / scale[2])
            assert np.array_equal(tif.asarray(), expected)


def test_inspect_says_each_level_s_space(mounted):
    version, root, _ = mounted
    found = json.loads(run_cli(["--inspect", "--json", root]).stdout)
    nodes = {n["path"]: n for n in found["nodes"]}
    for name, (axes, _, scale, _) in IMAGES.items():
        first = next(_levels(root, name))[0]
        space = nodes[f"{name}/{first}"]["space"]
        assert space["scale"] == pytest.approx(scale)
        assert [a["name"] for a in space["axes"]] == list(axes)
        assert space["described"].endswith(f"(OME-Zarr {version})")
