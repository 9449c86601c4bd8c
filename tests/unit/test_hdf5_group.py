"""A Zarr group's HDF5 file (``headers/hdf5_group``), without a mount: stores written by
zarr-python are parsed by our hierarchy code into entries, the file is written as the
mount serves it (the header, then each array's zarr-python values as the file's dtype at
its region) and read back by h5py and h5dump; expected values are zarr-python's."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from helpers.arrays import values_of
from test_hdf5_layout import assert_attribute, h5dump
from zarr.codecs import BytesCodec

from zarrmount import hierarchy
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.headers.hdf5 import OMITTED
from zarrmount.headers.hdf5_group import STRINGS, Entry, H5File, file_name, h5_file
from zarrmount.store.local import LocalStore

# dtypes zarr-python writes, in both byte orders where the format keeps one
V2_DTYPES = ["|b1", "|i1", "<i2", ">i4", "<u8", ">u2", "<f4", ">f8", "<f2", "<c8", ">c16", "|S4"]
V3_DTYPES = ["bool", "int8", "int16", "uint32", "int64", "float32", "float64", "complex64"]


def entries_of(store: Path, group: str = "") -> list[Entry]:
    """The entries of ``group``'s subtree as our hierarchy code parses the store; arrays of
    variable-length strings are not shown as files (as the mount)."""
    dialect, root, _ = hierarchy.open_hierarchy(LocalStore(str(store)))
    found = []
    for node in hierarchy.walk(dialect, root):
        if node.path != group and not node.path.startswith(f"{group}/" if group else ""):
            continue
        path = node.path[len(group) :].lstrip("/")
        if isinstance(node, GroupNode):
            found.append(Entry(path, node.attributes))
        elif isinstance(node, ArrayNode):
            meta = node.meta
            shown = meta.strings is None
            dtype = meta.dtype if shown else None
            found.append(Entry(path, meta.attributes, meta, dtype, "" if shown else STRINGS))
    return found


def write_file(path: Path, store: Path, group: str = "", byteorder: str = "") -> H5File:
    """The file of ``group`` as the mount serves it; ``byteorder`` ('<', '>'): the array
    files' bytes in that order instead of the stored one."""
    entries = entries_of(store, group)
    if byteorder:
        entries = [
            Entry(e.path, e.attributes, e.meta, e.dtype.newbyteorder(byteorder))
            if e.dtype is not None and e.dtype.itemsize > 1 and e.dtype.kind != "S"
            else e
            for e in entries
        ]
    made = h5_file(entries)
    dtypes = {e.path: e.dtype for e in entries}
    layout = made.layout
    opened = zarr.open_group(store, mode="r")
    with open(path, "wb") as f:
        f.write(layout.header_range(0, layout.header_size))
        for region in layout.data_regions:
            values = opened["/".join(p for p in (group, region.path) if p)][...]
            data = np.ascontiguousarray(values).astype(dtypes[region.path]).tobytes()
            assert len(data) == region.size
            f.seek(region.offset)
            f.write(data)
        f.truncate(layout.size)
    return made


ATTRS = {"title": "Température", "n": 3, "ratio": 0.5, "ints": [1, 2], "nested": {"a": None}}


def make_store(path: Path, zarr_format: int) -> Path:
    """A store of nested groups, an array of every dtype, strings and a scalar."""
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    root.attrs.update(ATTRS)
    dtypes = V2_DTYPES if zarr_format == 2 else V3_DTYPES
    for i, dtype in enumerate(dtypes):
        shape = (3, 5) if i % 2 else (7,)
        values = values_of(dtype, shape, i)
        fill = values.flat[0] if np.dtype(dtype).kind != "S" else b"zz"
        a = root.create_array(
            f"a{i}", shape=shape, chunks=(2,) * len(shape), dtype=dtype, fill_value=fill
        )
        a[...] = values
        a.attrs.update({"units": "m", "index": i})
    deep = root.create_group("g").create_group("h")
    deep.attrs["depth"] = 2
    root["g"].attrs["kind"] = "sub"
    x = deep.create_array("x", shape=(4, 3), chunks=(3, 3), dtype="<i4", fill_value=-1)
    x[:3] = np.arange(9).reshape(3, 3)
    s = root.create_array("scalar", shape=(), dtype="<f8", fill_value=2.5)
    s[...] = 1.25
    root.create_array("names", shape=(2,), dtype=str)[...] = np.array(["ab", "cde"])
    if zarr_format == 3:  # big-endian bytes in the chunks
        big = root.create_array(
            "big", shape=(5,), dtype="float64", serializer=BytesCodec(endian="big")
        )
        big[...] = np.linspace(0, 1, 5)
    return path


def check_against_zarr(path: Path, store: Path, group: str, made: H5File) -> None:
    """Every dataset and attribute equal to zarr-python's, the strings named left out."""
    opened = zarr.open_group(store, mode="r", path=group or None)
    with h5py.File(path) as f:
        seen: list[str] = []
        f.visit(seen.append)
        expected = [p for p, _ in opened.members(max_depth=None) if p != "names"]
        assert sorted(seen) == sorted(expected)
        for name in expected:
            want = opened[name]
            got = f[name]
            assert set(got.attrs) - {"_FillValue"} == dict(want.attrs).keys()
            for key, value in want.attrs.items():
                assert_attribute(got.attrs[key], value)
            if isinstance(want, zarr.Array):
                np.testing.assert_array_equal(got[()], want[...])
                fill = np.asarray(want.fill_value, want.dtype)
                if want.dtype.kind != "S" and want.dtype.str[1:] != "f2":  # zeros: see layout
                    np.testing.assert_array_equal(got.fillvalue, fill)
                if want.metadata.zarr_format == 2:  # what xarray masks with, as the array
                    assert got.attrs.get_id("_FillValue").dtype == want.dtype
                    np.testing.assert_array_equal(got.attrs["_FillValue"], fill)
                else:
                    assert "_FillValue" not in got.attrs  # none in the store's attributes
        assert set(f.attrs) - {OMITTED, "_NCProperties"} == set(opened.attrs)
        assert f.attrs["_NCProperties"].startswith(b"version=2,zarrmount=")
        assert "'names': " + STRINGS in f.attrs[OMITTED]
    assert made.omitted == [("names", STRINGS)]
    h5dump(path, "-H")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_every_group_reads_back_as_zarr_python_reads_the_store(tmp_path, zarr_format):
    store = make_store(tmp_path / "s.zarr", zarr_format)
    path = tmp_path / "s.h5"
    made = write_file(path, store)
    check_against_zarr(path, store, "", made)
    if zarr_format == 3:
        with h5py.File(path) as f:
            assert f["big"].dtype == np.dtype(">f8")  # its file's bytes, as stored
    sub = tmp_path / "g.h5"
    made = write_file(sub, store, "g")
    assert made.omitted == []
    with h5py.File(sub) as f:
        assert f.attrs["kind"] == "sub" and set(f.attrs) == {"kind", "_NCProperties"}
        np.testing.assert_array_equal(f["h/x"][()], zarr.open_group(store)["g/h/x"][...])
    h5dump(sub, "-H")


@pytest.mark.parametrize("order", ["<", ">"])
def test_array_files_in_another_byte_order_read_back_the_same(tmp_path, order):
    store = make_store(tmp_path / "s.zarr", 2)
    path = tmp_path / "s.h5"
    write_file(path, store, byteorder=order)
    opened = zarr.open_group(store, mode="r")
    with h5py.File(path) as f:
        for name in ("a2", "a3", "a9", "a10"):
            assert f[name].dtype.byteorder in (order, "=" if order == "<" else order)
            np.testing.assert_array_equal(f[name][()], opened[name][...])


def test_the_file_is_named_for_its_group():
    assert file_name("", "data") == "data.h5"
    assert file_name("a/b", "data") == "b.h5"
