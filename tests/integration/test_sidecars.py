"""Through the kernel: programs that know nothing of Zarr open mounted arrays by the files
beside them (``-o sidecars``): NumPy a ``.npy`` view, tifffile a ``.tif`` view, pynrrd a
``.nhdr`` header, GDAL an ENVI ``.hdr`` header. Every expected value comes from
zarr-python reading the same store; which files exist follows the formats' own rules,
written out here."""

from __future__ import annotations

import json
import mmap
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
# GDAL's names of the types of the arrays it is shown
GDAL_TYPES = {"f4": "Float32", "u2": "UInt16", "i4": "Int32"}
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
        chunks = ARRAYS[name][3]
        tiled = len(shape) >= 2 and chunks[-1] % 16 == 0 and chunks[-2] % 16 == 0
        with tifffile.TiffFile(tif) as t:
            assert t.pages[0].is_tiled == tiled, name
        readers = [tifffile.imread] + ([] if tiled else [lambda p: tifffile.memmap(p, mode="r")])
        for read in readers:  # tiles are not in C order: no memory map of a tiled view
            assert np.array_equal(read(tif).reshape(shape), expected), name


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
        assert {b["type"] for b in info["bands"]} == {GDAL_TYPES[expected.dtype.str[1:]]}
        out = tmp_path / f"{name}.raw"
        subprocess.run(["gdal_translate", "-q", "-of", "ENVI", path, str(out)], env=env, check=True)
        got = np.fromfile(out, dtype=expected.dtype.newbyteorder("=")).reshape(expected.shape)
        assert np.array_equal(got, expected), name


def _writable(tmp_path, shape: tuple[int, int], dtype: str):
    """A new store of one array of zeros, what it holds once a block of it is written,
    and that block: ``(root, expected, block)``."""
    root = str(tmp_path / "rw.zarr")
    zarr.create_array(root, shape=shape, chunks=(16, 16), dtype=dtype, fill_value=0)
    block = (slice(3, shape[0] - 4), slice(7, shape[1] - 9))
    expected = np.zeros(shape, dtype=dtype)
    expected[block] = np.arange(expected[block].size).reshape(expected[block].shape)
    return root, expected, block


def test_npy_view_writes_reach_the_array(tmp_path):
    root, expected, block = _writable(tmp_path, (40, 50), "<i2")
    with mounted(root, ["rw", "sidecars=npy"], tag="sidecars-rw") as mount:
        view = np.load(mount.p("array.npy"), mmap_mode="r+")
        view[block] = expected[block]
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


@pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="GDAL (gdal-bin) is not installed")
def test_gdal_reads_the_tiff_views_page_by_page(mount_factory, store, tmp_path):
    env = dict(os.environ, GDAL_PAM_ENABLED="NO")
    for mount, root, name in _mounted(mount_factory, store, [ALL], "sidecars-gdal-tif"):
        if name not in ("f4_2d", "f4_img", "u2_3d", "i4_big"):
            continue
        expected = _oracle(root, name)
        pages = expected if expected.ndim == 3 else expected[np.newaxis]
        for page, want in enumerate(pages):
            source = f"GTIFF_DIR:{page + 1}:{mount.p(name + '.tif')}"
            info = json.loads(
                subprocess.run(
                    ["gdalinfo", "-json", source], env=env, capture_output=True, check=True
                ).stdout
            )
            assert info["size"] == [want.shape[-1], want.shape[-2]] and len(info["bands"]) == 1
            assert info["bands"][0]["type"] == GDAL_TYPES[want.dtype.str[1:]]
            out = tmp_path / f"{name}-{page}.raw"
            subprocess.run(
                ["gdal_translate", "-q", "-of", "ENVI", source, str(out)], env=env, check=True
            )
            got = np.fromfile(out, dtype=want.dtype.newbyteorder("=")).reshape(want.shape)
            assert np.array_equal(got, want), (name, page)


IMAGEMAGICK = "/usr/bin/convert"  # elsewhere on PATH, "convert" may be something else


@pytest.mark.skipif(not os.path.exists(IMAGEMAGICK), reason="ImageMagick is not installed")
def test_imagemagick_reads_the_tiff_views(mount_factory, store):
    mount = mount_factory(store[2], ["sidecars=tiff"], tag="sidecars-magick")
    expected = _oracle(store[2], "u2_3d")  # 16-bit pages: exact in ImageMagick's Q16
    for page, want in enumerate(expected):
        got = subprocess.run(
            [
                IMAGEMAGICK,
                f"{mount.p('u2_3d.tif')}[{page}]",
                "-depth",
                "16",
                "-endian",
                "LSB",
                "gray:-",
            ],
            capture_output=True,
            check=True,
        ).stdout
        assert np.array_equal(np.frombuffer(got, dtype="<u2").reshape(want.shape), want), page


def _tiled(path: str) -> bool:
    if not path.endswith(".tif"):
        return False
    with tifffile.TiffFile(path) as t:
        return t.pages[0].is_tiled


def test_read_mappings_of_every_file_and_view_equal_its_bytes(mount_factory, store):
    """Shared mappings, but of tiled views, which are read past the page cache: those
    map privately (a shared mapping fails with ENODEV, and libtiff then reads)."""
    for fmt, root in store.items():
        mount = mount_factory(root, [ALL + "+text"], tag=f"sidecars-mmap-v{fmt}")
        for name in sorted(os.listdir(mount.p())):
            with open(mount.p(name), "rb") as f:
                data = f.read()
                if not data:
                    continue
                share = mmap.MAP_PRIVATE if _tiled(mount.p(name)) else mmap.MAP_SHARED
                with mmap.mmap(f.fileno(), 0, share, mmap.PROT_READ) as mapped:
                    assert mapped[:] == data, name


def test_writable_shared_mapping_reaches_the_store_on_close_without_msync(tmp_path):
    root, expected, block = _writable(tmp_path, (64, 48), "<u4")
    with mounted(root, ["rw", "writeback_delay=600"], tag="sidecars-mmap-rw") as mount:
        fd = os.open(mount.p("array"), os.O_RDWR)
        try:
            with mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mapped:
                view = np.frombuffer(mapped, dtype="<u4").reshape(expected.shape)
                view[block] = expected[block]
                del view  # munmap, no msync
        finally:
            os.close(fd)  # the kernel writes the pages back, then flushes: stored
        assert np.array_equal(zarr.open_array(root, mode="r")[...], expected)
        mount.assert_alive()


BIG = (3, 40_000, 40_000)  # 4.8 GB of bytes


def _big(tmp_path, width: int) -> tuple[str, np.ndarray]:
    """A store of BIG, 7 but for one chunk (4,000 rows of ``width``), written at
    band 1, rows 8,000 on, and its second column of chunks."""
    root = str(tmp_path / "big.zarr")
    array = zarr.create_array(root, shape=BIG, chunks=(1, 4_000, width), dtype="u1", fill_value=7)
    written = np.arange(4_000 * width, dtype=np.uint64).astype("u1").reshape(4_000, width)
    array[1, 8_000:12_000, width : 2 * width] = written
    return root, written


def test_tiff_view_past_4_gib_is_a_bigtiff_and_reads_fill_without_fetching(tmp_path):
    """Strips: chunks 5,000 wide cannot be TIFF tiles (not a multiple of 16)."""
    root, written = _big(tmp_path, 5_000)
    with mounted(root, ["sidecars=tiff"], tag="sidecars-bigtiff") as mount:
        tif = mount.p("array.tif")
        assert os.stat(tif).st_size > 2**32
        with tifffile.TiffFile(tif) as t:
            assert t.is_bigtiff and len(t.pages) == 3 and not t.pages[0].is_tiled
        got = tifffile.memmap(tif, mode="r")
        assert got.shape == BIG
        before = mount.stats()["store_get_bytes"]
        assert (got[0, -100:, -100:] == 7).all() and (got[2, 123, :5000] == 7).all()
        assert mount.stats()["store_get_bytes"] == before  # absent chunks: nothing fetched
        assert np.array_equal(got[1, 8_000:12_000, 5_000:10_000], written)
        assert got[1, 7_999, 5_000] == 7
        del got


def test_tiled_view_past_4_gib_is_a_bigtiff_whose_windows_read_their_chunks(tmp_path):
    """Tiles: GDAL reads a window's tiles, each a chunk; absent ones fetch nothing."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.windows import Window

    root, written = _big(tmp_path, 4_000)
    with mounted(root, ["sidecars=tiff"], tag="sidecars-bigtiff-tiled") as mount:
        tif = mount.p("array.tif")
        assert os.stat(tif).st_size > 2**32
        with tifffile.TiffFile(tif) as t:
            assert t.is_bigtiff and t.pages[0].is_tiled and t.series[0].shape == BIG
        with rasterio.open(tif) as ds:
            assert ds.count == 3 and ds.block_shapes == [(4_000, 4_000)] * 3
            before = mount.stats()["store_get_bytes"]
            assert (ds.read(1, window=Window(39_000, 39_000, 1_000, 1_000)) == 7).all()
            assert mount.stats()["store_get_bytes"] == before  # absent chunks: nothing fetched
            got = ds.read(2, window=Window(3_999, 7_999, 4_002, 4_002))
    assert np.array_equal(got[1:-1, 1:-1], written)
    assert (got[0] == 7).all() and (got[:, 0] == 7).all() and (got[-1] == 7).all()
