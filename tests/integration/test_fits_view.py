"""Through the kernel: ``-o sidecars=fits`` shows beside each array file ``NAME`` a FITS
image ``NAME.fits`` (one primary HDU, big-endian data, 2880-byte blocks; unsigned 16-, 32-
and 64-bit integers and int8 by the standard's BZERO offsets; ``BUNIT`` from the ``units``
attribute) that astropy and cfitsio's ``fitsverify`` read without help. Arrays of types
FITS cannot hold (bool, float16, complex, strings) and 0-d arrays get none.

Every expected value comes from zarr-python reading the same store, never from the mount.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest
import zarr
from astropy.io import fits
from helpers.mounting import mounted, mounted_formats
from zarr.codecs import BytesCodec

pytestmark = pytest.mark.mount

BLOCK = 2880
# numpy type code: (BITPIX, BZERO) of the FITS standard (4.4.2.5: unsigned and signed bytes)
FITS_TYPES = {
    "u1": (8, 0),
    "i1": (8, -128),
    "i2": (16, 0),
    "u2": (16, 1 << 15),
    "i4": (32, 0),
    "u4": (32, 1 << 31),
    "i8": (64, 0),
    "u8": (64, 1 << 63),
    "f4": (-32, 0),
    "f8": (-64, 0),
}
SHAPES = {1: (37,), 2: (9, 13), 3: (3, 7, 11), 4: (2, 3, 5, 7)}
CHUNKS = {1: (16,), 2: (4, 8), 3: (2, 4, 8), 4: (1, 2, 4, 4)}  # edge chunks on every axis
UNITS = {"f4": "K"}  # the one array per store with a ``units`` attribute
# Arrays FITS cannot hold: no ``NAME.fits``. name: (dtype, shape); "str" only in v3.
NO_FITS = {
    "bool_2d": ("bool", (4, 5)),
    "f2_2d": ("<f2", (4, 5)),
    "c8_2d": ("<c8", (4, 5)),
    "c16_1d": ("<c16", (6,)),
    "bytes_1d": ("|S4", (5,)),
    "unicode_1d": ("<U3", (5,)),
    "scalar_i4": ("<i4", ()),
    "scalar_f8": ("<f8", ()),
}


def _ndim(fmt: int, index: int) -> int:
    """Each type at two numbers of dimensions (one per format); every number at each."""
    return 1 + (index + 2 * (fmt - 2)) % 4


def _values(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random values of the whole range of integers (both extremes included: BZERO's
    edges), or normal floats with a NaN and both infinities."""
    rng = np.random.default_rng(seed)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, shape, dtype=dtype.newbyteorder("="), endpoint=True)
        data.flat[0], data.flat[-1] = info.min, info.max
        return data.astype(dtype)
    data = (rng.standard_normal(shape) * 1e3).astype(dtype)
    data.flat[1], data.flat[2], data.flat[3] = np.nan, np.inf, -np.inf
    return data


def _fits_arrays(fmt: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """name -> (dtype, shape) of the arrays of store ``fmt`` that get a FITS file."""
    arrays = {}
    for i, code in enumerate(FITS_TYPES):
        ndim = _ndim(fmt, i)
        arrays[f"{code}_{ndim}d"] = (np.dtype("<" + code if code[1] != "1" else code), ndim)
    arrays["big_i4_3d"] = (np.dtype(">i4"), 3)  # stored big-endian (v2 dtype, v3 codec)
    arrays["sub/deep/u2_2d"] = (np.dtype("<u2"), 2)  # beside an array file in a subgroup
    arrays["partly_f8_2d"] = (np.dtype("<f8"), 2)  # some chunks never written: fill value
    return {name: (dtype, SHAPES[ndim]) for name, (dtype, ndim) in arrays.items()}


def _create(group, name: str, dtype: np.dtype, shape, **kw):
    fmt = group.metadata.zarr_format
    if fmt == 3 and dtype.byteorder == ">":
        kw["serializer"] = BytesCodec(endian="big")
        dtype = dtype.newbyteorder("<")
    chunks = CHUNKS.get(len(shape)) or "auto"
    return group.create_array(name, shape=shape, dtype=dtype, chunks=chunks, **kw)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A v2 and a v3 store: every FITS type at 1 to 4 dimensions, and arrays without FITS."""
    base = tmp_path_factory.mktemp("fits")
    roots = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unstable v3 data types (strings, fixed bytes)
        for fmt in (2, 3):
            roots[fmt] = root = str(base / f"v{fmt}.zarr")
            group = zarr.open_group(root, mode="w", zarr_format=fmt)
            for seed, (name, (dtype, shape)) in enumerate(_fits_arrays(fmt).items()):
                if "/" in name:
                    group.require_group(name.rpartition("/")[0])
                code = dtype.str[1:]
                attrs = {"units": UNITS[code]} if name.startswith(code) and code in UNITS else {}
                array = _create(group, name, dtype, shape, fill_value=3, attributes=attrs)
                data = _values(dtype, shape, seed)
                if name.startswith("partly"):
                    array[:4, :8] = data[:4, :8]
                else:
                    array[...] = data
            for seed, (name, (dtype, shape)) in enumerate(NO_FITS.items()):
                array = _create(group, name, np.dtype(dtype), shape)
                array[...] = np.ones(shape, dtype=dtype) if seed % 2 else np.zeros(shape, dtype)
            if fmt == 3:
                group.create_array("vlen_str", shape=(3,), dtype=str)[:] = ["a", "bb", ""]
    return roots


@pytest.fixture(scope="module")
def mounts(store):
    with mounted_formats(store, "fits", "fits") as found:
        yield found


def _oracle(root: str, path: str) -> np.ndarray:
    return np.asarray(zarr.open_array(root, path=path, mode="r")[...])


CASES = [(fmt, name) for fmt in (2, 3) for name in _fits_arrays(fmt)]
IDS = [f"v{fmt}-{name}" for fmt, name in CASES]


@pytest.mark.parametrize(("fmt", "name"), CASES, ids=IDS)
def test_astropy_reads_zarr_pythons_values(store, mounts, fmt, name):
    expected = _oracle(store[fmt], name)
    with fits.open(mounts[fmt].p(name + ".fits")) as hdus:
        assert len(hdus) == 1
        got = hdus[0].data
        assert got.shape == expected.shape
        # astropy applies BZERO: unsigned types come back unsigned, int8 as int8 (or, in
        # another astropy, a wider type of the same values): the values are compared
        assert np.array_equal(got, expected, equal_nan=expected.dtype.kind == "f"), name


@pytest.mark.parametrize(("fmt", "name"), CASES, ids=IDS)
def test_header_describes_the_array(store, mounts, fmt, name):
    path = mounts[fmt].p(name + ".fits")
    expected = zarr.open_array(store[fmt], path=name, mode="r")
    header = fits.getheader(path)  # the header as written: BZERO not yet applied
    bitpix, bzero = FITS_TYPES[np.dtype(expected.dtype).str[1:]]
    assert header["SIMPLE"] is True
    assert header["BITPIX"] == bitpix
    assert header["NAXIS"] == expected.ndim
    # NAXIS1 is the fastest-varying axis: the last of the C-order shape
    for i, n in enumerate(reversed(expected.shape)):
        assert header[f"NAXIS{i + 1}"] == n
    assert header.get("BZERO", 0) == bzero
    assert header.get("BSCALE", 1) == 1
    assert header.get("BUNIT") == expected.attrs.get("units")


def test_units_appear_as_bunit(mounts):
    """The one array per store with ``units`` (the test above checks every array)."""
    for fmt, mount in mounts.items():
        name = next(n for n in _fits_arrays(fmt) if n.startswith("f4_"))
        assert fits.getheader(mount.p(name + ".fits"))["BUNIT"] == UNITS["f4"]


def test_sizes_are_whole_fits_blocks(store, mounts):
    for fmt, mount in mounts.items():
        for name, (dtype, shape) in _fits_arrays(fmt).items():
            size = os.stat(mount.p(name + ".fits")).st_size
            data = int(np.prod(shape)) * dtype.itemsize
            assert size % BLOCK == 0, (fmt, name, size)
            # a header block, and the data padded to whole blocks
            assert size >= BLOCK + -(-data // BLOCK) * BLOCK, (fmt, name, size)
            with open(mount.p(name + ".fits"), "rb") as f:
                assert len(f.read()) == size, (fmt, name)


@pytest.mark.skipif(shutil.which("fitsverify") is None, reason="fitsverify is not installed")
def test_fitsverify_finds_no_error_nor_warning(mounts):
    """``fitsverify -q`` prints one "verification OK: FILE" line per conforming file and
    exits with the number of errors and warnings it found."""
    for fmt, mount in mounts.items():
        paths = [mount.p(name + ".fits") for name in _fits_arrays(fmt)]
        done = subprocess.run(["fitsverify", "-q", *paths], capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(lines) == len(paths), done.stdout
        for path, line in zip(paths, lines, strict=True):
            assert line.startswith("verification OK") and path in line, line


def test_arrays_fits_cannot_hold_have_no_fits_file(store, mounts):
    for fmt, mount in mounts.items():
        names = [*NO_FITS, *(["vlen_str"] if fmt == 3 else [])]
        listed = set(os.listdir(mount.p()))
        for name in names:
            # the array file is there (an array of variable-length strings has none)
            assert name in listed or name == "vlen_str", (fmt, name)
            assert name + ".fits" not in listed, (fmt, name)
            assert not os.path.exists(mount.p(name + ".fits")), (fmt, name)
        # and every array that FITS holds has one, in its own directory
        for name in _fits_arrays(fmt):
            folder, _, base = name.rpartition("/")
            assert base + ".fits" in os.listdir(mount.p(folder)), (fmt, name)


def test_fits_files_are_read_only(mounts):
    for fmt, mount in mounts.items():
        name = next(iter(_fits_arrays(fmt)))
        path = mount.p(name + ".fits")
        assert os.stat(path).st_mode & 0o222 == 0, (fmt, oct(os.stat(path).st_mode))
        with pytest.raises(OSError):
            os.open(path, os.O_WRONLY)


def test_netcdf_and_fits_together(store):
    """Kinds joined with ``+``: both kinds of files, each where its kind puts it."""
    with mounted(store[2], sidecars="netcdf+fits", tag="fits-and-nc") as mount:
        listed = set(os.listdir(mount.p()))
        assert "v2.nc" in listed, sorted(listed)
        name = next(iter(_fits_arrays(2)))
        assert name + ".fits" in listed
        with fits.open(mount.p(name + ".fits")) as hdus:
            assert np.array_equal(hdus[0].data, _oracle(store[2], name))
