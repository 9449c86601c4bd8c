"""Through the kernel: programs that know nothing of Zarr open mounted arrays by the files
beside them (``-o sidecars``): NumPy a ``.npy`` view, tifffile a ``.tif`` view, pynrrd a
``.nhdr`` header, GDAL an ENVI ``.hdr`` header. Every expected value comes from
zarr-python reading the same store; which files exist follows the formats' own rules,
written out here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import nrrd
import numpy as np
import pytest
import tifffile
import zarr
from helpers.mounting import mounted

pytestmark = pytest.mark.mount

ALL = "sidecars=envi+nrrd+npy+tiff"
# name: (zarr format, dtype, shape, chunks)
ARRAYS = {
    "f4_2d": (3, "<f4", (37, 53), (16, 16)),
    "f4_img": (2, "<f4", (33, 20), (16, 16)),
    "u2_3d": (2, "<u2", (3, 20, 30), (2, 8, 16)),
    "i4_big": (2, ">i4", (25, 18), (10, 10)),
    "i1_1d": (3, "|i1", (70,), (32,)),
    "f8_4d": (3, "<f8", (2, 3, 4, 5), (1, 2, 2, 5)),
    "b1_2d": (3, "|b1", (6, 7), (4, 4)),
    "scalar": (3, "<i8", (), ()),
}
# ENVI: 2-D and 3-D arrays of its data types (there is no int8 nor bool).
ENVI_TYPES = {"u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8", "c8", "c16"}


def _has_envi(dtype: np.dtype, ndim: int) -> bool:
    return ndim in (2, 3) and dtype.str[1:] in ENVI_TYPES


def _has_nrrd(dtype: np.dtype, ndim: int) -> bool:
    return ndim >= 1 and dtype.kind in "iuf" and dtype.itemsize in (1, 2, 4, 8)


def _has_tiff(dtype: np.dtype, ndim: int) -> bool:
    return 1 <= ndim <= 3 and dtype.kind in "biuf"  # bool as 8-bit 0 and 1


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A v3 and a v2 store holding the ARRAYS of their format."""
    base = tmp_path_factory.mktemp("sidecars")
    rng = np.random.default_rng(5)
    groups = {
        fmt: zarr.open_group(str(base / f"v{fmt}.zarr"), mode="w", zarr_format=fmt)
        for fmt in (2, 3)
    }
    for name, (fmt, dtype, shape, chunks) in ARRAYS.items():
        values = (rng.standard_normal(shape) * 1000).astype(dtype)
        array = groups[fmt].create_array(name, shape=shape, chunks=chunks or "auto", dtype=dtype)
        array[...] = values
    # a real array whose name a sidecar would take: it stays the real node
    groups[3].create_array("f4_2d.hdr", shape=(4,), dtype="<u1")[:] = np.arange(4)
    return {fmt: str(base / f"v{fmt}.zarr") for fmt in (2, 3)}


def _mounted(mount_factory, store, options, tag):
    """Both stores mounted; yields (mount, store root, array name) for each of ARRAYS."""
    mounts = {fmt: mount_factory(root, options, tag=f"{tag}-v{fmt}") for fmt, root in store.items()}
    for name, (fmt, *_) in ARRAYS.items():
        yield mounts[fmt], store[fmt], name


def _oracle(root: str, path: str) -> np.ndarray:
    return np.asarray(zarr.open_array(root, path=path, mode="r")[...])


def test_each_array_gets_the_sidecars_its_formats_allow(mount_factory, store):
    for mount, _, name in _mounted(mount_factory, store, [ALL], "sidecars-list"):
        listed = set(os.listdir(mount.p()))
        dtype, ndim = np.dtype(ARRAYS[name][1]), len(ARRAYS[name][2])
        expected = {
            ".hdr": _has_envi(dtype, ndim),  # f4_2d.hdr: a real array (see below)
            ".nhdr": _has_nrrd(dtype, ndim),
            ".npy": True,
            ".tif": _has_tiff(dtype, ndim),
        }
        for suffix, present in expected.items():
            assert (name + suffix in listed) == present, (name, suffix)


def test_a_real_node_named_like_a_sidecar_stays_the_real_node(mount_factory, store):
    mount = mount_factory(store[3], [ALL], tag="sidecars-real")
    assert np.array_equal(np.fromfile(mount.p("f4_2d.hdr"), dtype="<u1"), np.arange(4))
    assert "no envi sidecar" in mount.read_log()


def test_npy_views_load_equal_to_zarr(mount_factory, store):
    for mount, root, name in _mounted(mount_factory, store, [ALL], "sidecars-npy"):
        expected = _oracle(root, name)
        for mode in (None, "r"):
            got = np.load(mount.p(name + ".npy"), mmap_mode=mode)
            assert got.dtype == expected.dtype and got.shape == expected.shape, name
            assert np.array_equal(got, expected), (name, mode)


def test_tiff_views_read_equal_to_zarr(mount_factory, store):
    for mount, root, name in _mounted(mount_factory, store, [ALL], "sidecars-tiff"):
        dtype, shape = np.dtype(ARRAYS[name][1]), ARRAYS[name][2]
        if not _has_tiff(dtype, len(shape)):
            continue
        expected = _oracle(root, name)
        tif = mount.p(name + ".tif")
        for got in (tifffile.imread(tif), tifffile.memmap(tif, mode="r")):
            assert np.array_equal(got.reshape(shape), expected), name


def test_nrrd_headers_read_equal_to_zarr(mount_factory, store):
    for mount, root, name in _mounted(mount_factory, store, [ALL], "sidecars-nrrd"):
        dtype, shape = np.dtype(ARRAYS[name][1]), ARRAYS[name][2]
        if not _has_nrrd(dtype, len(shape)):
            continue
        got, _ = nrrd.read(mount.p(name + ".nhdr"), index_order="C")
        assert np.array_equal(got, _oracle(root, name)), name


@pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="GDAL (gdal-bin) is not installed")
def test_gdal_opens_arrays_by_their_envi_headers(mount_factory, store, tmp_path):
    env = dict(os.environ, GDAL_PAM_ENABLED="NO")
    for mount, root, name in _mounted(mount_factory, store, [ALL], "sidecars-gdal"):
        if name not in ("f4_img", "u2_3d", "i4_big"):
            continue
        path = mount.p(name)
        info = json.loads(
            subprocess.run(
                ["gdalinfo", "-json", path], env=env, capture_output=True, check=True
            ).stdout
        )
        expected = _oracle(root, name)
        bands = expected.shape[0] if expected.ndim == 3 else 1
        assert info["size"] == [expected.shape[-1], expected.shape[-2]]
        assert len(info["bands"]) == bands
        out = tmp_path / f"{name}.raw"
        subprocess.run(["gdal_translate", "-q", "-of", "ENVI", path, str(out)], env=env, check=True)
        got = np.fromfile(out, dtype=expected.dtype.newbyteorder("=")).reshape(expected.shape)
        assert np.array_equal(got, expected), name


def test_npy_view_writes_reach_the_array(tmp_path):
    root = str(tmp_path / "rw.zarr")
    zarr.create_array(root, shape=(40, 50), chunks=(16, 16), dtype="<i2", fill_value=0)
    expected = np.zeros((40, 50), dtype="<i2")
    expected[3:30, 7:41] = np.arange(27 * 34).reshape(27, 34)
    with mounted(root, ["rw", "sidecars=npy"], tag="sidecars-rw") as mount:
        view = np.load(mount.p("array.npy"), mmap_mode="r+")
        view[3:30, 7:41] = expected[3:30, 7:41]
        view.flush()
        del view
    assert np.array_equal(zarr.open_array(root, mode="r")[...], expected)


@pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="GDAL (gdal-bin) is not installed")
def test_byteorder_big_shows_swapped_bytes_that_gdal_reads_right(mount_factory, store, tmp_path):
    root, name = store[3], "f4_2d"  # little-endian float32, shown big-endian
    mount = mount_factory(root, ["sidecars=nrrd+npy", "byteorder=big"], tag="sidecars-big")
    expected = _oracle(root, name)
    path = mount.p(name)
    assert os.getxattr(path, "user.zarr.dtype") == b">f4"
    assert np.array_equal(np.fromfile(path, dtype=">f4").reshape(expected.shape), expected)
    assert np.load(path + ".npy").dtype == np.dtype(">f4")
    got, header = nrrd.read(path + ".nhdr", index_order="C")
    assert header["endian"] == "big" and np.array_equal(got, expected)
    # GDAL, by an ENVI header beside a big-endian 2-D array of the v2 store
    mount = mount_factory(store[2], ["sidecars=envi", "byteorder=big"], tag="sidecars-big-gdal")
    out = tmp_path / "img.raw"
    env = dict(os.environ, GDAL_PAM_ENABLED="NO")
    subprocess.run(
        ["gdal_translate", "-q", "-of", "ENVI", mount.p("f4_img"), str(out)], env=env, check=True
    )
    expected = _oracle(store[2], "f4_img")
    assert np.array_equal(np.fromfile(out, dtype="=f4").reshape(expected.shape), expected)
