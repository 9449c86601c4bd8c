"""A Zarr group's HDF5 file as netCDF-4 (``headers/hdf5_group`` with ``hdf5/netcdf4``):
stores written by xarray, read back from the file by xarray's h5netcdf engine, netCDF-C
(netCDF4, ncdump), h5py and h5dump; expected values are xarray's reading the store."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from test_hdf5_group import write_file
from test_hdf5_layout import h5dump

from zarrmount.format.v2 import parse_array
from zarrmount.headers.hdf5 import OMITTED
from zarrmount.headers.hdf5_group import Entry, h5_file


def ncdump_header(path: Path) -> str:
    ncdump = shutil.which("ncdump")
    if ncdump is None:
        pytest.skip("ncdump (Debian's netcdf-bin) is not installed")
    done = subprocess.run([ncdump, "-h", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def dataset(seed: int = 0) -> xr.Dataset:
    """Coordinates (one of times), a dimension without one, NaNs masked, a string
    variable (no HDF5 type holds Zarr's variable-length strings), a scalar."""
    rng = np.random.default_rng(seed)
    temp = rng.normal(280, 5, (2, 3, 4)).astype("f4")
    temp[0, 0, 0] = np.nan
    counts = rng.integers(0, 100, (3, 4)).astype("i2")
    return xr.Dataset(
        {
            "temp": (("time", "y", "x"), temp, {"units": "K", "long_name": "température"}),
            "counts": (("y", "x"), counts, {"flags": [1, 2]}),
            "band": (("band",), np.arange(5, dtype="u1")[::-1]),
            "mask": (("y", "band"), rng.integers(0, 2, (3, 5)).astype(bool)),
            "label": (("x",), np.array(["a", "bb", "c", "dd"], dtype=object)),
            "scale": ((), 1.5),
        },
        coords={
            "time": pd.date_range("2020-01-01", periods=2),
            "y": ("y", np.linspace(0, 1, 3), {"axis": "Y"}),
            "x": np.arange(4, dtype="i4") * 10,
        },
        attrs={"title": "test", "version": 2},
    )


def omitted_names(omitted: list[tuple[str, str]], group: str = "") -> list[str]:
    prefix = f"{group}/" if group else ""
    return [
        p[len(prefix) :] for p, _ in omitted if p.startswith(prefix) and "/" not in p[len(prefix) :]
    ]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_reads_the_file_as_it_reads_the_store(tmp_path, zarr_format):
    store = tmp_path / "s.zarr"
    dataset().to_zarr(store, zarr_format=zarr_format, consolidated=False)
    path = tmp_path / "s.h5"
    made = write_file(path, store)
    assert [p for p, _ in made.omitted] == ["label"]  # strings
    expected = xr.open_zarr(store, consolidated=False).drop_vars(omitted_names(made.omitted))
    with xr.open_dataset(path, engine="h5netcdf") as got:
        assert got.attrs.pop(OMITTED) == "'label': " + made.omitted[0][1]
        xr.testing.assert_identical(got.load(), expected.load())
    with netCDF4.Dataset(path) as nc:
        sizes = {n: len(d) for n, d in nc.dimensions.items()}
        assert sizes == {"time": 2, "y": 3, "x": 4, "band": 5}
        assert nc["temp"].dimensions == ("time", "y", "x") and nc["mask"].dimensions == (
            "y",
            "band",
        )
        assert "band" in nc.variables and "label" not in nc.variables
    header = ncdump_header(path)
    assert "float temp(time, y, x) ;" in header and "\tband = 5 ;" in header
    with h5py.File(path) as f:
        assert "_ARRAY_DIMENSIONS" not in f["temp"].attrs
        assert [d[0].name for d in f["mask"].dims] == ["/y", "/band"]
    h5dump(path, "-H")


def test_a_dimension_without_a_coordinate_is_a_dataset_with_no_storage(tmp_path):
    store = tmp_path / "s.zarr"
    xr.Dataset({"v": (("t", "c"), np.ones((3, 2)))}).to_zarr(
        store, zarr_format=2, consolidated=False
    )
    path = tmp_path / "s.h5"
    write_file(path, store)
    with xr.open_dataset(path, engine="h5netcdf") as got:
        xr.testing.assert_identical(got.load(), xr.open_zarr(store, consolidated=False).load())
        assert not got.coords and got.sizes == {"t": 3, "c": 2}
    with h5py.File(path) as f:
        assert sorted(f) == ["c", "t", "v"] and f["t"].id.get_offset() is None
    with netCDF4.Dataset(path) as nc:
        assert set(nc.variables) == {"v"} and nc["v"].dimensions == ("t", "c")


def tree() -> xr.DataTree:
    """Coordinates at the root used below, a group's own dimension and coordinate, and
    a dimension of one name and two lengths in sibling groups."""
    root = xr.Dataset({"top": (("x",), np.arange(3.0))}, coords={"x": [10, 20, 30]})
    sub = xr.Dataset(
        {"v": (("x", "z"), np.arange(6.0).reshape(3, 2)), "w": (("n",), np.arange(4, dtype="i8"))},
        coords={"z": ("z", [0.5, 1.5], {"units": "m"})},
        attrs={"group": "sub"},
    )
    other = xr.Dataset({"u": (("n",), np.arange(7, dtype="f4"))})
    deep = xr.Dataset({"d": (("z", "x"), np.ones((2, 3), "f4"))})
    return xr.DataTree.from_dict({"/": root, "/sub": sub, "/other": other, "/sub/deep": deep})


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_every_group_of_a_datatree_reads_as_xarray_reads_the_store(tmp_path, zarr_format):
    store = tmp_path / "t.zarr"
    tree().to_zarr(store, zarr_format=zarr_format, consolidated=False)
    for group in ("", "sub", "sub/deep", "other"):
        path = tmp_path / f"{group.replace('/', '_') or 'root'}.h5"
        made = write_file(path, store, group)
        assert made.omitted == []
        for below in ("", "deep") if group == "sub" else ("",):
            at = "/".join(p for p in (group, below) if p) or None
            expected = xr.open_zarr(store, group=at, consolidated=False).load()
            with xr.open_dataset(path, engine="h5netcdf", group=below or None) as got:
                xr.testing.assert_identical(got.load(), expected)
        with netCDF4.Dataset(path) as nc:
            assert nc.groups.keys() == set(zarr.open_group(store, path=group or None).group_keys())
        ncdump_header(path)
        h5dump(path, "-H")
    with netCDF4.Dataset(tmp_path / "root.h5") as nc:
        sub, deep = nc["sub"], nc["sub/deep"]
        assert sub["v"].dimensions == ("x", "z") and deep["d"].dimensions == ("z", "x")
        assert set(nc.dimensions) == {"x"} and set(sub.dimensions) == {"z", "n"}
        assert len(sub.dimensions["n"]) == 4 and len(nc["other"].dimensions["n"]) == 7
        dimids = [d._dimid for g in (nc, sub, deep, nc["other"]) for d in g.dimensions.values()]
        assert len(set(dimids)) == len(dimids)


def conflicts(store: Path) -> None:
    """Dimensions netCDF-4 cannot have: two lengths in a group, a name taken."""
    root = zarr.open_group(store, mode="w", zarr_format=3)
    for name, shape, dims in [
        ("a", (3,), ["n"]),
        ("b", (4,), ["n"]),  # n has two lengths here
        ("taken", (2, 2), ["taken", "k"]),  # not its coordinate: the name is taken
        ("c", (2,), ["taken"]),
        ("d", (2, 2), ["k", "k"]),  # a square: one dimension twice
        ("e", (2,), ["bad/name"]),
        ("f", (2, 3), ["k", "k"]),
    ]:
        root.create_array(name, shape=shape, dtype="i2", dimension_names=dims)[...] = 1


def test_dimensions_netcdf_cannot_have_are_left_out_with_the_reason(tmp_path):
    store = tmp_path / "c.zarr"
    conflicts(store)
    path = tmp_path / "c.h5"
    made = write_file(path, store)
    why = dict(made.omitted)
    assert set(why) == {"b", "taken", "c", "e", "f"}
    assert "'n'" in why["b"] and "length 3" in why["b"] and "taken" in why["c"]
    assert "refuses" in why["e"] and "length 2" in why["f"]
    with netCDF4.Dataset(path) as nc:
        assert nc["a"].dimensions == ("n",) and nc["d"].dimensions == ("k", "k")
        assert nc["b"].dimensions[0].startswith("phony_dim")
        assert why["b"] in nc["b"].getncattr(OMITTED)
    ncdump_header(path)
    h5dump(path, "-H")


def test_a_dimension_of_thousands_of_arrays_keeps_no_list_of_them_and_says_so(tmp_path):
    """A scale's list of users past one attribute message (4,000 of them) is left out:
    readers find dimensions from the users' own lists."""
    zarray = {"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<f4"}
    zarray |= {"compressor": None, "fill_value": "NaN", "order": "C", "filters": None}
    attributes = {"units": "K", "_ARRAY_DIMENSIONS": ["y", "x"]}
    meta = parse_array(json.dumps(zarray).encode(), attributes)
    entries = [Entry("", {})]
    entries += [Entry(f"v{i:04d}", attributes, meta, meta.dtype) for i in range(5000)]
    made = h5_file(entries)
    assert sorted(made.omitted) == [
        (name, "attribute 'REFERENCE_LIST': it is more than one attribute message holds")
        for name in ("x", "y")
    ]
    path = tmp_path / "big.h5"
    with open(path, "wb") as f:
        f.write(made.layout.header_range(0, made.layout.header_size))
        f.truncate(made.layout.size)
    with netCDF4.Dataset(path) as nc:
        assert {n: len(d) for n, d in nc.dimensions.items()} == {"x": 3, "y": 2}
        assert all(nc[f"v{i:04d}"].dimensions == ("y", "x") for i in (0, 2500, 4999))
    with h5py.File(path) as f:
        assert f["v4999"].dims[1][0].name == "/x" and "REFERENCE_LIST" not in f["x"].attrs


@pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification")
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_coordinate_hdf5_cannot_hold_leaves_its_dimension(tmp_path, zarr_format):
    """Fixed-size unicode (UTF-32, no HDF5 type): the coordinate is left out, named, and
    its dimension is a dataset with no storage in its place."""
    store = tmp_path / "u.zarr"
    labels = np.array(["a", "bc", "d"], "<U2")
    ds = xr.Dataset({"v": (("x", "t"), np.ones((3, 2)))}, coords={"x": labels, "t": [1, 2]})
    ds.to_zarr(store, zarr_format=zarr_format, consolidated=False)
    path = tmp_path / "u.h5"
    made = write_file(path, store)
    assert made.omitted == [("x", "HDF5 has no UTF-32 strings (NumPy's U)")]
    with xr.open_dataset(path, engine="h5netcdf") as got:
        assert omitted_names(made.omitted) == ["x"] and "'x': HDF5" in got.attrs.pop(OMITTED)
        expected = xr.open_zarr(store, consolidated=False).drop_vars(["x"])
        xr.testing.assert_identical(got.load(), expected.load())
    assert "\tdouble v(x, t) ;" in ncdump_header(path)
    with h5py.File(path) as f:
        assert f["x"].id.get_offset() is None and f["v"].dims[0][0].name == "/x"
    h5dump(path, "-H")
