"""HDF5 files of trees (``headers/hdf5``), without a mount: the header is written, then
each array's NumPy bytes at its data region, and the file is read back by h5py (HDF5's
own library), h5dump (Debian's HDF5 1.10) and netCDF-C (netCDF4); expected values are
NumPy's and the given attributes, never the writer's output."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
from helpers.arrays import values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount.headers.hdf5 import (
    OMITTED,
    Array,
    Group,
    Reference,
    TreeChanged,
    hdf5_layout,
    messages,
)

H5DUMP = shutil.which("h5dump")
# every dtype zarr-python writes as a raw array, in both byte orders where it has one
DTYPES = (
    ["?", "i1", "u1", "S5"]
    + [f"{order}{kind}" for order in "<>" for kind in ("i2", "i4", "i8", "u2", "u4", "u8")]
    + [f"{order}{kind}" for order in "<>" for kind in ("f2", "f4", "f8", "c8", "c16")]
)
SHAPES = [(), (7,), (2, 3, 4), (0,), (3, 0, 2)]


def tree(values: dict[str, np.ndarray], fills=None, attrs=None, group_attrs=None) -> Group:
    """The group tree of arrays at ``values``' paths (``a/b/x``)."""
    fills, attrs, group_attrs = fills or {}, attrs or {}, group_attrs or {}

    def build(prefix: str, name: str) -> Group:
        here = {p: v for p, v in values.items() if p.startswith(prefix)}
        arrays = [
            Array(p[len(prefix) :], v.shape, v.dtype, fills.get(p), attrs.get(p, {}))
            for p, v in here.items()
            if "/" not in p[len(prefix) :]
        ]
        subs = sorted({p[len(prefix) :].split("/")[0] for p in here if "/" in p[len(prefix) :]})
        groups = [build(f"{prefix}{s}/", s) for s in subs]
        return Group(name, group_attrs.get(prefix.rstrip("/"), {}), groups, arrays)

    return build("", "")


def write(path: Path, root: Group, values: dict[str, np.ndarray], **k_values):
    """The file as the mount serves it: the header, each array's bytes at its region."""
    layout = hdf5_layout(root, **k_values)
    with open(path, "wb") as f:
        f.write(layout.header_range(0, layout.header_size))
        for region in layout.data_regions:
            data = np.ascontiguousarray(values[region.path]).tobytes()
            assert region.size == len(data)
            f.seek(region.offset)
            f.write(data)
        f.truncate(layout.size)
    return layout


def h5dump(path: Path, *options: str) -> None:
    if H5DUMP is None:
        pytest.skip("h5dump (Debian's hdf5-tools) is not installed")
    done = subprocess.run([H5DUMP, *options, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def h5dump_values(path: Path, name: str, expected: np.ndarray) -> np.ndarray:
    """``name``'s values as HDF5 1.10's h5dump reads them (its native binary output; a
    half float it widens to a float)."""
    h5dump(path, "-d", name, "-b", "NATIVE", "-o", str(path.with_suffix(".bin")))
    native = expected.dtype.newbyteorder("=")
    if expected.dtype.kind == "f" and expected.dtype.itemsize == 2:
        native = np.dtype("=f4")
    raw = path.with_suffix(".bin").read_bytes()
    return np.frombuffer(raw, native).reshape(expected.shape)


def assert_attribute(got, expected) -> None:
    """An attribute read by h5py equals the value given (JSON text for the rest)."""
    if isinstance(expected, Reference):
        raise AssertionError("references are checked by dereferencing them")
    if isinstance(expected, np.ndarray | np.generic):
        np.testing.assert_array_equal(got, expected)
        assert np.asarray(got).dtype == np.asarray(expected).dtype
    elif isinstance(got, str) and got != expected:  # JSON text
        assert json.loads(got) == expected
    else:
        plain = got.tolist() if isinstance(got, np.ndarray | np.generic) else got
        assert plain == expected and type(plain) is type(expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_byte_order_reads_back_as_numpy_has_it(tmp_path, dtype):
    values = {f"a{i}": values_of(dtype, shape, i) for i, shape in enumerate(SHAPES)}
    fill = values_of(dtype, (), 99)
    fills = dict.fromkeys(values, fill)
    path = tmp_path / "t.h5"
    layout = write(path, tree(values, fills), values)
    assert not layout.omitted
    assert [r.path for r in layout.data_regions] == ["a0", "a1", "a2"]  # empty ones have none
    with h5py.File(path) as f:
        for name, expected in values.items():
            got = f[name]
            assert got.shape == expected.shape and got.dtype == expected.dtype
            offset = got.id.get_offset()
            assert offset is None if 0 in expected.shape else offset >= layout.header_size
            np.testing.assert_array_equal(got[()], expected)
            zero = dtype in ("S5", "<f2", ">f2")  # netCDF-C frees their fill as a pointer
            np.testing.assert_array_equal(got.fillvalue, np.zeros((), got.dtype) if zero else fill)
    h5dump(path)
    for name in ("a0", "a1", "a2"):
        np.testing.assert_array_equal(h5dump_values(path, name, values[name]), values[name])
    with netCDF4.Dataset(path) as nc:
        assert set(nc.variables) == set(values)


def test_contiguous_data_lies_where_the_layout_says(tmp_path):
    values = {
        "x": np.arange(5000, dtype=">i4"),
        "y": np.ones((3, 3), "<f8"),
        "e": np.zeros(0),
        "big": np.arange(300_000, dtype="<f8"),
    }
    path = tmp_path / "t.h5"
    layout = write(path, tree(values), values)
    with h5py.File(path) as f:
        for region in layout.data_regions:
            assert f[region.path].id.get_offset() == region.offset >= layout.header_size
            assert f[region.path].id.get_storage_size() == region.size
        assert f["e"].id.get_offset() is None
    ends = [r.offset + r.size for r in layout.data_regions]
    assert all(r.offset >= end for r, end in zip(layout.data_regions[1:], ends, strict=False))
    assert layout.size == ends[-1] == path.stat().st_size
    assert layout.data_regions[0].offset % 4096 == 0  # a page for regions of a page or more
    with h5py.File(path) as f:  # a MiB, the kernel's reads, for regions of a MiB or more
        assert f["big"].id.get_offset() % (1 << 20) == 0


ATTRIBUTES = {
    "title": "Température",
    "empty text": "",
    "with NUL": "a\0b",
    "n": 3,
    "negative": -(2**63),
    "big": 2**64 - 1,
    "huge": 2**70,
    "ratio": 0.25,
    "nan": math.nan,
    "flag": True,
    "flags": [True, False],
    "ints": [1, 2, 3],
    "mixed": [1, 2.5],
    "texts": ["a", "bé", ""],
    "nested": {"a": [1, "b", None]},
    "null": None,
    "nothing": [],
    "lists": [[1, 2], [3]],
    "long text": "x" * (1 << 20),
    "many": [float(i) for i in range(20000)],
    "many texts": [str(i) for i in range(5000)],
    "typed": np.arange(6, dtype=">i2"),  # netCDF-C refuses attributes of 2 dimensions
    "scalar": np.float32(1.5),
    "bytes": np.array([b"ab", b"cd"]),
    "clé ünïcode": 1,
    "with/slash and . dot": 2,
}


def test_attributes_read_back_as_given(tmp_path):
    values = {"x": np.arange(3, dtype="<u2")}
    root = tree(values, attrs={"x": ATTRIBUTES}, group_attrs={"": ATTRIBUTES})
    path = tmp_path / "t.h5"
    layout = write(path, root, values)
    assert not layout.omitted
    with h5py.File(path) as f:
        for holder in (f, f["x"]):
            assert set(holder.attrs) == set(ATTRIBUTES)
            for name, expected in ATTRIBUTES.items():
                got = holder.attrs[name]
                if isinstance(expected, float) and math.isnan(expected):
                    assert math.isnan(got)
                else:
                    assert_attribute(got, expected)
        kinds = {name: type(f.attrs[name]) for name in ("n", "big", "flag", "title", "nested")}
        assert kinds == {
            "n": np.int64,
            "big": np.uint64,
            "flag": np.bool_,
            "title": str,
            "nested": str,
        }
        assert f.attrs["texts"].dtype == object and f.attrs["flags"].dtype == bool
        assert f.attrs["with NUL"] == '"a\\u0000b"'  # JSON text: readers stop at a NUL
    h5dump(path, "-H")
    with netCDF4.Dataset(path) as nc:
        assert nc.getncattr("title") == "Température" and nc.getncattr("n") == 3
        assert list(nc.variables["x"].getncattr("ints")) == [1, 2, 3]


def test_references_name_objects_of_the_file(tmp_path):
    values = {"x": np.arange(3), "g/y": np.arange(2.0)}
    refs = {
        "one": Reference("g/y"),
        "root": Reference(""),
        "list": [Reference("x"), Reference("g")],
    }
    root = tree(values, group_attrs={"": {**refs, "gone": Reference("nowhere")}})
    path = tmp_path / "t.h5"
    layout = write(path, root, values)
    assert [(o.path, o.attribute) for o in layout.omitted] == [("", "gone")]
    with h5py.File(path) as f:
        assert f[f.attrs["one"]].name == "/g/y" and f[f.attrs["root"]].name == "/"
        assert [f[r].name for r in f.attrs["list"]] == ["/x", "/g"]
        assert "attribute 'gone': it refers to an object the file does not hold" in f.attrs[OMITTED]
    h5dump(path, "-H")


def test_names_hdf5_refuses_and_types_it_lacks_are_left_out_with_the_reason(tmp_path):
    ok = np.arange(2, dtype="i1")
    arrays = [
        Array(name, ok.shape, ok.dtype)
        for name in ("", ".", "a/b", "nul\0", "\udcff", "twice", "fine", "..", " ")
    ]
    arrays += [
        Array("text", (2,), np.dtype("<U3")),
        Array("when", (2,), np.dtype("<M8[ns]")),
        Array("record", (2,), np.dtype([("a", "<i4"), ("b", "<f4")])),
        Array("deep", (1,) * 33, np.dtype("u1")),
    ]
    root = Group("", {"": 1, "bad\0name": 2, "kept": 3}, [Group("twice")], arrays)
    values = {"fine": ok, "..": ok, " ": ok}
    path = tmp_path / "t.h5"
    layout = write(path, root, values)
    left = {o.path: o.why for o in layout.omitted if o.attribute is None}
    assert set(left) == {
        "",
        ".",
        "a/b",
        "nul\0",
        "\udcff",
        "twice",
        "text",
        "when",
        "record",
        "deep",
    }
    assert "UTF-32" in left["text"] and "32 dimensions" in left["deep"]
    assert "same name" in left["twice"] and "'/'" in left["a/b"]
    assert {o.attribute for o in layout.omitted if o.attribute is not None} == {"", "bad\0name"}
    with h5py.File(path) as f:
        assert sorted(f) == [" ", "..", "fine"]
        note = f.attrs[OMITTED]
        assert "'text': HDF5 has no UTF-32 strings" in note and "'\\udcff': HDF5" in note
        assert "attribute '': HDF5 refuses" in note and "attribute 'bad\\x00name'" in note
        assert dict(f.attrs)["kept"] == 3
    h5dump(path)


def test_groups_nested_too_deep_are_left_out(tmp_path):
    group = Group("g100")
    for depth in range(100, 0, -1):
        group = Group(f"g{depth - 1}", groups=[group])
    path = tmp_path / "t.h5"
    layout = write(path, Group("", groups=[group]), {})
    (omission,) = layout.omitted
    assert omission.path == "/".join(f"g{d}" for d in range(101)) and "100 deep" in omission.why
    with h5py.File(path) as f:
        assert len(f["/".join(f"g{d}" for d in range(99))]) == 1
    h5dump(path, "-H")


@pytest.mark.parametrize(("count", "k"), [(1000, {}), (50, {"leaf_k": 1, "internal_k": 1})])
def test_many_members_need_several_symbol_nodes_and_btree_levels(tmp_path, count, k):
    rng = np.random.default_rng(3)
    values = {f"v{i:04d}é": np.full(2, i, "<i4") for i in rng.permutation(count)}
    values |= {f"g{i}/x": np.arange(i + 1, dtype="u1") for i in range(3)}
    path = tmp_path / "t.h5"
    write(path, tree(values), values, **k)
    with h5py.File(path) as f:
        names = sorted({p.split("/")[0] for p in values}, key=lambda n: n.encode())
        assert list(f) == names
        for name in rng.choice(sorted(values), 40):
            np.testing.assert_array_equal(f[name][()], values[name])
        visited = []
        f.visititems(lambda name, obj: visited.append(name))
        assert len(visited) == len(values) + 3
    h5dump(path, "-H")


def test_an_empty_tree_is_a_file(tmp_path):
    path = tmp_path / "t.h5"
    layout = write(path, Group(), {})
    assert layout.data_regions == [] and layout.size == layout.header_size
    with h5py.File(path) as f:
        assert list(f) == [] and dict(f.attrs) == {}
    h5dump(path)
    with netCDF4.Dataset(path) as nc:
        assert not nc.variables


def test_a_group_of_10000_arrays_is_measured_and_made_in_parts(monkeypatch):
    attrs = {"units": "K", "scale_factor": 0.5, "_ARRAY_DIMENSIONS": ["y", "x"]}
    arrays = [
        Array(f"v{i:05d}", (100, 200), np.dtype("<f4"), np.array(np.nan, "<f4"), attrs)
        for i in range(10_000)
    ]
    layout = hdf5_layout(Group("", {"title": "big"}, arrays=arrays))
    assert layout.header_size >= 4 << 20 and len(layout.data_regions) == 10_000
    made = []
    real = messages.object_header
    monkeypatch.setattr(messages, "object_header", lambda m: made.append(m) or real(m))
    middle = layout.header_size // 3
    part = layout.header_range(middle, middle + 600)
    assert len(part) == 600 and 1 <= len(made) <= 3
    made.clear()
    whole = layout.header_range(0, layout.header_size)
    assert len(made) == 10_001 and whole[middle : middle + 600] == part
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.h5"
        with open(path, "wb") as f:
            f.write(whole)
            f.truncate(layout.size)  # sparse: no data written
        with h5py.File(path) as f:
            assert len(f) == 10_000
            for i in (0, 4321, 9999):  # text in the first, a middle and the last collection
                assert f[f"v{i:05d}"].attrs["units"] == "K"
                assert list(f[f"v{i:05d}"].attrs["_ARRAY_DIMENSIONS"]) == ["y", "x"]


def test_attributes_past_what_an_object_header_holds_are_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(messages, "MAX_MESSAGES", 8)  # 65,535 in the format
    given = {f"a{i}": i for i in range(10)}
    values = {"x": np.arange(3)}
    path = tmp_path / "t.h5"
    layout = write(path, tree(values, attrs={"x": given}, group_attrs={"": given}), values)
    assert {(o.path, o.attribute) for o in layout.omitted} == {
        (p, f"a{i}") for p in ("", "x") for i in range(3 if p else 6, 10)
    }
    with h5py.File(path) as f:
        assert sorted(f.attrs) == [*(f"a{i}" for i in range(6)), OMITTED]
        assert "attribute 'a9': more attributes than an object header holds" in f.attrs[OMITTED]
        assert len(f["x"].attrs) == 4  # with its dataspace, datatype, fill value, layout


def test_a_tree_changed_after_its_layout_is_refused_not_served():
    attributes = {"units": "K"}
    layout = hdf5_layout(Group("", attributes))
    attributes["scale"] = 0.5  # a header grows: its place no longer holds it
    with pytest.raises(TreeChanged):
        layout.header_range(0, layout.header_size)


# -- any tree --------------------------------------------------------------------------

NAMES = st.text(st.sampled_from("ab.é/ \0Z"), max_size=3)
SMALL_DTYPES = st.sampled_from(["?", "<i2", ">u4", ">f8", "<c8", "S3", ">f2", "<U2"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def trees(draw, depth=0):
    arrays = [
        Array(draw(NAMES), tuple(draw(st.lists(st.integers(0, 3), max_size=3))), np.dtype(dt))
        for dt in draw(st.lists(SMALL_DTYPES, max_size=4))
    ]
    groups = draw(st.lists(trees(depth + 1), max_size=3 if depth < 2 else 0))
    attributes = draw(st.dictionaries(NAMES, JSON, max_size=3))
    return Group(draw(NAMES), attributes, groups, arrays)


def expected_objects(group: Group, prefix: str = ""):
    """The paths a reader finds: valid, unique names; arrays of types HDF5 holds."""
    names = [m.name for m in (*group.groups, *group.arrays)]
    for member in (*group.groups, *group.arrays):
        name = member.name
        try:
            name.encode()
        except UnicodeEncodeError:
            continue
        if name in ("", ".") or "/" in name or "\0" in name or names.count(name) > 1:
            continue
        if isinstance(member, Array):
            if member.dtype.kind != "U":
                yield prefix + name, member
        else:
            yield prefix + name, member
            yield from expected_objects(member, prefix + name + "/")


@given(trees(), st.integers(1, 3), st.integers(1, 3), st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_tree_reads_back_and_its_header_is_the_same_made_in_any_part(
    root, leaf_k, internal_k, data
):
    expected = dict(expected_objects(root))
    values = {
        p: values_of(a.dtype.str, a.shape, len(p))
        for p, a in expected.items()
        if isinstance(a, Array)
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.h5"
        layout = write(path, root, values, leaf_k=leaf_k, internal_k=internal_k)
        whole = path.read_bytes()[: layout.header_size]
        for _ in range(5):
            a = data.draw(st.integers(0, layout.header_size))
            b = data.draw(st.integers(a, layout.header_size + 10))
            assert layout.header_range(a, b) == whole[a:b]
        with h5py.File(path) as f:
            found = []
            f.visit(found.append)
            assert sorted(found) == sorted(expected)
            for p, v in values.items():
                np.testing.assert_array_equal(f[p][()], v)
            for p, node in expected.items():
                kept = {k for k in node.attributes if k and "\0" not in k}
                assert set(f[p].attrs) - {OMITTED} == kept
                for name in kept:
                    assert_attribute(f[p].attrs[name], node.attributes[name])
        with netCDF4.Dataset(path) as nc:
            top = {p: node for p, node in expected.items() if "/" not in p}
            assert set(nc.groups) == {p for p, node in top.items() if isinstance(node, Group)}
            assert set(nc.variables) == {p for p, node in top.items() if isinstance(node, Array)}
