"""Through the kernel: ``-o sidecars=hdf5`` shows in each group's directory ``NAME.h5``, the
group and everything below it as one HDF5 file (NAME: the group's name; for the root, the
source's name without ``.zarr``/``.zip``). h5py, h5dump and netCDF4 read it; every expected
value comes from zarr-python reading the same store (the dtype in its stored byte order:
nothing is converted), never from bytes the mount produced.

Arrays HDF5 cannot hold (UTF-32 text, variable-length strings, which have no array file)
are left out and named, with the reason, in their group's ``zarrmount_omitted``
attribute; attributes left out are named there too."""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import warnings
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr
from helpers import corpus as corpus_mod
from helpers.mounting import mounted, process_memory, run_cli, wait_until
from test_netcdf_view import MANY, MANY_CACHE_MIB, SMALL_ENCODING, _small_dataset, _write_many
from zarr.codecs import BytesCodec

pytestmark = pytest.mark.mount

OMITTED_ATTR = "zarrmount_omitted"
H5DUMP = shutil.which("h5dump")
DEADLINE_S = 20.0  # the reload test polls the outcome this long at most
# what HDF5 holds no type for: UTF-32 text, datetimes, records, objects
UNHELD_KINDS = "UMmVOT"
# attributes netCDF-4 readers expect of an HDF5 file and its datasets, which the file may
# add to the store's (Unidata's "NetCDF-4 format" and HDF5's dimension scales)
NETCDF4_ATTRS = {
    "_NCProperties",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_FillValue",
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "CLASS",
    "NAME",
    OMITTED_ATTR,
}
GROUP_STORES = [name for _writer, name in corpus_mod.STORES if name != "root-array-v3"]


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def h5_path(mount, group: str = "") -> str:
    """``GROUP/NAME.h5`` in ``mount``; the root's is named after the source."""
    if not group:
        return mount.p(Path(mount.source).name.removesuffix(".zarr") + ".h5")
    return mount.p(f"{group}/{group.rpartition('/')[2]}.h5")


def omitted_names(text: str | None) -> set[str]:
    """The names ``zarrmount_omitted`` ("'name': why; attribute 'name': why") gives."""
    if text is None:
        return set()
    return set(re.findall(r"(?:^|;)\s*(?:attribute\s+)?'?([^:;']+?)'?:", text))


def plain(value):
    """An attribute as h5py gives it, as Python values (text: as written)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray | np.generic):
        return plain(value.tolist()) if value.dtype.kind in "OS" else value.tolist()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def xarray_fill(value):
    """A ``_FillValue`` attribute as xarray decodes it: v3 stores hold a float's as base64
    of a little-endian double (``xarray.backends.zarr.FillValueCoder``)."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), "<f8")[0]
    return value


def assert_attributes(got: h5py.AttributeManager, expected: dict, where: str) -> None:
    """Every attribute of the store is there, but those ``zarrmount_omitted`` names and
    ``_ARRAY_DIMENSIONS`` (dimension scales: ``assert_dimensions``); JSON text where HDF5
    has no type for the value; ``_FillValue`` typed, as xarray decodes it; the file adds
    only netCDF-4's."""
    left_out = omitted_names(plain(got.get(OMITTED_ATTR)))
    names = set(got.keys())
    assert names - set(expected) <= NETCDF4_ATTRS, (where, names - set(expected))
    for name, value in expected.items():
        if name in left_out or name == "_ARRAY_DIMENSIONS":
            continue
        assert name in names, (where, name)
        found = plain(got[name])
        if name == "_FillValue":
            value = xarray_fill(value)
        elif isinstance(found, str) and not isinstance(value, str):
            found = json.loads(found)
        np.testing.assert_equal(found, value, err_msg=f"{where}: {name}")


def zarr_dimensions(array) -> tuple[str, ...] | None:
    """The dimension names zarr-python gives an array (v3), or xarray's (v2)."""
    names = getattr(array.metadata, "dimension_names", None)
    if names is None:
        names = array.attrs.get("_ARRAY_DIMENSIONS")
    return None if names is None or None in names else tuple(names)


def assert_dimensions(path: str, datasets: dict[str, object]) -> None:
    """netCDF-C reads each dataset's dimensions by the names the store gives them, but
    where the dataset names a dimension or ``DIMENSION_LIST`` left out (a dimension
    netCDF-4 cannot have: another length in the group, no scale)."""
    with netCDF4.Dataset(path) as ds:
        assert ds.data_model == "NETCDF4"
        for rel, array in datasets.items():
            dims = zarr_dimensions(array)
            parent, _, leaf = rel.rpartition("/")
            variable = (ds[parent] if parent else ds).variables[leaf]
            why = variable.__dict__.get(OMITTED_ATTR, "")
            if dims is not None and "DIMENSION_LIST" not in why and "dimension '" not in why:
                assert variable.dimensions == dims, (rel, variable.dimensions, dims)


def groups_of(store: Path) -> list[str]:
    """Every group of the store as zarr-python lists it, the root ('') first."""
    with _quiet():
        root = zarr.open_group(store, mode="r")
        found = [
            name for name, node in root.members(max_depth=None) if isinstance(node, zarr.Group)
        ]
    return ["", *sorted(found)]


def assert_h5_is_the_subtree(path: str, store: Path, group: str) -> None:
    """h5py reads every array below ``group`` as zarr-python does (values, stored byte
    order, fill value), every group as an HDF5 group, every attribute as the store has
    it; those HDF5 cannot hold are named left out by their group. netCDF-C reads their
    dimensions."""
    below = f"{group}/" if group else ""
    arrays = [a for a in corpus_mod.oracle_arrays(store) if a.path.startswith(below)]
    datasets = {}
    with _quiet(), h5py.File(path, "r") as f:
        root = zarr.open_group(store, path=group or None, mode="r")
        assert_attributes(f.attrs, dict(root.attrs), path)
        for name in groups_of(store):
            if name.startswith(below) and name != group:
                member = f[name[len(below) :]]
                assert isinstance(member, h5py.Group), name
                opened = zarr.open_group(store, path=name, mode="r")
                assert_attributes(member.attrs, dict(opened.attrs), name)
        for array in arrays:
            rel = array.path[len(below) :]
            parent, _, leaf = rel.rpartition("/")
            if not array.has_raw_form or array.dtype.kind in UNHELD_KINDS:
                owner = f[parent] if parent else f
                if rel in f:  # only as netCDF-4's dimension of its name, holding no data
                    scale = f[rel].attrs
                    assert plain(scale.get("CLASS")) == "DIMENSION_SCALE", rel
                    assert "not a netCDF variable" in plain(scale.get("NAME", "")), rel
                assert leaf in omitted_names(plain(owner.attrs.get(OMITTED_ATTR))), rel
                continue
            dataset = f[rel]
            assert isinstance(dataset, h5py.Dataset), rel
            assert dataset.dtype == array.file_dtype(), (rel, dataset.dtype, array.file_dtype())
            np.testing.assert_array_equal(dataset[...], array.array[...], err_msg=rel)
            fill = array.array.fill_value
            if fill is not None and array.dtype.kind in "iufcb":
                np.testing.assert_equal(dataset.fillvalue, np.asarray(fill).astype(dataset.dtype))
            assert_attributes(dataset.attrs, dict(array.array.attrs), rel)
            datasets[rel] = array.array
    assert_dimensions(path, datasets)


def h5dump_header(path: str) -> None:
    if H5DUMP is None:
        pytest.skip("h5dump (Debian's hdf5-tools) is not installed")
    done = subprocess.run([H5DUMP, "-H", path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# ---------------------------------------------------------------------------------------
# (a) every group of the corpus's stores
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_mod.build(tmp_path_factory.mktemp("hdf5-view") / "corpus")


@pytest.mark.parametrize("name", GROUP_STORES)
def test_every_group_of_a_corpus_store_is_its_subtree_as_hdf5(corpus, name):
    if name not in corpus.stores:
        pytest.skip(f"{name}: not written here ({corpus.skipped})")
    store = corpus.stores[name].path
    with mounted(store, sidecars="hdf5+text", tag=f"h5-{name}") as mount:
        for group in groups_of(store):
            path = h5_path(mount, group)
            assert os.path.isfile(path), (group, os.listdir(os.path.dirname(path)))
            assert_h5_is_the_subtree(path, store, group)
            h5dump_header(path)
        mount.assert_alive()


XARRAY_STORES = [name for writer, name in corpus_mod.STORES if writer == corpus_mod.XARRAY]


@pytest.mark.parametrize("name", XARRAY_STORES)
def test_xarray_reads_each_group_of_an_h5_as_it_reads_the_store(corpus, name):
    """Every group, in the root's file and in its own: ``open_dataset(engine="h5netcdf")``
    is identical to ``open_zarr`` but for the variables the file names left out; ncdump
    prints the store's dimension names."""
    store = corpus.stores[name].path
    with mounted(store, sidecars="hdf5+text", tag=f"h5-xr-{name}") as mount:
        for got, expected in each_group_read_both_ways(mount, store):
            left_out = omitted_names(got.attrs.pop(OMITTED_ATTR, None))
            want = expected.drop_vars(sorted(left_out & set(expected.variables)))
            xr.testing.assert_identical(got, want.load())


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_reads_an_h5_of_a_datatree_as_it_reads_the_store(tmp_path, fmt):
    """A DataTree xarray wrote (packed and masked variables, unsigned types, a CF time,
    coordinates at two levels): each group of the root's file and each group's own file
    identical to ``open_zarr``; ncdump prints their dimensions."""
    store = tmp_path / f"tree-v{fmt}.zarr"
    child = xr.Dataset(
        {"v": (("k",), np.array([1.5, np.nan, 3.0, 4.5]), {"units": "s"})},
        coords={"k": ("k", np.array([10, 20, 30, 40], "i4"), {"long_name": "key"})},
        attrs={"title": "child"},
    )
    tree = xr.DataTree.from_dict({"/": _small_dataset(), "/child": child, "/child/leaf": child})
    with _quiet():
        tree.to_zarr(store, zarr_format=fmt, encoding={"/": SMALL_ENCODING}, consolidated=False)
    with mounted(store, sidecars="hdf5", tag=f"h5-tree-v{fmt}") as mount:
        for got, expected in each_group_read_both_ways(mount, store, consolidated=False):
            assert OMITTED_ATTR not in got.attrs, got.attrs[OMITTED_ATTR]
            xr.testing.assert_identical(got, expected.load())
        mount.assert_alive()


def each_group_read_both_ways(mount, store: Path, **zarr_options):
    """For each group of ``store``, from the root's .h5 and from its own, the group as
    xarray's h5netcdf engine reads it (loaded) and as ``open_zarr`` does; then ncdump's
    check of the group's own .h5."""
    for group in groups_of(store):
        for path, inside in ((h5_path(mount), group), (h5_path(mount, group), "")):
            with (
                _quiet(),
                xr.open_dataset(path, engine="h5netcdf", group=inside or None) as opened,
                xr.open_zarr(store, group=group or None, **zarr_options) as expected,
            ):
                yield opened.load(), expected
        assert_ncdump_names_dimensions(h5_path(mount, group), store, group)


def assert_ncdump_names_dimensions(path: str, store: Path, group: str) -> None:
    """``ncdump -h`` declares every dimension zarr-python names in the group's arrays."""
    if shutil.which("ncdump") is None:
        pytest.skip("ncdump (Debian's netcdf-bin) is not installed")
    done = subprocess.run(["ncdump", "-h", path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    declared = set(re.findall(r"^\s+(\S+) = \d+ ;$", done.stdout, re.MULTILINE))
    with _quiet():
        arrays = zarr.open_group(store, path=group or None, mode="r").arrays()
        named = {d for _, a in arrays for d in zarr_dimensions(a) or ()}
    assert named <= declared, (named - declared, done.stdout[:2000])


def test_a_root_array_has_no_hdf5_file(corpus):
    with mounted(corpus.stores["root-array-v3"].path, sidecars="hdf5", tag="h5-root") as m:
        assert not [n for n in os.listdir(m.p()) if n.endswith(".h5")]


# ---------------------------------------------------------------------------------------
# (b) byte orders, nesting, the mount's byte order
# ---------------------------------------------------------------------------------------


def _write_orders(root: Path, fmt: int) -> None:
    """Big- and little-endian arrays three groups deep."""
    rng = np.random.default_rng(fmt)
    with _quiet():
        top = zarr.open_group(root, mode="w", zarr_format=fmt, attributes={"title": "orders"})
        group = top
        for depth, name in enumerate(("a", "b", "c")):
            group = group.create_group(name, attributes={"depth": depth, "tags": ["x", "y"]})
            for order in "<>":
                for dtype in ("i2", "u4", "f8", "c8", "i8"):
                    dt = np.dtype(order + dtype)
                    kw = (
                        {"dtype": dt}
                        if fmt == 2
                        else {
                            "dtype": dt.newbyteorder("="),
                            "serializer": BytesCodec(endian="little" if order == "<" else "big"),
                        }
                    )
                    values = (
                        rng.normal(0, 1000, (6, 5)) * (1 + 1j if dt.kind == "c" else 1)
                    ).astype(dt)
                    arr = group.create_array(
                        f"{dtype}{'le' if order == '<' else 'be'}",
                        shape=(6, 5),
                        chunks=(4, 2),
                        fill_value=3,
                        attributes={"units": "m", "scale": [1.5, 2.0]},
                        **kw,
                    )
                    arr[...] = values


@pytest.mark.parametrize("fmt", [2, 3])
def test_big_and_little_endian_arrays_keep_their_byte_order_at_every_depth(tmp_path, fmt):
    store = tmp_path / f"orders-v{fmt}.zarr"
    _write_orders(store, fmt)
    with mounted(store, sidecars="hdf5", tag=f"h5-orders-v{fmt}") as mount:
        for group in groups_of(store):
            path = h5_path(mount, group)
            assert_h5_is_the_subtree(path, store, group)
            h5dump_header(path)
        with h5py.File(h5_path(mount), "r") as f:
            assert f["a/b/c/f8be"].dtype == np.dtype(">f8")
            assert f["a/b/c/f8le"].dtype == np.dtype("<f8")
        # each directory holds one .h5, of its own subtree
        for group in groups_of(store):
            folder = mount.p(group) if group else mount.p()
            assert [n for n in os.listdir(folder) if n.endswith(".h5")] == [
                os.path.basename(h5_path(mount, group))
            ]
        mount.assert_alive()


def test_the_mounts_byte_order_is_the_datasets(tmp_path):
    store = tmp_path / "orders.zarr"
    _write_orders(store, 2)
    with (
        mounted(store, ["byteorder=big"], sidecars="hdf5", tag="h5-big") as mount,
        _quiet(),
        h5py.File(h5_path(mount), "r") as f,
    ):
        for order in ("le", "be"):
            dataset = f[f"a/b/i8{order}"]
            assert dataset.dtype == np.dtype(">i8")
            expected = zarr.open_array(store, path=f"a/b/i8{order}", mode="r")[...]
            np.testing.assert_array_equal(dataset[...], expected)


# ---------------------------------------------------------------------------------------
# (c) read-only; a reload; a real node first
# ---------------------------------------------------------------------------------------


def test_h5_files_are_read_only(tmp_path):
    store = tmp_path / "ro.zarr"
    _write_orders(store, 3)
    with mounted(store, ["rw"], sidecars="hdf5", tag="h5-rw") as mount:
        path = h5_path(mount, "a")
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            with pytest.raises(OSError) as caught:
                os.close(os.open(path, flags))
            assert caught.value.errno in (errno.EROFS, errno.EACCES)
        assert os.stat(path).st_mode & 0o222 == 0


def test_sighup_makes_a_new_file_and_an_open_one_stays_whole(tmp_path):
    """An array added two groups below: the root's file shows it once reloaded, while a
    handle opened before reads the file it opened, whole."""
    root = tmp_path / "reload.zarr"
    with _quiet():
        deep = zarr.open_group(root, mode="w", zarr_format=3).create_group("x").create_group("y")
        deep.create_array("a", shape=(6,), dtype="<f8")[...] = np.linspace(0, 1, 6)
    with mounted(root, sidecars="hdf5", tag="h5-reload") as mount:
        path = h5_path(mount)
        with h5py.File(path, "r") as before:
            assert list(before["x/y"]) == ["a"]
            with _quiet():
                added = zarr.open_group(root, path="x/y", mode="a")
                big = BytesCodec(endian="big")
                added.create_array("b", shape=(2, 3), dtype="i4", serializer=big)[...] = 5
            mount.proc.send_signal(signal.SIGHUP)

            def members() -> list[str]:
                try:
                    with h5py.File(path, "r") as f:
                        return list(f["x/y"])
                except (OSError, KeyError):  # caught between two versions of the file
                    return []

            wait_until(lambda: "b" in members(), DEADLINE_S, 0.1)
            assert members() == ["a", "b"], mount.read_log()[-3000:]
            np.testing.assert_array_equal(before["x/y/a"][...], np.linspace(0, 1, 6))
            assert list(before["x/y"]) == ["a"]
        with h5py.File(path, "r") as after:
            np.testing.assert_array_equal(after["x/y/b"][...], np.full((2, 3), 5, ">i4"))
            assert after["x/y/b"].dtype == np.dtype(">i4")
        mount.assert_alive()


def test_a_real_array_named_like_the_h5_stays_the_real_node(tmp_path):
    root = tmp_path / "shadow.zarr"
    with _quiet():
        group = zarr.open_group(root, mode="w", zarr_format=3).create_group("g")
        group.create_array("g.h5", shape=(5,), dtype="u1")[...] = [1, 2, 3, 4, 5]
    with mounted(root, sidecars="hdf5", tag="h5-shadow") as mount:
        assert np.fromfile(mount.p("g/g.h5"), dtype="u1").tolist() == [1, 2, 3, 4, 5]
        with h5py.File(h5_path(mount), "r") as f:
            np.testing.assert_array_equal(f["g/g.h5"][...], [1, 2, 3, 4, 5])


def test_inspect_names_each_arrays_h5_or_why_it_has_none(tmp_path):
    root = tmp_path / "odd.zarr"
    with _quiet():
        group = zarr.open_group(root, mode="w", zarr_format=3).create_group("g")
        group.create_array("num", shape=(3,), dtype="<f4")
        group.create_array("utf32", shape=(3,), dtype="<U4")
        group.create_array("text", shape=(3,), dtype=str)
    done = run_cli(["--inspect", str(root), "--json", "-o", "sidecars=hdf5"])
    assert done.returncode == 0, done.stderr
    found = {
        n["path"]: n["sidecars"]["hdf5"]
        for n in json.loads(done.stdout)["nodes"]
        if "sidecars" in n
    }
    assert found["g/num"] == {"file": "g/g.h5"}
    assert set(found["g/utf32"]) == {"reason"} and set(found["g/text"]) == {"reason"}
    with mounted(root, sidecars="hdf5", tag="h5-odd") as mount, h5py.File(h5_path(mount, "g")) as f:
        assert list(f) == ["num"]
        assert "utf32" in omitted_names(plain(f.attrs[OMITTED_ATTR]))


# ---------------------------------------------------------------------------------------
# (d) a group of 10,000 arrays: opened without a chunk loaded
# ---------------------------------------------------------------------------------------


def test_a_group_of_10000_arrays_opens_without_loading_a_chunk(tmp_path):
    _write_many(tmp_path / "many.zarr")
    options = [f"cache_size={MANY_CACHE_MIB}M"]
    with mounted(tmp_path / "many.zarr", options, sidecars="hdf5", tag="h5-many") as m:
        with h5py.File(m.p("g/g.h5"), "r") as f:
            assert sum(name.startswith("v") for name in f) == MANY  # and dimensions
            last = f["v09999"]
            assert last.attrs["long_name"] == "variable 9999" and last.shape == (3,)
            stats = json.loads(run_cli(["--stats", m.path, "--json"], timeout=60).stdout)
            assert stats["cache_misses"] == 0, stats
            np.testing.assert_array_equal(last[...], np.full(3, 1.5, "f4"))
        with h5py.File(m.p("many.h5"), "r") as f:
            assert sum(name.startswith("v") for name in f["g"]) == MANY
        assert process_memory(m.proc.pid) <= (MANY_CACHE_MIB + 150) << 20
