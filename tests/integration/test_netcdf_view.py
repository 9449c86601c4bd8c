"""Through the kernel: ``-o sidecars=netcdf`` shows in each group directory a netCDF classic
file ``NAME.nc`` of the group's own arrays (NAME: the group's name; for the root, the
source's name without ``.zarr``/``.zip``, or ``-o dataset_name``). xarray (both its netCDF4
and its scipy engine), ncdump, cdo and ncks read it as xarray and zarr-python read the store.

The oracle is always the store read by xarray's zarr backend or zarr-python, never bytes the
mount produced. What the ``.nc`` must hold to be ``identical`` to ``xarray.open_zarr``:

* ``_FillValue`` exactly where xarray's zarr backend masks with one: for Zarr v2 the array's
  ``fill_value`` when not null (``use_zarr_fill_value_as_mask`` is on for v2); for v3 the
  ``_FillValue`` *attribute* xarray wrote (floats base64 of a little-endian double, see
  ``xarray.backends.zarr.FillValueCoder``), never v3's ``fill_value``; cast to the variable's
  netCDF type (unsigned: the signed reinterpretation, e.g. 65535 -> -1s beside
  ``_Unsigned = "true"``);
* ``_ARRAY_DIMENSIONS`` is not an attribute (xarray hides it; it names the dimensions);
* arrays netCDF classic cannot hold are left out and named in the global attribute
  ``zarrmount_omitted``; everything else of the group is there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import warnings
import zipfile
from pathlib import Path

import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from helpers import corpus as corpus_mod
from helpers.mounting import mounted, mounted_formats, process_memory, run_cli, wait_until

pytestmark = pytest.mark.mount

OMITTED_ATTR = "zarrmount_omitted"
FLAT_STORES = [f"xarray-v{f}-{c}" for f in (2, 3) for c in ("consolidated", "plain")]
DATATREE_STORES = ["xarray-datatree-v2", "xarray-datatree-v3"]
# The variables of corpus._xarray_dataset that netCDF classic cannot hold: "cplx"
# (complex128) and the coordinate "station" (variable-length strings; the data variables
# name it in their ``coordinates`` attribute, which xarray's decoder drops when the
# variable is missing, keeping it in the encoding alone). Every other variable is there:
# "x" (<U3: char, strlen12, _Encoding utf-8), "code" (|S3: char, strlen3), "flag" (bool:
# byte, dtype "bool"), "stamp" and "time" (int64: CDF-5), "lag", "packed", "sparse", ...
CORPUS_OMITTED = {"cplx", "station"}
# Each group of the datatree stores, and what its .nc leaves out (its own arrays alone).
DATATREE_GROUPS = {
    "": {"station"},  # counts, x, y, station
    "surface": {"station"},  # temp, flag, time, station
    "surface/derived": set(),  # no array: a netCDF file without variables
    "surface/derived/daily": {"station"},  # sparse, lag, day, station
    "empty": set(),
    "empty/leaf": set(),  # a 0-d float32
}
DEADLINE_S = 20.0  # the reload test polls the outcome this long at most


@contextlib.contextmanager
def _quiet():
    """xarray and zarr-python warn (no consolidated metadata, unstable v3 types, ...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def nc_path(mount, group: str = "", root_name: str | None = None) -> str:
    """The ``.nc`` of ``group`` in ``mount``: ``GROUP/NAME.nc``, NAME its last component;
    the root's is named after the source (``root_name``: that name, given)."""
    if not group:
        if root_name is None:
            root_name = Path(mount.source).name.removesuffix(".zarr").removesuffix(".zip")
        return mount.p(root_name + ".nc")
    return mount.p(f"{group}/{group.rpartition('/')[2]}.nc")


def omitted_names(attrs: dict) -> set[str]:
    """Pops ``zarrmount_omitted`` ("name: reason; name2: reason") from ``attrs``; the
    names it gives (none when there is no such attribute)."""
    text = attrs.pop(OMITTED_ATTR, None)
    if text is None:
        return set()
    assert isinstance(text, str), f"{OMITTED_ATTR} is not text: {text!r}"
    names = set(re.findall(r"(?:^|;)\s*([^:;]+?):", text))
    assert names, f"{OMITTED_ATTR} names nothing: {text!r}"
    return names


def assert_identical_to_zarr(nc: str, store, group: str, engine: str) -> set[str]:
    """``open_dataset(nc)`` is identical to ``open_zarr(store, group)`` once the variables
    the nc omits are dropped from the latter; returns those names."""
    with (
        _quiet(),
        xr.open_dataset(nc, engine=engine) as opened,
        xr.open_zarr(store, group=group or None) as expected,
    ):
        got = opened.load()
        omitted = omitted_names(got.attrs)
        want = expected.drop_vars(sorted(omitted)).load()
    xr.testing.assert_identical(got, want)
    # identical compares values, not types: the decoded types must be xarray's too, but
    # for fixed-size unicode, which xarray decodes from char with _Encoding as object
    # strings (CharacterArrayCoder + EncodedStringCoder) where zarr gives <U<n>
    for name, var in want.variables.items():
        got_dtype = got[name].dtype
        if var.dtype.kind == "U":
            assert got_dtype.kind in "OU", (name, got_dtype)
        else:
            assert got_dtype == var.dtype, (name, got_dtype, var.dtype)
    return omitted


def magic(nc: str) -> bytes:
    with open(nc, "rb") as f:
        return f.read(4)


def expected_magic(root, group: str = "") -> bytes:
    """The format of a small group's file: CDF-5 when it holds a 64-bit integer, else
    CDF-1 (CDF-2 is for files past 2 GiB)."""
    with _quiet():
        arrays = zarr.open_group(root, path=group, mode="r").arrays()
        dtypes = [a.dtype for _, a in arrays if not _unsupported(a.dtype)]
    wide = any(dt.kind in "iu" and dt.itemsize == 8 for dt in dtypes)
    return b"CDF\x05" if wide else b"CDF\x01"


def _unsupported(dtype) -> bool:
    """What corpus._xarray_dataset holds that netCDF classic cannot: complex, and strings
    of variable length (NumPy StringDType, kind "T", or object)."""
    return not isinstance(dtype, np.dtype) or dtype.kind in "cOTV"


# ---------------------------------------------------------------------------------------
# (a) the corpus's xarray stores, with the netCDF4 engine (their time axes are int64: CDF-5)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_mod.build(tmp_path_factory.mktemp("netcdf-view") / "corpus")


@pytest.fixture(scope="module")
def corpus_mount(corpus):
    """``get(store name) -> Mount``: each corpus store mounted once for the module."""
    with contextlib.ExitStack() as stack:
        mounts = {}

        def get(name: str):
            if name not in mounts:
                path = corpus.stores[name].path
                mounts[name] = stack.enter_context(
                    mounted(path, sidecars="netcdf", tag=f"nc-{name}")
                )
            mounts[name].assert_alive()
            return mounts[name]

        yield get


def test_corpus_variables_omitted_are_the_complex_and_variable_length_ones(corpus):
    """The oracle's own premise: CORPUS_OMITTED is what the dataset cannot put in netCDF."""
    for name in FLAT_STORES:
        with _quiet(), xr.open_zarr(corpus.stores[name].path) as ds:
            assert {k for k, v in ds.variables.items() if _unsupported(v.dtype)} == CORPUS_OMITTED
    for name in DATATREE_STORES:
        for group, omitted in DATATREE_GROUPS.items():
            with _quiet(), xr.open_zarr(corpus.stores[name].path, group=group or None) as ds:
                assert {k for k, v in ds.variables.items() if _unsupported(v.dtype)} == omitted


@pytest.mark.parametrize("name", FLAT_STORES)
def test_corpus_store_nc_is_identical_to_open_zarr(corpus, corpus_mount, name):
    mount = corpus_mount(name)
    nc = nc_path(mount)
    assert magic(nc) == b"CDF\x05", "int64 variables (time, stamp) need CDF-5"
    omitted = assert_identical_to_zarr(nc, corpus.stores[name].path, "", "netcdf4")
    assert omitted == CORPUS_OMITTED


@pytest.mark.parametrize("group", list(DATATREE_GROUPS), ids=lambda g: g or "root")
@pytest.mark.parametrize("name", DATATREE_STORES)
def test_datatree_group_nc_is_identical_to_open_zarr_of_the_group(
    corpus, corpus_mount, name, group
):
    mount = corpus_mount(name)
    nc = nc_path(mount, group)
    assert os.path.isfile(nc), sorted(os.listdir(os.path.dirname(nc)))
    assert magic(nc) == expected_magic(corpus.stores[name].path, group)
    omitted = assert_identical_to_zarr(nc, corpus.stores[name].path, group, "netcdf4")
    assert omitted == DATATREE_GROUPS[group]


def test_each_group_has_its_own_nc_and_only_its_own_arrays(corpus, corpus_mount):
    """Subgroups' arrays are not in their parent's .nc; every directory has exactly one."""
    mount = corpus_mount("xarray-datatree-v3")
    root = str(corpus.stores["xarray-datatree-v3"].path)
    for group in DATATREE_GROUPS:
        folder = mount.p(group)
        ncs = [n for n in os.listdir(folder) if n.endswith(".nc")]
        assert ncs == [os.path.basename(nc_path(mount, group))], (group, ncs)
        with _quiet():
            own = set(zarr.open_group(root, path=group, mode="r").array_keys())
        with netCDF4.Dataset(nc_path(mount, group)) as ds:
            assert set(ds.variables) == own - DATATREE_GROUPS[group], group


# ---------------------------------------------------------------------------------------
# (b) a store netCDF classic's first formats hold: scipy reads it too
# ---------------------------------------------------------------------------------------


def _small_dataset() -> xr.Dataset:
    """No 64-bit integer: CF-packed floats, fill values, unsigned types (one with a fill
    value), int8, int16, bool, coordinates and a CF time encoded as int32."""
    rng = np.random.default_rng(11)
    nt, ny, nx = 3, 4, 7
    t = rng.normal(15, 8, (nt, ny, nx)).astype("f4")
    t[0, 0, :2] = np.nan  # packed: the _FillValue
    p = rng.normal(1000, 20, (ny, nx))
    p[1, 1] = np.nan
    wind = rng.normal(0, 3, (nt, ny, nx)).astype("f4")
    wind[2, 3, 3] = np.nan  # -999 stored
    height = rng.normal(50, 10, (ny, nx))
    height[-1, -1] = np.nan
    u16 = rng.integers(0, 65535, (ny, nx)).astype("f8")
    u16[0, 0] = np.nan  # the fill value 65535 stored
    return xr.Dataset(
        {
            "t_packed": (("time", "lat", "lon"), t, {"long_name": "temperature"}),
            "p_packed": (("lat", "lon"), p, {"units": "hPa"}),
            "wind": (("time", "lat", "lon"), wind),
            "height": (("lat", "lon"), height),
            "u8": (("lon",), np.array([0, 1, 127, 128, 200, 254, 255], "u1")),
            "u16": (("lat", "lon"), u16),
            "u32": (("lat",), np.array([0, 2**31 - 1, 2**31, 2**32 - 1], "u4")),
            "i8": (("lon",), np.array([-128, -1, 0, 1, 2, 126, 127], "i1")),
            "i16": (("lat", "lon"), rng.integers(-32768, 32767, (ny, nx)).astype("i2")),
            "mask": (("lat", "lon"), rng.random((ny, nx)) > 0.5),
        },
        coords={
            "time": pd.date_range("2000-01-04", periods=nt, freq="D"),
            "lat": (
                "lat",
                np.linspace(-30, 30, ny),
                {"units": "degrees_north", "standard_name": "latitude"},
            ),
            "lon": ("lon", np.linspace(0, 60, nx).astype("f4"), {"units": "degrees_east"}),
        },
        attrs={"title": "scipy-readable", "history": "written by xarray", "version": 3},
    )


SMALL_ENCODING = {
    "t_packed": {"dtype": "i2", "scale_factor": 0.01, "add_offset": 10.0, "_FillValue": -32768},
    "p_packed": {
        "dtype": "i4",
        "scale_factor": 0.001,
        "add_offset": 1000.0,
        "_FillValue": -2147483647,
    },
    "wind": {"_FillValue": -999.0},
    "u16": {"dtype": "u2", "_FillValue": 65535},
    "time": {"dtype": "i4", "units": "days since 2000-01-01"},
}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """fmt -> the small dataset written by xarray as a Zarr v2 / v3 store."""
    base = tmp_path_factory.mktemp("netcdf-small")
    roots = {}
    with _quiet():
        for fmt in (2, 3):
            roots[fmt] = str(base / f"small-v{fmt}.zarr")
            _small_dataset().to_zarr(
                roots[fmt], mode="w", zarr_format=fmt, encoding=SMALL_ENCODING, consolidated=False
            )
    return roots


@pytest.fixture(scope="module")
def small_mounts(small):
    with mounted_formats(small, "netcdf", "nc-small") as found:
        yield found


@pytest.mark.parametrize("engine", ["scipy", "netcdf4"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_small_store_nc_is_identical_to_open_zarr(small, small_mounts, fmt, engine):
    nc = nc_path(small_mounts[fmt])
    assert magic(nc) == b"CDF\x01", "small, no 64-bit integer: CDF-1 (scipy reads 1 and 2)"
    assert assert_identical_to_zarr(nc, small[fmt], "", engine) == set()


# ---------------------------------------------------------------------------------------
# (c) netCDF's own tools: ncdump, cdo, ncks
# ---------------------------------------------------------------------------------------


def _ncdump_header(nc: str) -> tuple[dict[str, int], dict[str, list[str]], dict[str, set[str]]]:
    """``ncdump -h``: dimensions {name: size}, variables {name: dims} and attribute names
    {variable ("" for the global ones): names}."""
    out = subprocess.run(["ncdump", "-h", nc], capture_output=True, text=True, check=True).stdout
    dims: dict[str, int] = {}
    variables: dict[str, list[str]] = {}
    attrs: dict[str, set[str]] = {}
    section = None
    for line in out.splitlines():
        if line in ("dimensions:", "variables:"):
            section = line[:-1]
        elif line.startswith("// global attributes:"):
            section = "globals"
        elif section == "dimensions" and (m := re.match(r"^\t(\S+) = (\d+) ;", line)):
            dims[m.group(1)] = int(m.group(2))
        elif m := re.match(r"^\t\t(\S*):(\S+) = ", line):
            attrs.setdefault(m.group(1), set()).add(m.group(2))
        elif section == "variables" and (m := re.match(r"^\t\S+ (\S+?)(?:\((.*)\))? ;", line)):
            variables[m.group(1)] = [d.strip() for d in (m.group(2) or "").split(",") if d]
    return dims, variables, attrs


def _dimension_names(array) -> list[str]:
    if array.metadata.zarr_format == 3:
        return list(array.metadata.dimension_names or ())
    return list(array.attrs["_ARRAY_DIMENSIONS"])


def _expected_header(root: str, group: str = ""):
    """What ncdump -h must list, from zarr-python (dimensions, variables, attributes) and
    xarray's raw view (where it masks with a _FillValue) of the group's own arrays."""
    dims: dict[str, int] = {}
    variables: dict[str, list[str]] = {}
    attrs: dict[str, set[str]] = {}
    with _quiet(), xr.open_zarr(root, group=group or None, decode_cf=False) as raw:
        zgroup = zarr.open_group(root, path=group, mode="r")
        masked = {name for name, var in raw.variables.items() if "_FillValue" in var.attrs}
    omitted = set()
    for name, array in zgroup.arrays():
        dtype = array.dtype
        if _unsupported(dtype):
            omitted.add(name)
            continue
        names = _dimension_names(array)
        if dtype.kind in "SU":  # the characters' own last dimension
            names.append(f"strlen{dtype.itemsize}")  # <U<n>: 4n UTF-8 bytes at most
        dims.update(zip(names, [*array.shape, dtype.itemsize], strict=False))
        variables[name] = names
        extra = {
            "_FillValue": name in masked,
            "_Unsigned": dtype.kind == "u" and dtype.itemsize < 8,
            "dtype": dtype.kind == "b",
            "_Encoding": dtype.kind == "U",
        }
        own = set(array.attrs) - {"_ARRAY_DIMENSIONS", "_FillValue"}
        attrs[name] = own | {k for k, on in extra.items() if on}
    attrs[""] = set(zgroup.attrs) | ({OMITTED_ATTR} if omitted else set())
    return dims, variables, {k: v for k, v in attrs.items() if v}


def _assert_header(nc: str, root: str, group: str = "") -> None:
    got_dims, got_vars, got_attrs = _ncdump_header(nc)
    want_dims, want_vars, want_attrs = _expected_header(root, group)
    assert got_dims == want_dims
    assert got_vars == want_vars
    assert got_attrs == want_attrs


@pytest.mark.parametrize("fmt", [2, 3])
def test_ncdump_header_lists_every_dimension_variable_and_attribute(small, small_mounts, fmt):
    _assert_header(nc_path(small_mounts[fmt]), small[fmt])


@pytest.mark.parametrize("name", ["xarray-v2-consolidated", "xarray-v3-plain"])
def test_ncdump_header_of_corpus_stores(corpus, corpus_mount, name):
    _assert_header(nc_path(corpus_mount(name)), str(corpus.stores[name].path))


def _raw(root: str, name: str) -> np.ndarray:
    """zarr-python's values of array ``name``, as the netCDF variable stores them: unsigned
    8-, 16- and 32-bit integers as their signed reinterpretation, bools as 0 and 1."""
    with _quiet():
        values = np.asarray(zarr.open_array(root, path=name, mode="r")[...])
    if values.dtype.kind == "u" and values.dtype.itemsize < 8:
        return values.view(f"i{values.dtype.itemsize}")
    return values.astype("i1") if values.dtype.kind == "b" else values


def _raw_fill(root: str, name: str):
    """The _FillValue xarray masks ``name`` with, as the netCDF variable stores it."""
    with _quiet(), xr.open_zarr(root, decode_cf=False) as raw:
        fill = raw[name].attrs.get("_FillValue")
        dtype = np.dtype(raw[name].dtype)
    if fill is None:
        return None
    fill = np.array(fill, dtype=dtype)
    return fill.view(f"i{dtype.itemsize}") if dtype.kind == "u" else fill


def _ncdump_values(nc: str, name: str) -> list[str]:
    """The values ``ncdump -v NAME`` prints (``_`` for a fill value), 9 and 17 digits."""
    out = subprocess.run(
        ["ncdump", "-p", "9,17", "-v", name, nc], capture_output=True, text=True, check=True
    ).stdout
    data = out.partition("\ndata:\n")[2]
    body = re.search(rf"(?m)^ {re.escape(name)} =(.*?);", data, re.S)
    assert body, out
    return [v.strip() for v in body.group(1).replace("\n", " ").split(",")]


NCDUMP_VARS = ["i16", "u8", "u16", "u32", "i8", "wind", "height", "mask", "time"]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", NCDUMP_VARS)
def test_ncdump_prints_zarr_pythons_values(small, small_mounts, fmt, name):
    """ncdump prints the stored values (unsigned ones as signed: it ignores _Unsigned) and
    ``_`` where a value equals the _FillValue."""
    expected = _raw(small[fmt], name).ravel()
    fill = _raw_fill(small[fmt], name)
    printed = _ncdump_values(nc_path(small_mounts[fmt]), name)
    assert len(printed) == expected.size
    for i, (text, want) in enumerate(zip(printed, expected, strict=True)):
        if text == "_":
            assert fill is not None and np.array_equal(want, fill, equal_nan=True), (i, want)
        elif expected.dtype.kind == "f":
            got = expected.dtype.type(float(text.rstrip("f")))
            assert np.array_equal(got, want, equal_nan=True), (i, text, want)
        else:
            assert int(text) == want, (i, text, want)


def _cdo_values(nc: str, name: str) -> np.ndarray:
    out = subprocess.run(
        ["cdo", "-s", "--precision", "9,17", "outputtab,value", f"-selname,{name}", nc],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return np.array([float(line) for line in out.splitlines() if not line.startswith("#")])


# cdo reads variables on a grid it knows: here those on (lat, lon), whose coordinate
# variables carry CF units (degrees_north/east). It aborts on a 1-D variable ("Grid
# coordinates missing!") and on the corpus's (y, x) ones, x being characters ("Grid type
# >generic< unsupported"), so it is asked only for the 2-D and 3-D float and int ones.
@pytest.mark.skipif(shutil.which("cdo") is None, reason="cdo is not installed")
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", ["wind", "height", "i16"])
def test_cdo_outputtab_prints_zarr_pythons_values(small, small_mounts, fmt, name):
    """cdo prints each value, time step by time step, missing ones as the missing value
    itself (wind's -999; height's NaN)."""
    expected = _raw(small[fmt], name).ravel()
    got = _cdo_values(nc_path(small_mounts[fmt]), name)
    assert np.array_equal(got.astype(expected.dtype), expected, equal_nan=True)


@pytest.mark.skipif(shutil.which("ncks") is None, reason="nco is not installed")
@pytest.mark.parametrize("fmt", [2, 3])
def test_ncks_extracts_zarr_pythons_values(small, small_mounts, fmt, tmp_path):
    nc = nc_path(small_mounts[fmt])
    for name in ["u8", "u16", "u32", "i8", "i16", "t_packed", "p_packed", "wind", "mask"]:
        out = tmp_path / f"{name}.nc"
        subprocess.run(["ncks", "-O", "-v", name, nc, str(out)], check=True, capture_output=True)
        with netCDF4.Dataset(out) as ds:
            ds.set_auto_maskandscale(False)
            got = np.asarray(ds[name][...])
            kept = {k: ds[name].getncattr(k) for k in ds[name].ncattrs()}
        expected = _raw(small[fmt], name)  # unsigned as signed, bool as 0/1
        if got.dtype.kind == "u":  # (should netCDF4 apply _Unsigned all the same)
            got = got.view(f"i{got.dtype.itemsize}")
        assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("="), name
        assert np.array_equal(got, expected, equal_nan=True), name
        with _quiet():
            stored = zarr.open_array(small[fmt], path=name, mode="r").dtype
        if stored.kind == "u":
            assert kept.get("_Unsigned") == "true", (name, kept)


@pytest.mark.skipif(shutil.which("ncks") is None, reason="nco is not installed")
def test_ncks_extracts_from_a_cdf5_corpus_file(corpus, corpus_mount, tmp_path):
    name = "xarray-v3-plain"
    root = str(corpus.stores[name].path)
    for var in ["stamp", "time", "temp", "packed", "counts"]:
        out = tmp_path / f"{var}.nc"
        nc = nc_path(corpus_mount(name))
        subprocess.run(["ncks", "-O", "-v", var, nc, str(out)], check=True, capture_output=True)
        with netCDF4.Dataset(out) as ds:
            ds.set_auto_maskandscale(False)
            got = np.asarray(ds[var][...])
        expected = _raw(root, var)
        assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("="), var
        assert np.array_equal(got, expected, equal_nan=True), var


# ---------------------------------------------------------------------------------------
# (d) past 4 GiB: CDF-2 (the big variable last) or CDF-5
# ---------------------------------------------------------------------------------------

BIG_SHAPE, BIG_CHUNKS = (40_000, 30_000), (1_000, 1_000)  # 4.8 GB of float32


def test_a_dataset_past_4_gib_is_cdf2_or_cdf5_and_reads_right(tmp_path):
    root = str(tmp_path / "big.zarr")
    rng = np.random.default_rng(4)
    with _quiet():
        group = zarr.open_group(root, mode="w", zarr_format=2)
        big = group.create_array(
            "big",
            shape=BIG_SHAPE,
            chunks=BIG_CHUNKS,
            dtype="<f4",
            fill_value=1.25,
            attributes={"_ARRAY_DIMENSIONS": ["row", "col"], "units": "m"},
        )
        big[39_000:, 29_000:] = rng.standard_normal(BIG_CHUNKS).astype("f4")  # the last chunk
        big[20_000:21_000, 3_000:4_000] = rng.standard_normal(BIG_CHUNKS).astype("f4")
        small_one = group.create_array(
            "small", shape=(50,), dtype="<i2", attributes={"_ARRAY_DIMENSIONS": ["n"]}
        )
        small_one[...] = np.arange(50, dtype="i2") * 3
        oracle = zarr.open_array(root, path="big", mode="r")
    with mounted(root, sidecars="netcdf", tag="nc-big") as mount:
        nc = nc_path(mount)
        size = os.stat(nc).st_size
        assert size > BIG_SHAPE[0] * BIG_SHAPE[1] * 4
        assert magic(nc) in (b"CDF\x02", b"CDF\x05")  # CDF-2 if the big variable is last
        with netCDF4.Dataset(nc) as ds:
            ds.set_auto_maskandscale(False)
            v = ds["big"]
            assert v.shape == BIG_SHAPE and v.dimensions == ("row", "col")
            for where in [
                np.s_[-1, -7:],  # the last elements of the file
                np.s_[-3:, -5:],
                np.s_[39_000:39_040, 29_000:29_030],  # the written last chunk
                np.s_[20_990:21_010, 3_990:4_010],  # across the other written chunk's edge
                np.s_[123, :10],  # fill
                np.s_[0, 0],
            ]:
                assert np.array_equal(np.asarray(v[where]), oracle[where]), where
            assert np.array_equal(np.asarray(ds["small"][...]), np.arange(50, dtype="i2") * 3)
        mount.assert_alive()


# ---------------------------------------------------------------------------------------
# (e) what netCDF classic cannot hold is left out and named; attributes of every kind
# ---------------------------------------------------------------------------------------

# name: why netCDF classic cannot hold it (vlen strings, complex, float16, structured,
# an empty axis). "rec" (structured) only in v2, where zarr-python writes it.
ODD = {"words": str, "cplx": "<c8", "half": "<f2", "hollow": "<f4", "rec": [("a", "<i4")]}
ATTRS = {
    "text": "some words",
    "count": 7,
    "ratio": 0.5,
    "ints": [1, 2, 3],
    "floats": [0.5, 1.5, -2.0],
    "yes": True,
    "no": False,
    "mapping": {"a": 1, "b": [1, 2]},
    "mixed": [1, "x"],
    "nothing": None,
}


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """fmt -> a store whose group "odd" holds an array netCDF holds ("ok") beside ODD ones."""
    base = tmp_path_factory.mktemp("netcdf-odd")
    roots = {}
    with _quiet():
        for fmt in (2, 3):
            roots[fmt] = root = str(base / f"odd-v{fmt}.zarr")
            group = zarr.open_group(root, mode="w", zarr_format=fmt).create_group("odd")
            group.attrs.update(ATTRS)
            for name, dtype in {"ok": "<f8", **ODD}.items():
                if name == "rec" and fmt == 3:
                    continue
                shape = (0, 3) if name == "hollow" else (4,)
                dims = ["zero", "three"] if name == "hollow" else ["n"]
                kw = (
                    {"dimension_names": dims}
                    if fmt == 3
                    else {"attributes": {"_ARRAY_DIMENSIONS": dims}}
                )
                array = group.create_array(name, shape=shape, dtype=dtype, **kw)
                if name == "ok":
                    array.attrs.update(ATTRS)
                    array[...] = np.arange(4) * 0.25
                elif name == "words":
                    array[...] = np.array(["a", "bb", "", "dddd"], dtype=object)
    return roots


@pytest.fixture(scope="module")
def odd_mounts(odd):
    with mounted_formats(odd, "netcdf", "nc-odd") as found:
        yield found


def _odd_names(fmt: int) -> set[str]:
    return {n for n in ODD if n != "rec" or fmt == 2}


@pytest.mark.parametrize("fmt", [2, 3])
def test_arrays_netcdf_cannot_hold_are_left_out_and_named(odd_mounts, fmt):
    mount = odd_mounts[fmt]
    with netCDF4.Dataset(nc_path(mount, "odd")) as ds:
        assert set(ds.variables) == {"ok"}
        ds.set_auto_maskandscale(False)
        assert np.array_equal(ds["ok"][...], np.arange(4) * 0.25)
        attrs = {k: ds.getncattr(k) for k in ds.ncattrs()}
    assert omitted_names(attrs) == _odd_names(fmt)
    # the root (no array) has its .nc too, naming nothing
    with netCDF4.Dataset(nc_path(mount)) as ds:
        assert set(ds.variables) == set() and OMITTED_ATTR not in ds.ncattrs()


@pytest.mark.parametrize("fmt", [2, 3])
def test_inspect_names_the_arrays_without_a_place_in_the_netcdf_view(odd, fmt):
    """Loose on purpose (the wording is not fixed): each left-out array is named on a line
    that speaks of netcdf."""
    res = run_cli(["--inspect", odd[fmt], "-o", "sidecars=netcdf"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for name in _odd_names(fmt):
        assert any(name in line and "netcdf" in line.lower() for line in lines), (
            name,
            res.stdout,
        )


def _check_attrs(attrs: dict, where: str) -> None:
    """Strings as text, numbers as numbers, lists of numbers as arrays, bools as bytes 1/0,
    anything else JSON text."""
    assert attrs["text"] == "some words", where
    assert attrs["count"] == 7 and np.asarray(attrs["count"]).dtype.kind == "i", where
    assert attrs["ratio"] == 0.5 and np.asarray(attrs["ratio"]).dtype.kind == "f", where
    assert np.array_equal(attrs["ints"], [1, 2, 3]), where
    assert np.asarray(attrs["ints"]).dtype.kind == "i", where
    assert np.array_equal(attrs["floats"], [0.5, 1.5, -2.0]), where
    for name, value in [("yes", 1), ("no", 0)]:
        assert attrs[name] == value and np.asarray(attrs[name]).dtype == np.int8, (where, name)
    for name in ["mapping", "mixed", "nothing"]:
        assert isinstance(attrs[name], str), (where, name, attrs[name])
        assert json.loads(attrs[name]) == ATTRS[name], (where, name)


@pytest.mark.parametrize("fmt", [2, 3])
def test_attributes_of_every_kind_pass_through(odd_mounts, fmt):
    with netCDF4.Dataset(nc_path(odd_mounts[fmt], "odd")) as ds:
        _check_attrs({k: ds.getncattr(k) for k in ds.ncattrs()}, "global")
        var = ds["ok"]
        attrs = {k: var.getncattr(k) for k in var.ncattrs()}
    assert "_ARRAY_DIMENSIONS" not in attrs
    _check_attrs(attrs, "ok")


# ---------------------------------------------------------------------------------------
# (f) reload
# ---------------------------------------------------------------------------------------


def test_sighup_brings_an_added_array_into_the_nc(tmp_path):
    root = str(tmp_path / "reload.zarr")
    with _quiet():
        group = zarr.open_group(root, mode="w", zarr_format=2).create_group("obs")
        first = group.create_array(
            "a", shape=(6,), dtype="<f8", attributes={"_ARRAY_DIMENSIONS": ["n"]}
        )
        first[...] = np.linspace(0, 1, 6)
    with mounted(root, sidecars="netcdf", tag="nc-reload") as mount:
        nc = nc_path(mount, "obs")
        with netCDF4.Dataset(nc) as ds:
            assert set(ds.variables) == {"a"}
        with _quiet():
            added = zarr.open_group(root, path="obs", mode="a").create_array(
                "b",
                shape=(2, 3),
                dtype="<i4",
                fill_value=-1,
                attributes={"_ARRAY_DIMENSIONS": ["m", "k"], "units": "s"},
            )
            added[...] = np.arange(6, dtype="i4").reshape(2, 3) - 2
        mount.proc.send_signal(signal.SIGHUP)

        def variables() -> set[str]:
            try:
                with netCDF4.Dataset(nc) as ds:
                    return set(ds.variables)
            except (OSError, RuntimeError):  # caught between two versions of the file
                return set()

        wait_until(lambda: "b" in variables(), DEADLINE_S, 0.1)
        assert variables() == {"a", "b"}, mount.read_log()[-3000:]
        with netCDF4.Dataset(nc) as ds:
            ds.set_auto_maskandscale(False)
            assert ds["b"].dimensions == ("m", "k") and ds["b"].getncattr("units") == "s"
            assert ds["b"].getncattr("_FillValue") == -1  # v2: the fill value masks
            with _quiet():
                for name in ("a", "b"):
                    expected = zarr.open_array(root, path=f"obs/{name}", mode="r")[...]
                    assert np.array_equal(ds[name][...], expected), name
        mount.assert_alive()


# ---------------------------------------------------------------------------------------
# (g) read-only; names; real nodes first
# ---------------------------------------------------------------------------------------


def _assert_refuses_writes(path: str) -> None:
    mode = os.stat(path).st_mode
    assert stat.S_ISREG(mode) and mode & 0o222 == 0 and mode & 0o444 == 0o444, oct(mode)
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_APPEND):
        with pytest.raises(OSError) as caught:
            os.close(os.open(path, flags))
        assert caught.value.errno in (errno.EROFS, errno.EACCES), (flags, caught.value)
    with pytest.raises(OSError):
        os.truncate(path, 0)


def test_nc_files_are_read_only(small, small_mounts):
    for fmt, mount in small_mounts.items():
        nc = nc_path(mount)
        before = Path(nc).read_bytes()
        _assert_refuses_writes(nc)
        assert Path(nc).read_bytes() == before, fmt


def test_nc_files_are_read_only_on_a_writable_mount(small, tmp_path):
    root = tmp_path / "rw.zarr"
    shutil.copytree(small[2], root)
    with mounted(root, ["rw"], sidecars="netcdf", tag="nc-rw") as mount:
        _assert_refuses_writes(nc_path(mount))
        mount.assert_alive()


def test_root_nc_is_named_after_the_source_or_dataset_name(small, small_mounts, tmp_path):
    assert "small-v2.nc" in os.listdir(small_mounts[2].p())
    assert "small-v3.nc" in os.listdir(small_mounts[3].p())
    with mounted(small[2], ["dataset_name=renamed"], sidecars="netcdf", tag="nc-named") as m:
        listed = os.listdir(m.p())
        assert "renamed.nc" in listed and "small-v2.nc" not in listed, listed
        assert_identical_to_zarr(m.p("renamed.nc"), small[2], "", "netcdf4")
    # a zip source: named without ".zip"
    zipped = tmp_path / "zipped.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for path in Path(small[2]).rglob("*"):
            if path.is_file():
                z.write(path, path.relative_to(small[2]).as_posix())
    with mounted(zipped, sidecars="netcdf", tag="nc-zip") as m:
        assert "zipped.nc" in os.listdir(m.p()), os.listdir(m.p())
        assert_identical_to_zarr(m.p("zipped.nc"), small[2], "", "netcdf4")


def test_a_real_array_named_like_the_nc_stays_the_real_node(tmp_path):
    root = str(tmp_path / "shadow.zarr")
    with _quiet():
        group = zarr.open_group(root, mode="w", zarr_format=3).create_group("g")
        real = group.create_array("g.nc", shape=(5,), dtype="u1", dimension_names=["n"])
        real[...] = [1, 2, 3, 4, 5]
        group.create_array("v", shape=(5,), dtype="<f4", dimension_names=["n"])[...] = 1.5
    with mounted(root, sidecars="netcdf", tag="nc-shadow") as mount:
        assert np.fromfile(mount.p("g/g.nc"), dtype="u1").tolist() == [1, 2, 3, 4, 5]
        assert os.listdir(mount.p("g")).count("g.nc") == 1
        mount.assert_alive()


# -------------------------------------------------------------- a group of 10,000 arrays

MANY = 10_000
MANY_CACHE_MIB = 64


def _write_many(root: Path) -> None:
    """A v2 group of MANY small float32 arrays with attributes, as the v2 spec lays out
    metadata (no chunks written: every array is its fill value, 1.5)."""
    group = root / "g"
    group.mkdir(parents=True)
    for where in (root, group):
        (where / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    zarray = {
        "zarr_format": 2,
        "shape": [3],
        "chunks": [3],
        "dtype": "<f4",
        "compressor": None,
        "fill_value": 1.5,
        "order": "C",
        "filters": None,
    }
    for i in range(MANY):
        array = group / f"v{i:05d}"
        array.mkdir()
        (array / ".zarray").write_text(json.dumps(zarray))
        attrs = {"_ARRAY_DIMENSIONS": ["n"], "units": "m", "long_name": f"variable {i}"}
        (array / ".zattrs").write_text(json.dumps(attrs))


def test_a_group_of_10000_arrays_opens_without_reading_a_variable(tmp_path):
    _write_many(tmp_path / "many.zarr")
    options = [f"cache_size={MANY_CACHE_MIB}M"]
    with mounted(tmp_path / "many.zarr", options, sidecars="netcdf", tag="nc-many") as m:
        with netCDF4.Dataset(m.p("g/g.nc")) as f:
            assert len(f.variables) == MANY
            last = f["v09999"]
            assert last.dimensions == ("n",) and last.getncattr("long_name") == "variable 9999"
            stats = json.loads(run_cli(["--stats", m.path, "--json"], timeout=60).stdout)
            # the header is followed by a gap the kernel's read-ahead does not cross
            assert stats["cache_misses"] == 0, stats
            np.testing.assert_array_equal(last[...], np.full(3, 1.5, "f4"))
        assert process_memory(m.proc.pid) <= (MANY_CACHE_MIB + 150) << 20
