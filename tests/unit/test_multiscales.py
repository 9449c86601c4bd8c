"""format/multiscales.py: the levels of a group's pyramid. Expected paths, shapes and
scales come from stores ome-zarr-py writes (read back with zarr-python), the numbers given
to the writer, the published examples' own words, or rasterio's Affine; never from the
module."""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest
import zarr
from affine import Affine
from hypothesis import given
from hypothesis import strategies as st
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

from zarrmount.format.multiscales import (
    MULTISCALES_UUID,
    Axis,
    NoPyramid,
    Pyramid,
    describe,
    pyramid,
)

# zarr-conventions/multiscales README, "Composition with Domain-Specific Metadata": the
# convention's entry in zarr_conventions (its schema.json's conventionMetadata consts).
CONVENTION_ENTRY = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md",
    "uuid": "d35379db-88df-4056-af3a-620245f8e347",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}

# zarr-conventions/multiscales README, "Direct array layout (COG-style)".
DIRECT_ARRAY_LAYOUT = {
    "layout": [
        {"asset": "0", "transform": {"scale": [1.0, 1.0]}},
        {"asset": "1", "derived_from": "0", "transform": {"scale": [2.0, 2.0]}},
    ]
}

# zarr-conventions/multiscales examples/power-of-2-pyramid.json, its attributes.
POWER_OF_2 = {
    "zarr_conventions": [CONVENTION_ENTRY],
    "multiscales": {
        "layout": [
            {"asset": "0", "transform": {"scale": [1.0, 1.0], "translation": [0.0, 0.0]}},
            {
                "asset": "1",
                "derived_from": "0",
                "transform": {"scale": [2.0, 2.0], "translation": [0.0, 0.0]},
                "resampling_method": "average",
            },
            {
                "asset": "2",
                "derived_from": "1",
                "transform": {"scale": [4.0, 4.0], "translation": [0.0, 0.0]},
                "resampling_method": "average",
            },
        ],
        "resampling_method": "average",
    },
}

# zarr-conventions/multiscales examples/custom-pyramid-levels.json, its layout's assets
# and derivations (transforms left out: only the order is checked).
CUSTOM_LEVELS = [
    {"asset": "full"},
    {"asset": "half", "derived_from": "full", "transform": {"scale": [2.0, 2.0]}},
    {"asset": "quarter", "derived_from": "half", "transform": {"scale": [4.0, 4.0]}},
    {"asset": "eighth", "derived_from": "quarter", "transform": {"scale": [8.0, 8.0]}},
]

# zarr-conventions/multiscales examples/array-based-pyramid.json, its layout.
ARRAY_BASED = [
    {"asset": "0/data", "transform": {"scale": [1.0, 1.0]}},
    {
        "asset": "1/data",
        "derived_from": "0/data",
        "transform": {"scale": [2.0, 2.0], "translation": [0.5, 0.5]},
    },
    {
        "asset": "2/data",
        "derived_from": "1/data",
        "transform": {"scale": [2.0, 2.0], "translation": [0.5, 0.5]},
    },
]

# zarr-conventions/multiscales at f141b8f ("Initial Proposal"), examples/
# power-of-2-pyramid.json: the Zarr conventions framework 0.1.0 form, a
# zarr_conventions_metadata entry keyed by the UUID; scale maps each level's indices
# ("describe how to map from array indices to a coordinate space at each level").
FRAMEWORK_ENTRY = {
    "version": "0.1.0",
    "schema": "https://raw.githubusercontent.com/zarr-experimental/multiscales/refs/tags/v0.1.0/schema.json",
    "name": "Multiscales Attribute Extension",
    "description": "Simple power-of-2 pyramid with 3 resolution levels",
    "spec": "https://github.com/zarr-experimental/multiscales/blob/v0.1.0/README.md",
    "configuration": {
        "version": "0.1.0",
        "layout": [
            {"group": "0"},
            {
                "group": "1",
                "from_group": "0",
                "factors": [2, 2],
                "scale": [2.0, 2.0],
                "translation": [0.0, 0.0],
                "resampling_method": "average",
            },
            {
                "group": "2",
                "from_group": "1",
                "factors": [2, 2],
                "scale": [4.0, 4.0],
                "translation": [0.0, 0.0],
                "resampling_method": "average",
            },
        ],
        "resampling_method": "average",
    },
}

# ome/ngff 0.4/examples/valid_strict/multiscales_example.json (the 0.4 spec's example).
OME_SPEC_EXAMPLE = {
    "multiscales": [
        {
            "version": "0.4",
            "name": "example",
            "axes": [
                {"name": "t", "type": "time", "unit": "millisecond"},
                {"name": "c", "type": "channel"},
                {"name": "z", "type": "space", "unit": "micrometer"},
                {"name": "y", "type": "space", "unit": "micrometer"},
                {"name": "x", "type": "space", "unit": "micrometer"},
            ],
            "datasets": [
                {
                    "path": "0",
                    "coordinateTransformations": [
                        {
                            "description": (
                                "the voxel size for the first scale level (0.5 micrometer)"
                            ),
                            "type": "scale",
                            "scale": [1.0, 1.0, 0.5, 0.5, 0.5],
                        }
                    ],
                },
                {
                    "path": "1",
                    "coordinateTransformations": [
                        {
                            "description": (
                                "the voxel size for the second scale level (downscaled by a "
                                "factor of 2 -> 1 micrometer)"
                            ),
                            "type": "scale",
                            "scale": [1.0, 1.0, 1.0, 1.0, 1.0],
                        }
                    ],
                },
                {
                    "path": "2",
                    "coordinateTransformations": [
                        {
                            "description": (
                                "the voxel size for the third scale level (downscaled by a "
                                "factor of 4 -> 2 micrometer)"
                            ),
                            "type": "scale",
                            "scale": [1.0, 1.0, 2.0, 2.0, 2.0],
                        }
                    ],
                },
            ],
            "coordinateTransformations": [
                {
                    "description": (
                        "the time unit (0.1 milliseconds), which is the same for each scale level"
                    ),
                    "type": "scale",
                    "scale": [0.1, 1.0, 1.0, 1.0, 1.0],
                }
            ],
            "type": "gaussian",
            "metadata": {
                "description": (
                    "the fields in metadata depend on the downscaling implementation. Here, "
                    "the parameters passed to the skimage function are given"
                ),
                "method": "skimage.transform.pyramid_gaussian",
                "version": "0.16.1",
                "args": "[true]",
                "kwargs": {"multichannel": True},
            },
        }
    ]
}
SPEC_SHAPES = {"0": (3, 2, 16, 64, 64), "1": (3, 2, 8, 32, 32), "2": (3, 2, 4, 16, 16)}


def _arrays(shapes: dict, dtype: str = "uint16") -> dict:
    return {name: (shape, dtype) for name, shape in shapes.items()}


def _ome(*datasets, **block) -> dict:
    return {"multiscales": [{"version": "0.4", "datasets": list(datasets), **block}]}


def _scaled(path, scale, translation=None) -> dict:
    steps = [{"type": "scale", "scale": scale}]
    if translation is not None:
        steps.append({"type": "translation", "translation": translation})
    return {"path": path, "coordinateTransformations": steps}


TWO_D = _arrays({"0": (64, 64), "1": (32, 32), "2": (16, 16)})
OME_2D = _ome(_scaled("0", [1, 1]), _scaled("1", [2, 2]), _scaled("2", [4, 4]))


def _layout(layout, conventions=(CONVENTION_ENTRY,)) -> dict:
    return {"zarr_conventions": list(conventions), "multiscales": {"layout": layout}}


def _paths(found) -> list[str]:
    assert isinstance(found, Pyramid), found
    return [level.path for level in found.levels]


# --- OME-Zarr stores written by ome-zarr-py ---------------------------------------------


@pytest.mark.parametrize("fmt", [FormatV04(), FormatV05()], ids=["0.4", "0.5"])
def test_a_store_ome_zarr_py_wrote(tmp_path, fmt):
    image = np.arange(2 * 37 * 50, dtype=np.uint16).reshape(2, 37, 50)
    store = tmp_path / "image.zarr"
    group = zarr.open_group(store, mode="w", zarr_format=fmt.zarr_format)
    units = {"y": "micrometer", "x": "micrometer"}
    write_image(
        image,
        group,
        scale_factors=(2, 4),
        fmt=fmt,
        axes="cyx",
        scale={"c": 1.0, "y": 0.5, "x": 0.25},
        axes_units=units,
    )
    read = zarr.open_group(store, mode="r")
    assert read.metadata.zarr_format == fmt.zarr_format
    attributes = dict(read.attrs)
    arrays = {name: (a.shape, str(a.dtype)) for name, a in read.arrays()}
    by_size = sorted(arrays, key=lambda name: math.prod(arrays[name][0]), reverse=True)
    assert len(by_size) == 3

    found = pyramid(attributes, arrays)

    assert _paths(found) == by_size
    assert [level.shape for level in found.levels] == [arrays[n][0] for n in by_size]
    assert found.levels[0].shape == image.shape
    assert found.levels[0].scale == (1.0, 0.5, 0.25)  # as given to the writer
    block = (attributes["ome"] if fmt.zarr_format == 3 else attributes)["multiscales"][0]
    assert "coordinateTransformations" not in block  # each level is its dataset's alone
    written = {d["path"]: d["coordinateTransformations"] for d in block["datasets"]}
    for level in found.levels:
        steps = {step["type"]: step[step["type"]] for step in written[level.path]}
        assert level.scale == pytest.approx(steps["scale"])
        assert level.translation == pytest.approx(steps["translation"])
    assert found.axes == (
        Axis("c", "channel"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    )
    assert found.convention == f"OME-Zarr {fmt.version}" and found.notes == ()
    assert describe(found) == f"levels {', '.join(by_size)} (OME-Zarr {fmt.version})"


def test_the_ome_spec_example_composes_the_multiscale_transform():
    found = pyramid(OME_SPEC_EXAMPLE, _arrays(SPEC_SHAPES))
    assert _paths(found) == ["0", "1", "2"]
    # the example's words: voxels of 0.5, 1 and 2 micrometer, and a time unit of 0.1 ms
    # "the same for each scale level"
    assert [level.scale for level in found.levels] == [
        pytest.approx((0.1, 1.0, 0.5, 0.5, 0.5)),
        pytest.approx((0.1, 1.0, 1.0, 1.0, 1.0)),
        pytest.approx((0.1, 1.0, 2.0, 2.0, 2.0)),
    ]
    assert all(level.translation is None for level in found.levels)
    assert [axis.name for axis in found.axes] == ["t", "c", "z", "y", "x"]
    assert found.axes[0] == Axis("t", "time", "millisecond")


def test_translations_compose_as_ome_zarr_defines():
    # dataset: x*2 + 1, then the multiscale's x*3 + 10: (2x + 1)*3 + 10
    dataset = _scaled("0", [2.0, 2.0], [1.0, 1.0])
    outer = [
        {"type": "scale", "scale": [3.0, 3.0]},
        {"type": "translation", "translation": [10, 10]},
    ]
    found = pyramid(_ome(dataset, coordinateTransformations=outer), TWO_D)
    expected = (
        Affine.translation(10, 10) @ Affine.scale(3) @ Affine.translation(1, 1) @ Affine.scale(2)
    )
    assert found.levels[0].scale == (expected.a, expected.e)
    assert found.levels[0].translation == (expected.c, expected.f)


# --- the zarr-conventions multiscales convention ----------------------------------------


def test_the_readmes_direct_array_layout():
    found = pyramid(
        {"zarr_conventions": [CONVENTION_ENTRY], "multiscales": DIRECT_ARRAY_LAYOUT},
        _arrays({"1": (256, 256), "0": (512, 512)}, "float32"),
    )
    assert _paths(found) == ["0", "1"]
    assert [level.scale for level in found.levels] == [(1.0, 1.0), (2.0, 2.0)]
    assert found.convention == "zarr-conventions multiscales" and found.axes is None


def test_the_power_of_2_example():
    found = pyramid(POWER_OF_2, _arrays({"2": (25, 25), "0": (100, 100), "1": (50, 50)}))
    assert _paths(found) == ["0", "1", "2"]
    assert [level.shape for level in found.levels] == [(100, 100), (50, 50), (25, 25)]
    assert found.levels[1].scale == (2.0, 2.0)
    assert all(level.translation == (0.0, 0.0) for level in found.levels)


def test_the_custom_levels_example_in_any_declared_order():
    shapes = {"eighth": (128, 128), "full": (1024, 1024), "quarter": (256, 256)}
    shapes["half"] = (512, 512)
    layout = list(reversed(CUSTOM_LEVELS))
    found = pyramid(_layout(layout), _arrays(shapes))
    assert _paths(found) == ["full", "half", "quarter", "eighth"]


def test_derived_from_chains_compose_to_the_base_level():
    # array-based-pyramid.json's transforms, its levels as arrays of the group
    layout = copy.deepcopy(ARRAY_BASED)
    for entry in layout:
        entry["asset"] = entry["asset"].split("/")[0]
        if "derived_from" in entry:
            entry["derived_from"] = entry["derived_from"].split("/")[0]
    found = pyramid(_layout(layout), TWO_D)
    # level 2 -> level 1 -> level 0 pixels, each step x*2 + 0.5
    step = Affine.translation(0.5, 0.5) @ Affine.scale(2)
    expected = step @ step
    assert found.levels[2].scale == (expected.a, expected.e)
    assert found.levels[2].translation == (expected.c, expected.f)
    assert found.levels[0].translation is None


def test_the_framework_form_and_its_drafted_fields():
    attributes = {
        "zarr_conventions_version": "0.1.0",
        "zarr_conventions_metadata": {MULTISCALES_UUID: FRAMEWORK_ENTRY},
    }
    found = pyramid(attributes, _arrays({"0": (100, 100), "1": (50, 50), "2": (25, 25)}))
    assert _paths(found) == ["0", "1", "2"]
    # scale is each level's own (the draft's "factors" are the steps between them)
    assert [level.scale for level in found.levels] == [None, (2.0, 2.0), (4.0, 4.0)]
    assert found.convention == "zarr-conventions multiscales (conventions 0.1.0)"


def test_nested_assets_are_not_levels_of_the_group():
    found = pyramid(_layout(ARRAY_BASED), TWO_D)
    assert isinstance(found, NoPyramid)
    assert "'0/data' is not an array directly in this group" in found.reason


def test_group_based_levels_are_not_arrays_of_the_group():
    found = pyramid(POWER_OF_2, {})
    assert isinstance(found, NoPyramid)
    assert "'0' is not an array of this group" in found.reason


def test_the_convention_must_be_named_in_zarr_conventions():
    found = pyramid({"multiscales": DIRECT_ARRAY_LAYOUT}, TWO_D)
    assert isinstance(found, NoPyramid) and "zarr_conventions" in found.reason
    other = {"uuid": "f17cb550-5864-4468-aeb7-f3180cfb622f", "name": "proj:"}
    found = pyramid(_layout(DIRECT_ARRAY_LAYOUT["layout"], [other]), TWO_D)
    assert isinstance(found, NoPyramid)
    by_schema = {"schema_url": CONVENTION_ENTRY["schema_url"]}
    assert _paths(pyramid(_layout(DIRECT_ARRAY_LAYOUT["layout"], [by_schema]), TWO_D))


def test_a_broken_derived_from_chain_leaves_the_scale_unknown():
    layout = [
        {"asset": "0"},
        {"asset": "1", "derived_from": "9", "transform": {"scale": [2, 2]}},
        {"asset": "2", "derived_from": "2", "transform": {"scale": [4, 4]}},  # itself
    ]
    found = pyramid(_layout(layout), TWO_D)
    assert _paths(found) == ["0", "1", "2"]
    assert [level.scale for level in found.levels] == [None, None, None]
    assert any("derived_from" in note for note in found.notes)


# --- bad input, one rule each -------------------------------------------------------------


def test_no_multiscales_at_all():
    assert pyramid({}, TWO_D) is None
    assert pyramid({"ome": {"version": "0.5", "plate": {}}}, TWO_D) is None
    assert describe(None) == "no multiscales"


def test_levels_come_full_resolution_first_whatever_the_declared_order():
    datasets = list(reversed(OME_2D["multiscales"][0]["datasets"]))
    found = pyramid(_ome(*datasets), TWO_D)
    assert _paths(found) == ["0", "1", "2"]
    assert [level.scale for level in found.levels] == [(1, 1), (2, 2), (4, 4)]


def test_a_single_level_is_a_pyramid_of_one():
    found = pyramid(_ome(_scaled("./0", [1, 1])), TWO_D)
    assert _paths(found) == ["0"] and found.notes == ()
    assert describe(found) == "levels 0 (OME-Zarr 0.4)"


@pytest.mark.parametrize("path", ["a/b", "0/1", "../0", "/0", ".", "", 0, None])
def test_a_path_not_directly_in_the_group_drops_its_level(path):
    dataset = _scaled(path, [2, 2])
    found = pyramid(_ome(_scaled("0", [1, 1]), dataset), TWO_D)
    assert _paths(found) == ["0"]
    assert found.notes[0].startswith("level 1 dropped: ")


def test_a_dataset_without_path_or_not_an_object_drops():
    found = pyramid(_ome(_scaled("0", [1, 1]), {"coordinateTransformations": []}, "1"), TWO_D)
    assert _paths(found) == ["0"]
    assert found.notes == ("level 1 dropped: no path", "level 2 dropped: no path")


def test_a_path_naming_no_array_or_declared_twice_drops():
    found = pyramid(_ome(_scaled("0", [1, 1]), _scaled("7", [2, 2]), _scaled("0", [2, 2])), TWO_D)
    assert _paths(found) == ["0"]
    assert "'7' is not an array of this group" in found.notes[0]
    assert "'0' is declared twice" in found.notes[1]


def test_another_number_of_dimensions_or_dtype_drops():
    arrays = {"0": ((64, 64), "uint16"), "1": ((3, 32, 32), "uint16")}
    arrays["2"] = ((16, 16), "float32")
    found = pyramid(OME_2D, arrays)
    assert _paths(found) == ["0"]
    assert "1 dropped: 3 dimensions where 0 has 2" in found.notes
    assert "2 dropped: dtype float32 where 0 has uint16" in found.notes


@pytest.mark.parametrize("shape", [(64, 64), (32, 80), (65, 1)])
def test_a_level_not_smaller_than_the_one_before_drops(shape):
    arrays = _arrays({"0": (64, 64), "1": shape, "2": (16, 16)})
    found = pyramid(OME_2D, arrays)
    assert _paths(found) == ["0", "2"]
    assert found.notes[0].startswith("1 dropped: shape")


def test_more_than_one_multiscales_reads_the_first():
    second = _ome(_scaled("1", [1, 1]))["multiscales"][0]
    attributes = {"multiscales": [*OME_2D["multiscales"], second]}
    found = pyramid(attributes, TWO_D)
    assert _paths(found) == ["0", "1", "2"]
    assert found.notes == ("2 multiscales declared, the first read",)


@pytest.mark.parametrize(
    "multiscales",
    [None, "0", {}, [], [None], [{}], [{"datasets": "0"}], [{"datasets": []}]],
)
def test_a_malformed_block_is_no_pyramid(multiscales):
    found = pyramid({"multiscales": multiscales}, TWO_D)
    assert isinstance(found, NoPyramid) and found.reason
    assert describe(found).startswith("no pyramid: ")


@pytest.mark.parametrize(
    "steps",
    [
        [{"type": "scale", "scale": [2]}],
        [{"type": "scale", "scale": [2, 2, 2]}],
        [{"type": "scale", "scale": [0, 2]}],
        [{"type": "scale", "scale": [-2, 2]}],
        [{"type": "scale", "scale": [float("nan"), 2]}],
        [{"type": "scale", "scale": [float("inf"), 2]}],
        [{"type": "scale", "scale": [True, 2]}],
        [{"type": "scale", "scale": ["2", 2]}],
        [{"type": "scale", "scale": [10**400, 2]}],
        [{"type": "scale", "scale": "2"}],
        [{"type": "scale"}],
        [{"type": "translation", "translation": [float("nan"), 0]}],
        [{"type": "scale", "path": "scale.bin"}],
        [{"type": "affine", "affine": [[1, 0, 0], [0, 1, 0]]}],
        ["scale"],
        {"type": "scale", "scale": [2, 2]},
    ],
)
def test_a_transform_that_does_not_read_drops_its_level(steps):
    bad = {"path": "1", "coordinateTransformations": steps}
    found = pyramid(_ome(_scaled("0", [1, 1]), bad, _scaled("2", [4, 4])), TWO_D)
    assert _paths(found) == ["0", "2"]
    assert found.notes[0].startswith("1 dropped: ")


def test_a_bad_multiscale_transform_drops_every_level():
    outer = [{"type": "scale", "scale": [0.0, 1.0]}]
    found = pyramid(
        {"multiscales": [{**OME_2D["multiscales"][0], "coordinateTransformations": outer}]}, TWO_D
    )
    assert isinstance(found, NoPyramid) and "scale" in found.reason


def test_a_scale_that_overflows_when_composed_drops():
    outer = [{"type": "scale", "scale": [1e308, 1e308]}]
    found = pyramid(_ome(_scaled("0", [1e308, 1]), coordinateTransformations=outer), TWO_D)
    assert isinstance(found, NoPyramid) and "not finite" in found.reason


def test_ome_zarr_before_0_4_has_no_transforms():
    attributes = {
        "multiscales": [
            {"version": "0.3", "axes": ["y", "x"], "datasets": [{"path": "0"}, {"path": "1"}]}
        ]
    }
    found = pyramid(attributes, TWO_D)
    assert _paths(found) == ["0", "1"] and found.convention == "OME-Zarr 0.3"
    assert found.levels[1].scale is None and found.axes == (Axis("y"), Axis("x"))


@pytest.mark.parametrize("axes", [[{"name": "x"}], "yx", [{"type": "space"}, {"name": "x"}]])
def test_axes_that_do_not_fit_are_left_out(axes):
    found = pyramid(_ome(*OME_2D["multiscales"][0]["datasets"], axes=axes), TWO_D)
    assert _paths(found) == ["0", "1", "2"] and found.axes is None
    assert found.notes == ("axes not read: not 2 named axes",)


def test_a_declaration_that_fails_gives_way_to_the_next():
    attributes = {"ome": {"version": "0.5", "multiscales": "bad"}, **OME_2D}
    found = pyramid(attributes, TWO_D)
    assert _paths(found) == ["0", "1", "2"] and found.convention == "OME-Zarr 0.4"
    assert found.notes[0].startswith("OME-Zarr 0.5 multiscales: ")
    attributes = {"ome": {"version": "0.5", **OME_2D}, **_layout(ARRAY_BASED)}
    found = pyramid(attributes, TWO_D)
    assert found.convention == "OME-Zarr 0.5"
    assert found.notes == ("zarr-conventions multiscales layout also declared, not read",)


# --- properties ------------------------------------------------------------------------


@st.composite
def _valid_pyramids(draw):
    """Levels named by how many halvings they are from a base shape, in a random order."""
    base = draw(st.lists(st.integers(32, 300), min_size=2, max_size=3))
    count = draw(st.integers(1, 5))
    shapes = {str(i): tuple(math.ceil(n / 2**i) for n in base) for i in range(count)}
    order = draw(st.permutations(sorted(shapes)))
    return shapes, list(order)


def _halved(name: str, ndim: int) -> dict:
    """Level ``name`` of the convention's layout, half the size of the level before."""
    if name == "0":
        return {"asset": name}
    step = {"scale": [2.0] * ndim}
    return {"asset": name, "derived_from": str(int(name) - 1), "transform": step}


@given(_valid_pyramids(), st.booleans())
def test_any_declared_order_comes_back_full_resolution_first(drawn, convention):
    shapes, order = drawn
    ndim = len(shapes["0"])
    if convention:
        attributes = _layout([_halved(name, ndim) for name in order])
    else:
        attributes = _ome(*(_scaled(name, [2.0 ** int(name)] * ndim) for name in order))
    found = pyramid(attributes, _arrays(shapes))
    assert _paths(found) == [str(i) for i in range(len(shapes))]
    assert [level.shape for level in found.levels] == [shapes[str(i)] for i in range(len(shapes))]
    assert found.notes == ()
    for i, level in enumerate(found.levels):
        assert level.scale == (None if convention and i == 0 else (2.0**i,) * ndim)


# fmt: off
_KEYS = [
    "multiscales", "ome", "version", "datasets", "path", "coordinateTransformations", "type",
    "scale", "translation", "axes", "name", "unit", "layout", "asset", "derived_from",
    "transform", "group", "from_group", "zarr_conventions", "uuid", "schema_url",
    "zarr_conventions_metadata", "configuration", MULTISCALES_UUID, "0", "1",
]
# fmt: on
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**400), 10**400)
    | st.floats()
    | st.sampled_from([*_KEYS, "identity", "./0", "0/1", "2", "s0"])
    | st.text(max_size=3)
)
JSON = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=2), inner, max_size=5)
    ),
    max_leaves=40,
)
_SHAPES = st.lists(st.integers(0, 9), max_size=3).map(tuple)
ARRAYS = st.dictionaries(
    st.sampled_from(["0", "1", "2", "s0", "a"]),
    st.tuples(_SHAPES, st.sampled_from(["uint8", "float32"])),
    max_size=4,
)


_NAMES = st.sampled_from(["0", "1", "2", "./1", "a/b", "s0"])
_NUMBERS = st.lists(st.integers(-1, 4) | st.floats(), max_size=3)
_STEP = st.fixed_dictionaries(
    {"type": st.sampled_from(["scale", "translation", "identity", "affine"])},
    optional={"scale": _NUMBERS | JSON, "translation": _NUMBERS | JSON},
)
_TRANSFORMS = st.lists(_STEP, max_size=3) | JSON
_DATASET = st.fixed_dictionaries(
    {"path": _NAMES | JSON}, optional={"coordinateTransformations": _TRANSFORMS}
)
_BLOCK_EXTRAS = st.fixed_dictionaries(
    {},
    optional={
        "axes": st.lists(st.sampled_from(["y", "x"])) | JSON,
        "coordinateTransformations": _TRANSFORMS,
    },
)
NEAR_OME = st.builds(
    lambda datasets, extras: {"multiscales": [{"datasets": datasets, **extras}]},
    st.lists(_DATASET | JSON, max_size=4),
    _BLOCK_EXTRAS,
)
_RELATIVE = st.fixed_dictionaries({}, optional={"scale": _NUMBERS, "translation": _NUMBERS})
_ENTRY = st.fixed_dictionaries(
    {"asset": _NAMES | JSON},
    optional={"derived_from": _NAMES | JSON, "transform": _RELATIVE | JSON},
)
NEAR_LAYOUT = st.lists(_ENTRY | JSON, max_size=4).map(_layout)
_SHAPES2 = st.tuples(st.integers(1, 9), st.integers(1, 9))
NEAR_ARRAYS = st.dictionaries(
    st.sampled_from(["0", "1", "2", "s0"]),
    st.tuples(_SHAPES2 | _SHAPES, st.sampled_from(["uint8", "uint8", "float32"])),
    max_size=4,
)


@given(
    st.dictionaries(st.sampled_from(_KEYS), JSON, max_size=4) | NEAR_OME | NEAR_LAYOUT,
    ARRAYS | NEAR_ARRAYS,
)
def test_never_raises_on_any_json(attributes, arrays):
    found = pyramid(attributes, arrays)
    assert found is None or isinstance(found, NoPyramid | Pyramid)
    assert isinstance(describe(found), str)
    if isinstance(found, Pyramid):
        shapes = [level.shape for level in found.levels]
        assert all(arrays[level.path][0] == level.shape for level in found.levels)
        for big, small in zip(shapes, shapes[1:], strict=False):
            assert len(big) == len(small) and small != big
            assert all(s <= b for s, b in zip(small, big, strict=True))


def test_never_raises_on_shuffled_and_mangled_published_examples():
    rng = random.Random(43)
    examples = [POWER_OF_2, OME_SPEC_EXAMPLE, _layout(ARRAY_BASED)]
    for _ in range(200):
        attributes = copy.deepcopy(rng.choice(examples))
        _mangle(attributes, rng)
        found = pyramid(attributes, _arrays(SPEC_SHAPES))
        assert found is None or isinstance(found, NoPyramid | Pyramid)


def _mangle(node, rng: random.Random) -> None:
    """Replace one value somewhere in ``node`` with something of the wrong kind."""
    while isinstance(node, dict | list) and node:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = rng.choice(keys)
        if rng.random() < 0.3 or not isinstance(node[key], dict | list):
            node[key] = rng.choice([None, "x", -1, float("nan"), [], {}, [[]]])
            return
        node = node[key]
