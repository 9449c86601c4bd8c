"""format/physical.py: each level's physical space, and the NRRD and ENVI lines made of
it. Expected values come from the numbers given to ome-zarr-py's writer, the metadata it
wrote read back with zarr-python, or unit definitions (an inch is 25.4 mm); headers are
read by pynrrd and SimpleITK. Never from the module."""

from __future__ import annotations

import copy
import json
import math

import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import zarr
from hypothesis import given
from hypothesis import strategies as st
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

from zarrmount.format.multiscales import MULTISCALES_UUID, Axis
from zarrmount.format.physical import (
    Space,
    Unspaced,
    describe,
    length_in,
    spaces,
    time_in,
    unit_name,
)
from zarrmount.headers import envi_header, nrrd_header

FORMATS = {"0.4": FormatV04, "0.5": FormatV05}
UNITS = {"t": "millisecond", "z": "micrometer", "y": "micrometer", "x": "nanometer"}
# axes: level 0's shape, and the scale and translation given to the writer
IMAGES = {
    "yx": ((40, 48), (0.25, 0.5), (10.0, -3.0)),
    "cyx": ((2, 40, 48), (1.0, 0.25, 0.5), (0.0, 1.5, 2.5)),
    "zyx": ((12, 40, 48), (2.0, 0.25, 0.5), (-4.0, 1.5, 2.5)),
    "tczyx": ((3, 2, 12, 40, 48), (30.0, 1.0, 2.0, 0.25, 0.5), (100.0, 0.0, 0.5, 0.0, 7.0)),
}


def _written(tmp_path, version: str, axes: str, translated: bool = True) -> tuple[dict, dict]:
    """An image ome-zarr-py wrote (two levels, y and x halved) with the scale given, and
    the translation given as the multiscale's own transform (after each level's), read
    back with zarr-python: the group's attributes and its arrays' shapes and dtypes."""
    fmt = FORMATS[version]()
    shape, scale, moved = IMAGES[axes]
    root = tmp_path / f"{axes}-{version}.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    image = np.zeros(shape, dtype="<u2")
    units = {a: UNITS[a] for a in axes if a in UNITS}
    given = dict(zip(axes, scale, strict=True))
    write_image(image, group, scale_factors=[2], fmt=fmt, axes=axes, scale=given, axes_units=units)
    if translated:
        attributes = group.attrs.asdict()
        _block(attributes)["coordinateTransformations"] = [
            {"type": "scale", "scale": [1.0] * len(axes)},
            {"type": "translation", "translation": list(moved)},
        ]
        group.attrs.update(attributes)
    read = zarr.open_group(root, mode="r")
    return dict(read.attrs), {name: (a.shape, str(a.dtype)) for name, a in read.arrays()}


def _block(attributes: dict) -> dict:
    return (attributes.get("ome") or attributes)["multiscales"][0]


@pytest.mark.parametrize("axes", sorted(IMAGES))
@pytest.mark.parametrize("version", sorted(FORMATS))
def test_each_level_ome_zarr_py_wrote_has_its_scale_translation_and_units(tmp_path, version, axes):
    attributes, arrays = _written(tmp_path, version, axes)
    block = _block(attributes)
    found = spaces(attributes, arrays)
    assert set(found) == {d["path"] for d in block["datasets"]} == set(arrays)
    _, scale, moved = IMAGES[axes]
    first = found[block["datasets"][0]["path"]]
    assert isinstance(first, Space), first
    assert first.scale == scale and first.translation == moved  # as given to the writer
    for dataset in block["datasets"]:
        space = found[dataset["path"]]
        steps = {t["type"]: t[t["type"]] for t in dataset["coordinateTransformations"]}
        assert space.scale == pytest.approx(steps["scale"])
        shifted = [t + m for t, m in zip(steps["translation"], moved, strict=True)]
        assert space.translation == pytest.approx(shifted)
        assert space.convention == f"OME-Zarr {version}" and space.notes == ()
        assert [a.name for a in space.axes] == list(axes)
        assert [a.unit for a in space.axes] == [UNITS.get(a) for a in axes]
        kinds = {"c": "channel", "t": "time"}
        assert [a.type for a in space.axes] == [kinds.get(a, "space") for a in axes]


@pytest.mark.parametrize("version", sorted(FORMATS))
def test_levels_without_translation_start_at_zero(tmp_path, version):
    attributes, arrays = _written(tmp_path, version, "zyx", translated=False)
    first = _block(attributes)["datasets"][0]["path"]
    assert spaces(attributes, arrays)[first].translation == (0.0, 0.0, 0.0)


def test_the_multiscale_transform_is_composed_after_the_dataset_s(tmp_path):
    attributes, arrays = _written(tmp_path, "0.4", "yx", translated=False)
    block = _block(attributes)
    block["coordinateTransformations"] = [
        {"type": "scale", "scale": [3.0, 3.0]},
        {"type": "translation", "translation": [1.0, 2.0]},
    ]
    space = spaces(attributes, arrays)[block["datasets"][0]["path"]]
    # (index * 0.25 + 0) * 3 + 1, (index * 0.5 + 0) * 3 + 2
    assert space.scale == (0.75, 1.5) and space.translation == (1.0, 2.0)


def test_the_inspect_line():
    attributes = _ome(["z", "y", "x"], [0.5, 0.1, 0.1])
    found = spaces(attributes, {"0": ((4, 8, 8), "uint8")})["0"]
    assert describe(found) == "z 0.5 micrometer, y 0.1 micrometer, x 0.1 micrometer (OME-Zarr 0.4)"
    moved = _ome(["c", "y", "x"], [1, 2, 2], translation=[0, 5, 0])
    found = spaces(moved, {"0": ((2, 8, 8), "uint8")})["0"]
    assert describe(found) == "c channels, y 2 micrometer from 5, x 2 micrometer (OME-Zarr 0.4)"
    assert describe(Unspaced("why")) == "none: why"


# --- units ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "unit", "target", "expected"),
    [
        (0.5, "micrometer", "angstrom", 5000.0),
        (0.5, "micrometer", "millimeter", 0.0005),
        (3.0, "nanometer", "angstrom", 30.0),
        (1.0, "inch", "millimeter", 25.4),
        (1.0, "foot", "inch", 12.0),
        (1.0, "mile", "yard", 1760.0),
        (2.0, "kilometer", "meter", 2000.0),
        (1.5, "µm", "nanometer", 1500.0),
        (7.0, "micron", "micrometer", 7.0),
        (1.0, "millimetre", "micrometer", 1000.0),
        (2.0, "Micrometers", "nanometer", 2000.0),
    ],
)
def test_length_in(value, unit, target, expected):
    assert length_in(value, unit, target) == pytest.approx(expected, rel=1e-15)


def test_decimal_lengths_convert_with_one_rounding():
    assert length_in(0.1, "micrometer", "nanometer") == 100.0
    assert length_in(0.3, "millimeter", "micrometer") == 300.0
    assert length_in(0.25, "micrometer", "meter") == 2.5e-07


@pytest.mark.parametrize(
    ("value", "unit", "target", "expected"),
    [
        (2.0, "minute", "second", 120.0),
        (1.0, "hour", "minute", 60.0),
        (1.0, "day", "hour", 24.0),
        (250.0, "millisecond", "second", 0.25),
        (3.0, "ms", "microsecond", 3000.0),
    ],
)
def test_time_in(value, unit, target, expected):
    assert time_in(value, unit, target) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("unit", "target"),
    [("second", "meter"), ("meter", "second"), ("furlong", "meter"), (None, "meter"), ("", "m")],
)
def test_no_length_conversion_between_other_units(unit, target):
    assert length_in(1.0, unit, target) is None


def test_unit_names():
    assert unit_name("micrometer") == "micrometer"
    assert unit_name("µm") == unit_name("μm") == unit_name("um") == "micrometer"
    assert unit_name("Å") == "angstrom"
    assert unit_name("seconds") == "second"
    assert unit_name("parsec") == "parsec"
    assert unit_name("pixel") is None and unit_name(3) is None


# --- bad input -----------------------------------------------------------------------


def _ome(names, scale, translation=None, unit="micrometer", paths=("0",), **extra) -> dict:
    """OME-Zarr 0.4 attributes: one axis per name (c channel, t time, others space), each
    level ``scale`` times 2**k in its space dimensions."""
    kinds = {"c": "channel", "t": "time"}
    axes = []
    for name in names:
        axis = {"name": name, "type": kinds.get(name, "space")}
        if name != "c":
            axis["unit"] = "millisecond" if name == "t" else unit
        axes.append(axis)
    datasets = []
    for k, path in enumerate(paths):
        grown = [s * 2**k if n in "zyx" else s for n, s in zip(names, scale, strict=False)]
        steps = [{"type": "scale", "scale": grown if len(grown) == len(scale) else scale}]
        if translation is not None:
            steps.append({"type": "translation", "translation": translation})
        datasets.append({"path": path, "coordinateTransformations": steps})
    block = {"version": "0.4", "axes": axes, "datasets": datasets, **extra}
    return {"multiscales": [block]}


PYRAMID = {"0": ((4, 32, 32), "uint16"), "1": ((4, 16, 16), "uint16")}


def test_no_multiscales_gives_no_spaces():
    assert spaces({}, PYRAMID) == {}
    assert spaces({"other": 1}, PYRAMID) == {}


@pytest.mark.parametrize("axes", [["y", "x"], ["t", "z", "y", "x"]])
def test_axes_disagreeing_with_the_dimensions_give_no_space(axes):
    attributes = _ome(axes, [1.0, 1.0, 1.0], paths=("0", "1"))
    found = spaces(attributes, PYRAMID)
    for name in PYRAMID:
        assert isinstance(found[name], Unspaced) and "axes" in found[name].reason


def test_a_transform_disagreeing_with_the_dimensions_gives_that_level_no_space():
    attributes = _ome(["z", "y", "x"], [1.0, 0.5, 0.5], paths=("0", "1"))
    attributes["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"] = [1, 2]
    found = spaces(attributes, PYRAMID)
    assert isinstance(found["0"], Space)
    assert isinstance(found["1"], Unspaced) and "not a list of 3 numbers" in found["1"].reason


@pytest.mark.parametrize("bad", [0.0, -0.5, math.nan, math.inf])
def test_a_scale_not_positive_and_finite_gives_that_level_no_space(bad):
    attributes = _ome(["z", "y", "x"], [1.0, 0.5, 0.5], paths=("0", "1"))
    attributes["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"][1] = bad
    attributes = json.loads(json.dumps(attributes))  # as a store's JSON: NaN and Infinity
    found = spaces(attributes, PYRAMID)
    assert isinstance(found["0"], Space)
    assert isinstance(found["1"], Unspaced) and "1 dropped" in found["1"].reason


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_a_bad_scale_on_every_level_gives_none(bad):
    attributes = _ome(["z", "y", "x"], [bad, 0.5, 0.5], paths=("0", "1"))
    found = spaces(attributes, PYRAMID)
    assert all(isinstance(s, Unspaced) for s in found.values()), found


def test_an_unknown_unit_keeps_the_space_without_it():
    attributes = _ome(["z", "y", "x"], [2.0, 0.5, 0.5], unit="furlong")
    space = spaces(attributes, {"0": PYRAMID["0"]})["0"]
    assert space.scale == (2.0, 0.5, 0.5)
    assert [a.unit for a in space.axes] == [None, None, None]
    assert "axis z: unit 'furlong' is not a known space unit" in space.notes


def test_a_unit_of_the_wrong_kind_is_left_out():
    attributes = _ome(["t", "y", "x"], [5.0, 0.5, 0.5])
    attributes["multiscales"][0]["axes"][0]["unit"] = "micrometer"  # a length for time
    attributes["multiscales"][0]["axes"][1]["unit"] = "second"  # a time for space
    space = spaces(attributes, {"0": PYRAMID["0"]})["0"]
    assert [a.unit for a in space.axes] == [None, None, "micrometer"]
    assert len(space.notes) == 2


def test_a_path_that_is_not_an_array_leaves_the_others():
    attributes = _ome(["z", "y", "x"], [1.0, 0.5, 0.5], paths=("0", "missing", "1/x", "1"))
    found = spaces(attributes, PYRAMID)
    assert isinstance(found["0"], Space) and isinstance(found["1"], Space)
    assert set(found) == set(PYRAMID)
    assert found["1"].scale == (8.0, 4.0, 4.0)  # the fourth declared level's own


def test_an_array_not_a_level_has_no_space():
    attributes = _ome(["z", "y", "x"], [1.0, 0.5, 0.5])
    found = spaces(attributes, {**PYRAMID, "labels": ((3,), "int8")})
    assert isinstance(found["0"], Space)
    for name in ("1", "labels"):
        assert isinstance(found[name], Unspaced) and "not one of" in found[name].reason


def test_a_level_that_does_not_shrink_has_no_space():
    arrays = {"0": ((4, 32, 32), "uint16"), "1": ((4, 32, 32), "uint16")}
    found = spaces(_ome(["z", "y", "x"], [1.0, 0.5, 0.5], paths=("0", "1")), arrays)
    assert isinstance(found["0"], Space)
    assert isinstance(found["1"], Unspaced) and "not smaller" in found["1"].reason


def test_of_two_multiscales_blocks_the_first_is_read():
    first = _ome(["z", "y", "x"], [1.0, 0.5, 0.5])["multiscales"][0]
    second = _ome(["z", "y", "x"], [9.0, 9.0, 9.0], paths=("1",))["multiscales"][0]
    found = spaces({"multiscales": [first, second]}, PYRAMID)
    assert found["0"].scale == (1.0, 0.5, 0.5)
    assert "2 multiscales declared, the first read" in found["0"].notes
    assert isinstance(found["1"], Unspaced)


@pytest.mark.parametrize("multiscales", [{}, [], "0", [{"datasets": "0"}], [3]])
def test_a_malformed_multiscales_gives_every_array_a_reason(multiscales):
    found = spaces({"multiscales": multiscales}, PYRAMID)
    assert set(found) == set(PYRAMID)
    assert all(isinstance(s, Unspaced) and s.reason for s in found.values())


def test_ome_zarr_before_0_4_gives_no_scale():
    block = {"version": "0.3", "axes": ["z", "y", "x"], "datasets": [{"path": "0"}]}
    found = spaces({"multiscales": [block]}, {"0": PYRAMID["0"]})
    assert isinstance(found["0"], Unspaced) and "no scale" in found["0"].reason


JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


@given(st.dictionaries(st.sampled_from(["multiscales", "ome", "axes", "spatial:transform"]), JSON))
def test_never_raises(attributes):
    found = spaces(attributes, PYRAMID)
    assert all(isinstance(s, Space | Unspaced) for s in found.values())


@given(st.data())
def test_never_raises_on_mangled_ome_zarr(data):
    attributes = _ome(["t", "z", "y", "x"], [1.0, 1.0, 0.5, 0.5], paths=("0", "1"))
    block = attributes["multiscales"][0]
    target = data.draw(st.sampled_from([block, block["axes"][1], block["datasets"][1]]))
    key = data.draw(st.sampled_from(sorted(target)))
    target[key] = data.draw(JSON)
    arrays = {"0": ((2, 4, 32, 32), "uint16"), "1": ((2, 4, 16, 16), "uint16")}
    spaces(copy.deepcopy(attributes), arrays)


# --- the zarr-conventions multiscales ---------------------------------------------------

CONVENTION = {"uuid": MULTISCALES_UUID, "name": "multiscales"}
LAYOUT = {
    "zarr_conventions": [CONVENTION],
    "multiscales": {
        "layout": [
            {"asset": "0", "transform": {"scale": [1.0, 1.0]}},
            {"asset": "1", "derived_from": "0", "transform": {"scale": [2.0, 2.0]}},
        ]
    },
}
FLAT = {"0": ((32, 32), "uint16"), "1": ((16, 16), "uint16")}


def test_the_convention_gives_each_level_in_the_first_level_s_pixels():
    found = spaces(LAYOUT, FLAT)
    assert found["0"].scale == (1.0, 1.0) and found["1"].scale == (2.0, 2.0)
    assert all(a.unit is None for a in found["1"].axes)
    assert found["1"].convention == "zarr-conventions multiscales"


def test_the_spatial_convention_names_the_axes_and_places_the_pixels():
    # pixel registration: the first pixel's centre is half a pixel in from c, f
    attributes = {**LAYOUT, "spatial:dimensions": ["y", "x"]}
    attributes["spatial:transform"] = [0.5, 0.0, 100.0, 0.0, 0.25, 20.0]
    found = spaces(attributes, FLAT)
    assert [(a.name, a.type) for a in found["0"].axes] == [("y", "space"), ("x", "space")]
    assert found["0"].scale == (0.25, 0.5) and found["0"].translation == (20.125, 100.25)
    assert found["1"].scale == (0.5, 1.0) and found["1"].translation == (20.125, 100.25)
    node = spaces({**attributes, "spatial:registration": "node"}, FLAT)
    assert node["0"].translation == (20.0, 100.0)


def test_a_flipped_spatial_transform_is_not_read():
    attributes = {**LAYOUT, "spatial:dimensions": ["y", "x"]}
    attributes["spatial:transform"] = [1.0, 0.0, 0.0, 0.0, -1.0, 32.0]
    found = spaces(attributes, FLAT)
    assert found["0"].scale == (1.0, 1.0)
    assert any("spatial:transform" in n for n in found["0"].notes)


@pytest.mark.parametrize(
    "crs",
    [
        {"proj:code": "EPSG:32633"},
        {"zarr_conventions_metadata": {"f010a634-3525-416e-9320-8f44b5bc352c": {}}},
    ],
)
def test_a_convention_pyramid_on_a_map_is_not_a_physical_space(crs):
    found = spaces({**LAYOUT, **crs}, FLAT)
    assert all(isinstance(s, Unspaced) and "map" in s.reason for s in found.values())


# --- headers ---------------------------------------------------------------------------


def _space(names: str, scale, translation, units) -> Space:
    kinds = {"c": "channel", "t": "time"}
    axes = tuple(Axis(n, kinds.get(n, "space"), u) for n, u in zip(names, units, strict=True))
    return Space(axes, tuple(scale), tuple(translation), "OME-Zarr 0.4")


HEADERS = {
    "yx": _space("yx", (0.5, 0.25), (3.0, -1.0), ("micrometer", "micrometer")),
    "zyx": _space("zyx", (2.0, 0.5, 0.25), (0.0, 3.0, -1.0), ("micrometer",) * 3),
    "czyx": _space("czyx", (1.0, 2.0, 0.5, 0.25), (0.0, 1.0, 3.0, -1.0), (None, *"mmm")),
    "tczyx": _space(
        "tczyx",
        (5.0, 1.0, 2.0, 0.5, 0.25),
        (10.0, 0.0, 1.0, 3.0, -1.0),
        ("second", None) + ("nanometer",) * 3,
    ),
}


@pytest.mark.parametrize("axes", sorted(HEADERS))
def test_simpleitk_and_pynrrd_read_the_space_of_the_nrrd_header(tmp_path, axes):
    space = HEADERS[axes]
    shape = tuple(range(2, 2 + len(axes)))
    values = np.arange(math.prod(shape), dtype="<u2").reshape(shape)
    values.tofile(tmp_path / "a")
    (tmp_path / "a.nhdr").write_bytes(nrrd_header(shape, values.dtype, "a", space))
    world = [d for d, n in enumerate(axes) if n != "c"][::-1]  # x, y, z, t

    image = sitk.ReadImage(str(tmp_path / "a.nhdr"))
    assert image.GetSpacing() == tuple(space.scale[d] for d in world)
    assert image.GetOrigin() == tuple(space.translation[d] for d in world)
    channel = axes.find("c")
    expected = values if channel < 0 else np.moveaxis(values, channel, -1)
    assert np.array_equal(sitk.GetArrayFromImage(image), expected)

    data, header = nrrd.read(str(tmp_path / "a.nhdr"), index_order="C")
    assert np.array_equal(data, values)
    assert header["space dimension"] == len(world)
    assert np.array_equal(header["space origin"], [space.translation[d] for d in world])
    kinds = {"c": "list", "t": "time"}
    assert header["kinds"] == [kinds.get(n, "domain") for n in reversed(axes)]
    for row, dim in zip(header["space directions"], reversed(range(len(axes))), strict=True):
        if dim in world:
            assert list(row) == [space.scale[dim] if d == dim else 0.0 for d in world]
        else:
            assert np.isnan(row).all()
    if all(space.axes[d].unit for d in world):
        assert header["space units"] == [space.axes[d].unit for d in world]
    else:
        assert "space units" not in header


def test_the_nrrd_header_without_a_space_is_unchanged():
    assert nrrd_header((3, 4), np.dtype("<f4"), "a", None) == nrrd_header(
        (3, 4), np.dtype("<f4"), "a"
    )


def _envi(text: bytes) -> dict[str, str]:
    lines = text.decode("ascii").splitlines()
    assert lines[0] == "ENVI"
    return dict(line.split(" = ", 1) for line in lines[1:] if not line.startswith(";"))


def test_the_envi_header_gives_the_pixel_size_in_metres():
    header = _envi(envi_header((3, 4), np.dtype("<u2"), None, HEADERS["yx"]))
    assert header["pixel size"] == "{2.5e-07, 5e-07, units=Meters}"  # x 0.25 um, y 0.5 um
    header = _envi(envi_header((2, 3, 4), np.dtype("<u2"), None, HEADERS["zyx"]))
    assert header["pixel size"] == "{2.5e-07, 5e-07, units=Meters}"


def test_no_envi_pixel_size_without_a_length_for_both_plane_axes():
    unitless = _space("yx", (0.5, 0.25), (0.0, 0.0), ("micrometer", None))
    assert "pixel size" not in _envi(envi_header((3, 4), np.dtype("<u2"), None, unitless))
    frames = _space("ty", (0.5, 0.25), (0.0, 0.0), ("second", "micrometer"))
    assert "pixel size" not in _envi(envi_header((3, 4), np.dtype("<u2"), None, frames))
