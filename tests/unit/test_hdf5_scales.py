"""The dimension scale values of HDF5 layouts (``headers/hdf5``): a tree laid out as
netCDF-C lays out named dimensions, read back through HDF5's dimension scale API
(h5py), h5dump, netCDF-C (netCDF4, ncdump) and xarray's h5netcdf engine."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hdf5_layout import h5dump, write

from zarrmount.headers.hdf5 import (
    OMITTED,
    Array,
    DimensionList,
    FixedText,
    Group,
    ReferenceList,
    hdf5_layout,
)
from zarrmount.headers.hdf5.netcdf4 import Named, netcdf4

NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."


def scale(name: str, users, dimid: int, length: int | None = None) -> dict:
    """A scale's attributes; ``length``: a dimension-only dataset's."""
    shown = name if length is None else f"{NOT_A_VARIABLE}{length:10d}"
    return {
        "CLASS": FixedText("DIMENSION_SCALE"),
        "NAME": FixedText(shown),
        "REFERENCE_LIST": ReferenceList(tuple(users)),
        "_Netcdf4Dimid": np.int32(dimid),
    }


def netcdf_tree() -> tuple[Group, dict[str, np.ndarray]]:
    """x: a coordinate; y and sub/z: dimensions only; sub/w uses the root's x."""
    values = {
        "x": np.array([1.5, 2, 3], ">f8"),
        "v": np.arange(12, dtype="<i4").reshape(4, 3),
        "sub/w": np.ones((2, 3), ">f4"),
    }
    x = Array("x", (3,), values["x"].dtype, attributes=scale("x", [("v", 1), ("sub/w", 1)], 0))
    y = Array("y", (4,), np.dtype(">f4"), attributes=scale("y", [("v", 0)], 1, 4), stored=False)
    v = Array(
        "v",
        (4, 3),
        values["v"].dtype,
        attributes={"DIMENSION_LIST": DimensionList((("y",), ("x",)))},
    )
    z = Array("z", (2,), np.dtype(">f4"), attributes=scale("z", [("sub/w", 0)], 2, 2), stored=False)
    w_dims = DimensionList((("sub/z",), ("x",)))
    w = Array(
        "w", (2, 3), values["sub/w"].dtype, attributes={"DIMENSION_LIST": w_dims, "units": "K"}
    )
    properties = FixedText("version=2,zarrmount=test", 24)
    root = Group(
        "", {"_NCProperties": properties, "title": "t"}, [Group("sub", arrays=[z, w])], [x, y, v]
    )
    return root, values


def test_dimension_scales_read_back_through_the_dimension_scale_api(tmp_path):
    root, values = netcdf_tree()
    path = tmp_path / "t.h5"
    layout = write(path, root, values)
    assert not layout.omitted and [r.path for r in layout.data_regions] == ["v", "x", "sub/w"]
    with h5py.File(path) as f:
        assert [d[0].name for d in f["v"].dims] == ["/y", "/x"]
        assert [d[0].name for d in f["sub/w"].dims] == ["/sub/z", "/x"]
        assert all(h5py.h5ds.is_scale(f[n].id) for n in ("x", "y", "sub/z"))
        assert not h5py.h5ds.is_scale(f["v"].id)
        users = [(f[ref].name, int(axis)) for ref, axis in f["x"].attrs["REFERENCE_LIST"]]
        assert users == [("/v", 1), ("/sub/w", 1)]
        assert f["x"].attrs["REFERENCE_LIST"].dtype.names == ("dataset", "dimension")
        assert f["y"].id.get_offset() is None and f["y"].shape == (4,)
        np.testing.assert_array_equal(f["y"][()], np.zeros(4))
        assert f["y"].attrs["NAME"] == f"{NOT_A_VARIABLE}         4".encode()
        assert f["x"].attrs["_Netcdf4Dimid"] == 0 and f["x"].attrs["_Netcdf4Dimid"].dtype == "<i4"
        for holder, name, size in (
            (f["x"], b"CLASS", 16),
            (f["x"], b"NAME", 2),
            (f, b"_NCProperties", 24),
        ):
            attr = h5py.h5a.open(holder.id, name)
            kind = attr.get_type()
            assert isinstance(kind, h5py.h5t.TypeStringID) and not kind.is_variable_str()
            assert (kind.get_size(), kind.get_strpad(), kind.get_cset()) == (
                size,
                h5py.h5t.STR_NULLTERM,
                h5py.h5t.CSET_ASCII,
            )
            assert attr.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    h5dump(path, "-H", "-A")


def test_netcdf_readers_see_the_named_dimensions(tmp_path):
    root, values = netcdf_tree()
    path = tmp_path / "t.h5"
    write(path, root, values)
    with netCDF4.Dataset(path) as nc:
        assert {n: len(d) for n, d in nc.dimensions.items()} == {"x": 3, "y": 4}
        assert set(nc.variables) == {"x", "v"}
        assert nc["v"].dimensions == ("y", "x") and nc["x"].dimensions == ("x",)
        sub = nc.groups["sub"]
        assert {n: len(d) for n, d in sub.dimensions.items()} == {"z": 2}
        assert sub["w"].dimensions == ("z", "x") and sub["w"].getncattr("units") == "K"
        np.testing.assert_array_equal(nc["x"][:], values["x"])
    ncdump = shutil.which("ncdump")
    if ncdump is None:
        pytest.skip("ncdump (Debian's netcdf-bin) is not installed")
    done = subprocess.run([ncdump, "-h", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "int v(y, x) ;" in done.stdout and "float w(z, x) ;" in done.stdout
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        assert ds["v"].dims == ("y", "x") and list(ds.coords) == ["x"]
        assert ds.attrs == {"title": "t"}
    with xr.open_dataset(path, engine="h5netcdf", group="sub") as ds:
        assert ds["w"].dims == ("z", "x") and ds.sizes == {"z": 2, "x": 3}


def test_scale_values_no_message_holds_are_left_out_never_json(tmp_path):
    users = tuple((f"v{i}", 0) for i in range(5000))  # 16 bytes each: past 64 KiB
    arrays = [
        Array(
            "x",
            (2,),
            np.dtype("<i2"),
            attributes={"REFERENCE_LIST": ReferenceList(users), "NAME": FixedText("é")},
        )
    ]
    layout = hdf5_layout(Group("", arrays=arrays))
    assert {(o.attribute, o.why) for o in layout.omitted} == {
        ("REFERENCE_LIST", "it is more than one attribute message holds"),
        ("NAME", "its text is not ASCII"),
    }
    path = tmp_path / "t.h5"
    write(path, Group("", arrays=arrays), {"x": np.zeros(2, "<i2")})
    with h5py.File(path) as f:
        assert set(f["x"].attrs) == {OMITTED}


# -- any tree of named dimensions -------------------------------------------------------

DIMS = st.sampled_from(["x", "y", "t", "a/b"])


@st.composite
def named_trees(draw, depth=0, prefix=""):
    """Groups of arrays named like dimensions or not, over dimensions of a few names and
    lengths (conflicts included), and the names of each array's dimensions."""
    names: dict[str, Named] = {}
    arrays = []
    for name in draw(st.lists(st.sampled_from(["x", "y", "v", "w", "g"]), unique=True, max_size=4)):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        dtype = draw(st.sampled_from(["<i2", "<U2"]))  # U: left out by the layout
        arrays.append(Array(name, shape, np.dtype(dtype)))
        if draw(st.booleans()):
            dims = tuple(draw(DIMS) for _ in shape)
            names[prefix + name] = Named(dims, "dims")
    groups = []
    if depth < 2:
        taken = {a.name for a in arrays}
        for name in draw(st.lists(st.sampled_from(["g", "h"]), unique=True, max_size=2)):
            if name not in taken:
                group, below = draw(named_trees(depth + 1, f"{prefix}{name}/"))
                groups.append(replace(group, name=name))
                names |= below
    return Group("", {}, groups, arrays), names


@given(named_trees())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_dimensions_make_a_file_netcdf_reads_with_those_it_keeps(drawn):
    root, names = drawn
    made, dropped = netcdf4(root, names, "version=2")
    arrays = dict(expected_arrays(root))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.h5"
        layout = write(path, made, {p: np.zeros(a.shape, a.dtype) for p, a in arrays.items()})
        assert all(o.path not in arrays for o in layout.omitted)
        with netCDF4.Dataset(path) as nc:
            for p, array in arrays.items():
                group, _, name = p.rpartition("/")
                variable = (nc[group] if group else nc).variables.get(name)
                if variable is None:  # a coordinate's scale, hidden only if not a variable
                    raise AssertionError(f"{p} is no variable")
                assert variable.shape == array.shape
                if p in names and p not in dict(dropped):
                    assert variable.dimensions == names[p].dimensions
        h5dump(path, "-H")
    assert all("dimension" in why for _, why in dropped)


def expected_arrays(group: Group, prefix: str = ""):
    for array in group.arrays:
        if array.dtype.kind != "U":
            yield prefix + array.name, array
    for sub in group.groups:
        yield from expected_arrays(sub, f"{prefix}{sub.name}/")
