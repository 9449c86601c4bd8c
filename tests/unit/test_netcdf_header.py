"""netCDF classic files of groups (``headers/netcdf_group.py``, ``headers/netcdf.py``),
without a mount: the header is written to a file followed by NumPy's big-endian bytes of
each variable and read back by netCDF-C (netCDF4) and scipy, the expected values being
NumPy's; the header's parts are made from the metadata alone, never held whole."""

from __future__ import annotations

import json
import tracemalloc

import netCDF4
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.io import netcdf_file

from zarrmount.format.v2 import parse_array
from zarrmount.headers.netcdf_group import OMITTED, Member, group_file


def _meta(shape, dtype, attributes=None, fill=None):
    doc = {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(shape) or [],
        "dtype": np.dtype(dtype).str,
        "compressor": None,
        "fill_value": fill,
        "order": "C",
        "filters": None,
    }
    return parse_array(json.dumps(doc).encode(), attributes or {})


def _member(name, values, dims=None, fill=None, **attributes):
    if dims is not None:
        attributes["_ARRAY_DIMENSIONS"] = dims
    meta = _meta(values.shape, values.dtype, attributes, fill)
    return Member(name, meta, meta.dtype)


def _write(path, made, arrays: dict[str, np.ndarray]) -> None:
    """The file a reader sees: the header, then each variable's big-endian bytes at its
    begin, padded with zeros."""
    layout = made.layout
    with open(path, "wb") as f:
        f.write(layout.header(0, layout.data_start))
        for i, m in enumerate(made.members):
            assert f.tell() == int(layout.begins[i])
            values = arrays[m.name]
            data = values.astype(values.dtype.newbyteorder(">")).tobytes()
            f.write(data + bytes(int(layout.begins[i + 1]) - f.tell() - len(data)))
        assert f.tell() == layout.size


def _group(rng):
    arrays = {
        "temp": rng.normal(280, 5, (3, 4, 5)).astype("<f4"),
        "counts": rng.integers(-300, 300, (4, 5)).astype("<i2"),
        "ub": rng.integers(0, 255, (5,)).astype("u1"),
        "us": rng.integers(0, 65535, (4, 5)).astype("<u2"),
        "ui": rng.integers(0, 2**32 - 1, (4,), dtype="u8").astype(">u4"),
        "flag": np.array([True, False, True, True, False]),
        "x": np.arange(5, dtype="<f8"),
        "odd": rng.integers(-100, 100, (3,)).astype("i1"),
    }
    members = [
        _member("temp", arrays["temp"], ["time", "y", "x"], fill="NaN", units="K"),
        _member("counts", arrays["counts"], ["y", "x"], scale_factor=0.5, valid=[1, 2, 3]),
        _member("ub", arrays["ub"], ["x"], fill=255),
        _member("us", arrays["us"], ["y", "x"]),
        _member("ui", arrays["ui"], ["y"]),
        _member("flag", arrays["flag"], ["x"]),
        _member("x", arrays["x"], ["x"], long_name="x", nested={"a": [1, "b"]}),
        _member("odd", arrays["odd"], ["time"], flag=True, big=2**40, mixed=[1, 2.5]),
    ]
    return arrays, members


@pytest.mark.parametrize("reader", ["netCDF4", "scipy"])
def test_netcdf_readers_read_the_group(tmp_path, reader):
    arrays, members = _group(np.random.default_rng(1))
    made = group_file({"title": "t", "n": 3, "ratio": 0.25}, members, "/")
    assert made.layout.version == 1 and not made.omitted
    path = tmp_path / "g.nc"
    _write(path, made, arrays)
    if reader == "scipy":
        with netcdf_file(path, "r", mmap=False) as f:
            got = {k: v.data.copy() for k, v in f.variables.items()}
            attrs = {k: v._attributes for k, v in f.variables.items()}
            assert f.dimensions == {"time": 3, "y": 4, "x": 5}
            assert f.title == b"t" and f.n == 3 and f.ratio == 0.25
    else:
        with netCDF4.Dataset(path) as f:
            f.set_auto_maskandscale(False)
            got = {k: np.asarray(v[...]) for k, v in f.variables.items()}
            attrs = {k: {a: v.getncattr(a) for a in v.ncattrs()} for k, v in f.variables.items()}
            assert {k: len(d) for k, d in f.dimensions.items()} == {"time": 3, "y": 4, "x": 5}
            assert f.getncattr("title") == "t" and f.getncattr("n") == 3
    for name, values in arrays.items():
        stored = got[name]
        if values.dtype.kind in "ub":  # unsigned as the signed type with _Unsigned
            kind = "b" if values.dtype.kind == "b" else f"u{stored.dtype.itemsize}"
            stored = stored.view(np.dtype(kind).newbyteorder(stored.dtype.byteorder))
        np.testing.assert_array_equal(stored, values, err_msg=name)
    assert attrs["ub"]["_Unsigned"] in ("true", b"true")
    assert int(attrs["ub"]["_FillValue"]) == -1  # 255's bits as a signed byte
    assert np.isnan(attrs["temp"]["_FillValue"])
    assert attrs["flag"]["dtype"] in ("bool", b"bool")
    assert list(attrs["counts"]["valid"]) == [1, 2, 3]
    assert attrs["counts"]["scale_factor"] == 0.5
    assert float(attrs["odd"]["big"]) == 2.0**40
    assert list(attrs["odd"]["mixed"]) == [1.0, 2.5]
    assert json.loads(attrs["x"]["nested"]) == {"a": [1, "b"]}
    assert "_ARRAY_DIMENSIONS" not in attrs["temp"]


def test_types_the_format_lacks_are_named_and_64_bit_integers_choose_cdf5(tmp_path):
    arrays = {"big": np.arange(6, dtype="<i8").reshape(2, 3), "u": np.arange(3, dtype="<u8")}
    members = [
        _member("big", arrays["big"], ["a", "b"]),
        _member("u", arrays["u"], ["b"]),
        _member("c", np.zeros(3, "c8"), ["b"]),
        _member("h", np.zeros(3, "f2"), ["b"]),
        Member("s", None, None, "netCDF classic has no variable-length strings"),
    ]
    made = group_file({}, members, "/")
    assert made.layout.version == 5
    assert [n for n, _ in made.omitted] == ["c", "h", "s"]
    path = tmp_path / "g.nc"
    _write(path, made, arrays)
    with netCDF4.Dataset(path) as f:
        assert f.data_model == "NETCDF3_64BIT_DATA"
        assert sorted(f.variables) == ["big", "u"]
        np.testing.assert_array_equal(f["big"][...], arrays["big"])
        np.testing.assert_array_equal(f["u"][...], arrays["u"])
        omitted = f.getncattr(OMITTED)
    assert "c: netCDF classic has no complex64" in omitted
    assert "h: netCDF classic has no float16" in omitted
    assert "s: netCDF classic has no variable-length strings" in omitted


def test_a_name_with_two_lengths_is_split(tmp_path):
    arrays = {"a": np.zeros(3, "<f4"), "b": np.ones(4, "<f4"), "c": np.arange(2, dtype="<i4")}
    members = [_member("a", arrays["a"], ["n"]), _member("b", arrays["b"], ["n"])]
    members.append(_member("c", arrays["c"]))  # no names: made from its own
    made = group_file({}, members, "/")
    path = tmp_path / "g.nc"
    _write(path, made, arrays)
    with netCDF4.Dataset(path) as f:
        assert f["a"].dimensions == ("n",) and f["b"].dimensions == ("n_4",)
        assert f["c"].dimensions == ("c_dim0",)
        assert {k: len(d) for k, d in f.dimensions.items()} == {"n": 3, "n_4": 4, "c_dim0": 2}


def _many(n: int):
    """``n`` small arrays with attributes: a header of some MB."""
    attributes = {f"attribute_{k}": f"value {k} " * 4 for k in range(12)}
    members = []
    for i in range(n):
        meta = _meta((2,), "<f4", {"_ARRAY_DIMENSIONS": ["two"], **attributes})
        members.append(Member(f"v{i:05d}", meta, meta.dtype))
    return members


def test_the_header_of_10000_arrays_is_made_in_parts(tmp_path):
    members = _many(10_000)
    tracemalloc.start()
    made = group_file({}, members, "/")
    layout = made.layout
    held, _ = tracemalloc.get_traced_memory()
    parts, peak = [], 0
    for start in range(0, layout.data_start, 1 << 16):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        parts.append(layout.header(start, start + (1 << 16)))
        peak = max(peak, tracemalloc.get_traced_memory()[1] - before)
    tracemalloc.stop()
    path = tmp_path / "g.nc"
    path.write_bytes(b"".join(parts) + bytes(layout.size - layout.data_start))
    assert layout.header_size > 4 << 20
    assert held < layout.header_size / 4  # the layout holds offsets, not the header
    assert peak < 1 << 20  # a part is made of the entries it reaches
    with netCDF4.Dataset(path) as f:
        assert len(f.variables) == 10_000
        last = f["v09999"]
        assert last.getncattr("attribute_11") == "value 11 " * 4
        np.testing.assert_array_equal(last[...], np.zeros(2, "f4"))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_part_of_the_header_is_that_part_of_it_whole(data):
    layout = group_file({"t": "x" * 50}, _many(data.draw(st.integers(0, 200))), "/").layout
    whole = layout.header(0, layout.data_start)
    assert len(whole) == layout.data_start
    start = data.draw(st.integers(0, layout.data_start))
    stop = data.draw(st.integers(start, layout.data_start + 10))
    assert layout.header(start, stop) == whole[start:stop]
