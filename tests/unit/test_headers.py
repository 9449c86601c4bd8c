"""Headers for legacy tools, judged by independent readers: NumPy's own ``.npy`` reader,
pynrrd for NRRD, and GDAL (when installed) or a plain key = value reader for ENVI.

No expected value here comes from the generators themselves.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from zarrmount.headers import NotApplicable, envi_header, npy_header, nrrd_header

RNG = np.random.default_rng(20240611)


def sample(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Values of ``dtype``: small counts for numbers (exact in any reader, no NaN), random
    bytes for everything else."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype.kind in "iuf":
        values = np.arange(n) % 100 - (0 if dtype.kind == "u" else 50)
        return values.astype(dtype).reshape(shape)
    if dtype.kind == "c":
        return (np.arange(n) + 1j * (np.arange(n) % 7)).astype(dtype).reshape(shape)
    if dtype.kind == "b":
        return (np.arange(n) % 3 == 0).reshape(shape).astype(dtype)
    raw = RNG.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).tobytes()
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


# ---------------------------------------------------------------- npy

NPY_SHAPES = [(), (0,), (7,), (3, 4), (2, 0, 5), (2, 3, 4), (2, 1, 3, 2), (1,) * 9]
STRUCT = np.dtype([("x", "<f4"), ("id", ">u2"), ("tag", "S3"), ("xy", "<i4", (2,))])
ALIGNED = np.dtype([("a", "u1"), ("b", "<f8")], align=True)
NPY_DTYPES = [
    "<f4",
    ">f4",
    "<f8",
    ">i8",
    "<i2",
    "|i1",
    "|u1",
    "|b1",
    "<c16",
    ">c8",
    "<M8[ns]",
    ">m8[s]",
    "S5",
    "<U3",
    "V4",
    STRUCT,
    ALIGNED,
]


def read_header_parts(path: Path, max_header_size: int = 10000):
    """(version, shape, fortran_order, dtype) as NumPy's public header readers see them."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        version = fmt.read_magic(f)
        reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        shape, fortran, dtype = reader[version](f, max_header_size=max_header_size)
    return version, shape, fortran, dtype


def write_npy(tmp_path: Path, arr: np.ndarray) -> tuple[Path, bytes]:
    header = npy_header(arr.shape, arr.dtype)
    path = tmp_path / "a.npy"
    path.write_bytes(header + arr.tobytes(order="C"))
    return path, header


@pytest.mark.parametrize("dtype", NPY_DTYPES, ids=str)
@pytest.mark.parametrize("shape", NPY_SHAPES, ids=str)
def test_npy_loads(tmp_path, shape, dtype):
    arr = sample(shape, dtype)
    path, header = write_npy(tmp_path, arr)
    assert len(header) % 64 == 0
    assert header.endswith(b"\n")
    for loaded in (np.load(path), np.load(path, mmap_mode="r")):
        assert loaded.dtype == arr.dtype
        assert loaded.shape == arr.shape
        assert loaded.tobytes() == arr.tobytes()
        if arr.dtype.kind in "iufcb":
            np.testing.assert_array_equal(loaded, arr)
    assert read_header_parts(path) == ((1, 0), shape, False, arr.dtype)


def test_npy_mmap_read_write(tmp_path):
    arr = sample((4, 5), "<i4")
    path, _ = write_npy(tmp_path, arr)
    view = np.load(path, mmap_mode="r+")
    view[1, 2] = -7
    view.flush()
    del view
    arr = arr.copy()
    arr[1, 2] = -7
    np.testing.assert_array_equal(np.load(path), arr)


@pytest.mark.parametrize("shape", [(10**6, 10**6), (2**40,), (3, 2**31, 2**31 + 1), (10**18,)])
def test_npy_huge_shape_header_only(tmp_path, shape):
    path = tmp_path / "huge.npy"
    header = npy_header(shape, np.dtype(">f8"))
    path.write_bytes(header)
    assert len(header) % 64 == 0
    assert read_header_parts(path) == ((1, 0), shape, False, np.dtype(">f8"))


def test_npy_version_2_for_long_header(tmp_path):
    # about 17 bytes per field: 5000 fields need more than the 65535 of version 1.0
    dtype = np.dtype([(f"field{i}", "<f4") for i in range(5000)])
    arr = sample((3,), dtype)
    path, header = write_npy(tmp_path, arr)
    assert len(header) > 65535 and len(header) % 64 == 0
    version, shape, fortran, found = read_header_parts(path, max_header_size=10**6)
    assert (version, shape, fortran, found) == ((2, 0), (3,), False, dtype)
    # np.load refuses headers over 10000 bytes unless told to trust the file
    loaded = np.load(path, max_header_size=10**6)
    assert loaded.dtype == dtype and loaded.tobytes() == arr.tobytes()


def test_npy_version_1_up_to_its_limit(tmp_path):
    dtype = np.dtype([(f"field{i}", "<f4") for i in range(3000)])
    arr = sample((2,), dtype)
    path, header = write_npy(tmp_path, arr)
    assert 10000 < len(header) <= 65535 + 10
    assert read_header_parts(path, max_header_size=10**6)[:2] == ((1, 0), (2,))
    assert np.load(path, max_header_size=10**6).tobytes() == arr.tobytes()


def test_npy_utf8_field_names(tmp_path):
    # latin-1 cannot carry these names: NumPy writes such headers as version 3.0, UTF-8
    dtype = np.dtype([("température", "<f4"), ("深さ", ">i2")])
    arr = sample((2, 3), dtype)
    path, header = write_npy(tmp_path, arr)
    assert header[6:8] == b"\x03\x00"
    loaded = np.load(path, mmap_mode="r")
    assert loaded.dtype == dtype and loaded.tobytes() == arr.tobytes()


@pytest.mark.parametrize(
    ("dtype", "why"),
    [
        (np.dtype(object), "object"),
        (np.dtype([("a", "<i4"), ("b", object)]), "object"),
        (np.dtype("S0"), "item size"),
        (np.dtype("U0"), "item size"),
        (np.dtypes.StringDType(), "object"),
        (np.dtype("(2,)<f4"), "exactly"),
    ],
    ids=str,
)
def test_npy_not_applicable(dtype, why):
    with pytest.raises(NotApplicable, match=why):
        npy_header((3,), dtype)


# ---------------------------------------------------------------- nrrd

NRRD_TYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]
NRRD_SHAPES = [(6,), (3, 5), (2, 3, 4), (2, 1, 3, 5)]


def nrrd_read(tmp_path: Path, arr: np.ndarray, name: str = "x"):
    import nrrd

    (tmp_path / name).write_bytes(arr.tobytes(order="C"))
    nhdr = tmp_path / f"{name}.nhdr"
    nhdr.write_bytes(nrrd_header(arr.shape, arr.dtype, name))
    return nrrd.read(str(nhdr), index_order="C")


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("kind", NRRD_TYPES)
@pytest.mark.parametrize("shape", NRRD_SHAPES, ids=str)
def test_nrrd_pynrrd_reads(tmp_path, shape, kind, order):
    pytest.importorskip("nrrd")
    arr = sample(shape, np.dtype(order + kind))
    data, header = nrrd_read(tmp_path, arr)
    assert data.shape == shape
    assert data.dtype.kind == arr.dtype.kind and data.dtype.itemsize == arr.dtype.itemsize
    np.testing.assert_array_equal(data, arr)
    assert header["dimension"] == len(shape)
    assert header["encoding"] == "raw"


def test_nrrd_header_lines():
    lines = nrrd_header((2, 3, 4), np.dtype(">u2"), "vol").decode("ascii").split("\n")
    assert lines[0] == "NRRD0004"
    assert lines[-2:] == ["data file: vol", ""]
    assert "sizes: 4 3 2" in lines and "endian: big" in lines
    one_byte = nrrd_header((5,), np.dtype("|u1"), "b").decode("ascii")
    assert "endian" not in one_byte


def test_nrrd_many_dimensions_and_odd_names(tmp_path):
    pytest.importorskip("nrrd")
    arr = sample((2, 1, 3, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 2), "<f4")
    data, _ = nrrd_read(tmp_path, arr, name="my array:v2 #1 = 50%")
    assert data.shape == arr.shape
    np.testing.assert_array_equal(data, arr)


@pytest.mark.parametrize(
    ("shape", "dtype", "name", "why"),
    [
        ((), "<f4", "x", "0-d"),
        ((3, 0), "<f4", "x", "empty"),
        ((1,) * 17, "<f4", "x", "16 dimensions"),
        ((3,), "|b1", "x", "bool"),
        ((3,), "<f2", "x", "float16"),
        ((3,), "<c8", "x", "complex64"),
        ((3,), "<M8[ns]", "x", "datetime64"),
        ((3,), "S4", "x", "string"),
        ((3,), STRUCT, "x", "structured"),
        ((3,), "<f4", "a\nb", "line break"),
        ((3,), "<f4", "a\rb", "line break"),
        ((3,), "<f4", "dir/x", "directory"),
        ((3,), "<f4", "", "directory"),
        ((3,), "<f4", " x", "white space"),
        ((3,), "<f4", "x\t", "white space"),
        ((3,), "<f4", "café", "ASCII"),
        ((3,), "<f4", "a\x01b", "ASCII"),
        ((3,), "<f4", "LIST", "LIST"),
        ((3,), "<f4", "slice%03d.raw", "%d"),
    ],
    ids=repr,
)
def test_nrrd_not_applicable(shape, dtype, name, why):
    with pytest.raises(NotApplicable, match=why):
        nrrd_header(shape, np.dtype(dtype), name)


# ---------------------------------------------------------------- envi

# ENVI data type codes and GDAL type names, from the ENVI header documentation.
ENVI_TYPES = {
    "u1": (1, "Byte"),
    "i2": (2, "Int16"),
    "i4": (3, "Int32"),
    "f4": (4, "Float32"),
    "f8": (5, "Float64"),
    "c8": (6, "CFloat32"),
    "c16": (9, "CFloat64"),
    "u2": (12, "UInt16"),
    "u4": (13, "UInt32"),
    "i8": (14, "Int64"),
    "u8": (15, "UInt64"),
}
ENVI_SHAPES = [(3, 5), (1, 1), (2, 3, 4), (4, 1, 7)]


def parse_envi(text: str) -> dict[str, str]:
    """A minimal ENVI reader: the ``ENVI`` line, then ``key = value`` lines."""
    lines = text.splitlines()
    assert lines[0] == "ENVI"
    fields: dict[str, str] = {}
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        assert sep, line
        assert key.strip() not in fields
        fields[key.strip().lower()] = value.strip()
    return fields


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("kind", list(ENVI_TYPES))
@pytest.mark.parametrize("shape", ENVI_SHAPES, ids=str)
def test_envi_fields(shape, kind, order):
    dtype = np.dtype(order + kind)
    text = envi_header(shape, dtype).decode("ascii")
    assert text.endswith("\n")
    fields = parse_envi(text)
    bands, lines, samples = (1, *shape) if len(shape) == 2 else shape
    assert int(fields["samples"]) == samples
    assert int(fields["lines"]) == lines
    assert int(fields["bands"]) == bands
    assert int(fields["header offset"]) == 0
    assert fields["file type"] == "ENVI Standard"
    assert fields["interleave"] == "bsq"
    assert int(fields["data type"]) == ENVI_TYPES[kind][0]
    big = order == ">" and dtype.itemsize > 1
    assert int(fields["byte order"]) == int(big)
    assert envi_header(shape, dtype) == envi_header(tuple(shape), np.dtype(dtype))


def gdal_version() -> tuple[int, ...] | None:
    if shutil.which("gdalinfo") is None:
        return None
    out = subprocess.run(["gdalinfo", "--version"], capture_output=True, text=True).stdout
    # "GDAL 3.6.2, released 2023/01/02"
    return tuple(int(p) for p in out.split()[1].rstrip(",").split(".")[:2])


def gdalinfo(path: Path) -> tuple[int, dict | None, str]:
    env = dict(os.environ, GDAL_PAM_ENABLED="NO")
    run = subprocess.run(
        ["gdalinfo", "-json", "-mm", str(path)], capture_output=True, text=True, env=env
    )
    info = json.loads(run.stdout) if run.returncode == 0 else None
    return run.returncode, info, run.stderr


def gdal_band_values(arr: np.ndarray) -> np.ndarray:
    return arr.reshape((1, *arr.shape)) if arr.ndim == 2 else arr


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("kind", list(ENVI_TYPES))
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)], ids=str)
def test_envi_gdal_reads(tmp_path, shape, kind, order):
    version = gdal_version()
    if version is None:
        pytest.skip("gdalinfo is not installed (Debian package gdal-bin)")
    arr = sample(shape, np.dtype(order + kind))
    raw = tmp_path / "a.raw"
    raw.write_bytes(arr.tobytes(order="C"))
    (tmp_path / "a.raw.hdr").write_bytes(envi_header(arr.shape, arr.dtype))
    code, info, stderr = gdalinfo(raw)
    if kind in ("i8", "u8") and code != 0 and "data_type" in stderr:
        # GDAL 3.6 does not know ENVI's 64-bit integer codes 14 and 15 (ENVI defines them).
        pytest.xfail(f"GDAL {version} refuses ENVI data type {ENVI_TYPES[kind][0]}")
    assert code == 0, stderr
    assert info["driverShortName"] == "ENVI"
    bands = gdal_band_values(arr)
    assert info["size"] == [bands.shape[2], bands.shape[1]]
    assert len(info["bands"]) == bands.shape[0]
    for band, values in zip(info["bands"], bands, strict=True):
        assert band["type"] == ENVI_TYPES[kind][1]
        if arr.dtype.kind != "c":  # min/max prove the byte order was honoured
            assert band["computedMin"] == values.min()
            assert band["computedMax"] == values.max()


@pytest.mark.parametrize(
    ("shape", "dtype", "why"),
    [
        ((5,), "<f4", "2-D and 3-D"),
        ((2, 3, 4, 5), "<f4", "2-D and 3-D"),
        ((), "<f4", "2-D and 3-D"),
        ((3, 0), "<f4", "empty"),
        ((2**31, 2), "|u1", "sizes"),
        ((3, 4), "|i1", "int8"),
        ((3, 4), "|b1", "bool"),
        ((3, 4), "<f2", "float16"),
        ((3, 4), "<M8[ns]", "datetime64"),
        ((3, 4), "S4", "string"),
        ((3, 4), "<U4", "string"),
        ((3, 4), STRUCT, "structured"),
        ((3, 4), "V8", "void"),
    ],
    ids=repr,
)
def test_envi_not_applicable(shape, dtype, why):
    with pytest.raises(NotApplicable, match=why):
        envi_header(shape, np.dtype(dtype))
