"""Archival files read in place: NetCDF4 and HDF5 files written by netCDF4 and h5py
(chunked and compressed, contiguous, with attributes) mounted directly (VirtualiZarr's
parsers) and through kerchunk references (JSON, parquet, ``reference://``). Every
variable reads equal to netCDF4 or h5py reading the file; a reference outside what it may
read, or into a file that changed, fails its read with the reason in the log."""

from __future__ import annotations

import errno
import json
import os
import shutil

import numpy as np
import pytest
from helpers.mounting import run_cli
from helpers.oracle import assert_bytes_equal, read_file

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")
kerchunk_hdf = pytest.importorskip("kerchunk.hdf")

pytestmark = pytest.mark.mount

TEMP = np.arange(480, dtype="f4").reshape(10, 6, 8) * 0.5 - 7


def _netcdf(path) -> dict[str, np.ndarray]:
    """A NetCDF4 file: a compressed chunked variable, a contiguous one, a coordinate."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = "archival"
        ds.createDimension("time", 10)
        ds.createDimension("lat", 6)
        ds.createDimension("lon", 8)
        time = ds.createVariable("time", "f8", ("time",))
        time[:] = np.arange(10) * 1.5
        time.units = "days since 2000-01-01"
        temp = ds.createVariable(
            "temp", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(4, 3, 5)
        )
        temp[:] = TEMP
        temp.units = "K"
        mask = ds.createVariable("mask", "i2", ("lat", "lon"))  # contiguous
        mask[:] = np.arange(48, dtype="i2").reshape(6, 8) - 20
    return _read_netcdf(path)


def _read_netcdf(path) -> dict[str, np.ndarray]:
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        return {name: np.asarray(var[...]) for name, var in ds.variables.items()}


def _hdf5(path) -> dict[str, np.ndarray]:
    """An HDF5 file: gzip+shuffle chunks, a contiguous dataset, one in a group."""
    with h5py.File(path, "w") as f:
        f.attrs["source"] = "h5py"
        f.create_dataset(
            "counts",
            data=np.arange(300, dtype="<u2").reshape(20, 15),
            chunks=(8, 5),
            compression="gzip",
            shuffle=True,
        )
        f.create_dataset("flat", data=np.linspace(0, 1, 33))
        f.create_group("inner").create_dataset("deep", data=np.arange(12, dtype="<i8"), chunks=(5,))
        f["counts"].attrs["units"] = "photons"
    with h5py.File(path) as f:
        return {
            "counts": f["counts"][...],
            "flat": f["flat"][...],
            "inner/deep": f["inner/deep"][...],
        }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Each file, its variables as its own library reads them, and its kerchunk refs."""
    base = tmp_path_factory.mktemp("virtual")
    made = {}
    for name, write in (("data.nc", _netcdf), ("data.h5", _hdf5)):
        path = str(base / name)
        expected = write(path)
        refs = kerchunk_hdf.SingleHdf5ToZarr(path, inline_threshold=0).translate()
        stem = name.replace(".", "_")
        with open(base / f"{stem}.json", "w") as f:
            json.dump(refs, f)
        made[name] = (path, expected, refs, str(base / f"{stem}.json"))
    return base, made


# each file's attributes as its writer set them: (variable, attribute, value)
ATTRIBUTES = {"data.nc": ("temp", "units", "K"), "data.h5": ("counts", "units", "photons")}


def _assert_variables(mount, expected: dict[str, np.ndarray], file: str | None = None) -> None:
    """Every variable's bytes; and ``file``'s attribute (ATTRIBUTES) among its xattrs."""
    for name, data in expected.items():
        assert_bytes_equal(read_file(mount.p(name)), data.tobytes(), data.dtype)
    if file is not None:
        variable, name, value = ATTRIBUTES[file]
        attributes = json.loads(os.getxattr(mount.p(variable), "user.zarr.attributes"))
        assert attributes[name] == value, attributes


@pytest.mark.parametrize("name", ["data.nc", "data.h5"])
def test_references_as_json_read_as_the_files_library(files, mount_factory, name):
    _, made = files
    _, expected, _, refs = made[name]
    mount = mount_factory(refs, tag="refs-json")
    _assert_variables(mount, expected, name)


@pytest.mark.parametrize("name", ["data.nc", "data.h5"])
def test_references_as_parquet_and_through_reference_urls(files, mount_factory, name):
    df = pytest.importorskip("kerchunk.df")
    pytest.importorskip("fastparquet")
    base, made = files
    _, expected, refs, json_refs = made[name]
    parquet = str(base / f"{name.replace('.', '_')}.parq")
    df.refs_to_dataframe(refs, parquet)
    mount = mount_factory(parquet, tag="refs-parq")
    _assert_variables(mount, expected, name)
    options = [f"so.fo={json_refs}", "so.remote_protocol=file"]
    mount = mount_factory("reference://", options, tag="refs-url")
    _assert_variables(mount, expected, name)


@pytest.mark.parametrize("name", ["data.nc", "data.h5"])
def test_archival_files_mount_directly(files, mount_factory, name):
    pytest.importorskip("virtualizarr", reason="VirtualiZarr needs Python >= 3.12")
    _, made = files
    path, expected, _, _ = made[name]
    mount = mount_factory(path, tag="archival")
    _assert_variables(mount, expected, name)


def test_a_netcdf3_file_mounts_directly(tmp_path, mount_factory):
    pytest.importorskip("virtualizarr", reason="VirtualiZarr needs Python >= 3.12")
    path = str(tmp_path / "classic.nc")
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("x", 7)
        ds.createDimension("y", 3)
        ds.createVariable("v", ">i4", ("x", "y"))[:] = np.arange(21).reshape(7, 3)
        ds.createVariable("w", ">f8", ("x",))[:] = np.arange(7) / 4
    mount = mount_factory(path, tag="netcdf3")
    # NetCDF3 stores big-endian; the files show the stored order (-o byteorder)
    stored = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in _read_netcdf(path).items()}
    _assert_variables(mount, stored)


def test_a_fits_file_mounts_directly(tmp_path, mount_factory):
    pytest.importorskip("virtualizarr", reason="VirtualiZarr needs Python >= 3.12")
    fits = pytest.importorskip("astropy.io.fits")
    path = str(tmp_path / "image.fits")
    primary = fits.PrimaryHDU(np.arange(60, dtype=">i2").reshape(5, 12))
    primary.header["BUNIT"] = "adu"
    primary.writeto(path)
    with fits.open(path) as hdus:
        expected = hdus[0].data.astype(">i2")  # FITS is big-endian, as stored
    mount = mount_factory(path, tag="fits")
    assert os.listdir(mount.p()) == ["PRIMARY"]
    _assert_variables(mount, {"PRIMARY": expected})
    assert json.loads(os.getxattr(mount.p("PRIMARY"), "user.zarr.attributes"))["BUNIT"] == "adu"


def test_a_tiled_tiff_mounts_directly(tmp_path, mount_factory):
    pytest.importorskip("virtual_tiff", reason="virtual-tiff needs Python >= 3.12")
    tifffile = pytest.importorskip("tifffile")
    path = str(tmp_path / "tiles.tif")
    image = (np.arange(64 * 48, dtype="<u2").reshape(64, 48) * 7) % 5003
    tifffile.imwrite(path, image, tile=(16, 16), compression="zlib")
    mount = mount_factory(path, tag="tiff")
    assert os.listdir(mount.p()) == ["0"]
    _assert_variables(mount, {"0": tifffile.imread(path)})


def _refs_file(tmp_path, refs: dict, **changes) -> str:
    edited = json.loads(json.dumps(refs))
    edited["refs"].update(changes)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    return str(path)


def test_a_reference_outside_what_it_may_read_fails_that_read(files, tmp_path, mount_factory):
    _, made = files
    path, expected, refs, _ = made["data.nc"]
    shutil.copy(path, tmp_path / "data.nc")
    moved = {
        k: [str(tmp_path / "data.nc"), *v[1:]] if isinstance(v, list) else v
        for k, v in refs["refs"].items()
    }
    # mask's one chunk points at /etc/passwd: outside the set's own directory
    moved["mask/0.0"] = ["/etc/passwd", 0, 96]
    edited = _refs_file(tmp_path, {"version": 1, "refs": moved})
    mount = mount_factory(edited, tag="refs-outside")
    with pytest.raises(OSError) as failed:
        read_file(mount.p("mask"))
    assert failed.value.errno == errno.EIO
    assert "lies outside the authorized prefixes" in mount.read_log()
    _assert_variables(mount, {"temp": expected["temp"]})  # the others read
    # a reference to the original file, in another directory: only with virtual_prefix
    elsewhere = _refs_file(tmp_path, refs)
    os.rename(elsewhere, tmp_path / "elsewhere.json")
    mount = mount_factory(tmp_path / "elsewhere.json", tag="refs-other-dir")
    with pytest.raises(OSError):
        read_file(mount.p("temp"))
    allowed = [f"virtual_prefix={os.path.dirname(path)}"]
    mount = mount_factory(tmp_path / "elsewhere.json", allowed, tag="refs-allowed")
    _assert_variables(mount, {"temp": expected["temp"]})


def test_a_target_that_changed_size_fails_the_reads_past_its_end(files, tmp_path, mount_factory):
    _, made = files
    path, expected, refs, _ = made["data.nc"]
    copy = tmp_path / "data.nc"
    shutil.copy(path, copy)
    moved = {k: [str(copy), *v[1:]] if isinstance(v, list) else v for k, v in refs["refs"].items()}
    edited = _refs_file(tmp_path, {"version": 1, "refs": moved})
    last = max((v for v in moved.values() if isinstance(v, list)), key=lambda v: v[1])
    os.truncate(copy, last[1] + last[2] // 2)  # the last referenced range cut in two
    mount = mount_factory(edited, tag="refs-truncated")
    key = next(k for k, v in moved.items() if v == last)
    variable = key.split("/")[0]
    with pytest.raises(OSError) as failed:
        read_file(mount.p(variable))
    assert failed.value.errno == errno.EIO
    assert "(the file changed)" in mount.read_log() and key in mount.read_log()


def test_an_unreadable_reference_set_fails_the_mount_with_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "refs": {')
    (tmp_path / "mnt").mkdir()
    res = run_cli([bad, tmp_path / "mnt"])
    assert res.returncode != 0 and "bad.json" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
