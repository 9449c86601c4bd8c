"""``tiff_header(shape, dtype) + arr.tobytes()`` must be a TIFF of ``arr`` to real readers.

Expected values come from NumPy and from the readers (tifffile, Pillow, ImageMagick),
never from the generator. Shape convention: a 1-D array is one row, so readers return
``(1, n)``; a 3-D array is one page per leading index, and tifffile returns a single page
as ``(h, w)``; bool is shown as uint8 0/1.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

from zarrmount.headers import NotApplicable
from zarrmount.headers.tiff import (
    MAX_HEADER_BYTES,
    tiff_header,
    tiff_header_range,
    tiff_header_size,
)

tifffile = pytest.importorskip("tifffile")

MULTI_BYTE = ["u2", "u4", "u8", "i2", "i4", "i8", "f2", "f4", "f8"]
DTYPES = ["u1", "i1", "?"] + [order + t for t in MULTI_BYTE for order in "<>"]
SHAPES = [(7,), (3, 5), (4, 3, 5), (1, 3, 5)]


def sample(shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """Values spread over the type's range (with NaN and infinities for floats)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind == "b":
        values = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind == "f":
        values = (rng.standard_normal(n) * 1000).astype(dtype)
        values[: min(n, 3)] = [np.nan, np.inf, -np.inf][: min(n, 3)]
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype.newbyteorder("="))
    return values.astype(dtype).reshape(shape)


def as_read(arr: np.ndarray) -> np.ndarray:
    """What a reader returns for ``arr``, by the shape convention above."""
    if arr.dtype.kind == "b":
        arr = arr.view(np.uint8)
    if arr.ndim == 1:
        return arr.reshape(1, -1)
    if arr.ndim == 3 and arr.shape[0] == 1:
        return arr[0]
    return arr


def write(path, arr: np.ndarray, **kwargs) -> str:
    path.write_bytes(tiff_header(arr.shape, arr.dtype, **kwargs) + arr.tobytes())
    return str(path)


def check_tifffile(path: str, arr: np.ndarray, bigtiff: bool) -> None:
    expected = as_read(arr)
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff == bigtiff
        assert tif.byteorder == (">" if arr.dtype.str[0] == ">" else "<")
        assert len(tif.pages) == (arr.shape[0] if arr.ndim == 3 else 1)
    got = tifffile.imread(path)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=expected.dtype.kind == "f")
    mapped = tifffile.memmap(path, mode="r")
    # A memmap means tifffile found the pixel data contiguous, in the array's byte order.
    assert isinstance(mapped, np.memmap)
    assert mapped.dtype == expected.dtype
    assert np.array_equal(mapped, expected, equal_nan=expected.dtype.kind == "f")
    del mapped


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tifffile_reads_the_array(tmp_path, shape, dtype):
    arr = sample(shape, np.dtype(dtype))
    check_tifffile(write(tmp_path / "a.tif", arr), arr, bigtiff=False)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["u1", "<u2", ">i4", ">f8", "<f2", "?"])
def test_forced_bigtiff_reads_the_array(tmp_path, shape, dtype):
    arr = sample(shape, np.dtype(dtype))
    check_tifffile(write(tmp_path / "a.tif", arr, force_bigtiff=True), arr, bigtiff=True)


def test_native_byte_order_is_spelled_out(tmp_path):
    arr = sample((3, 4), np.dtype("=u2"))
    check_tifffile(write(tmp_path / "a.tif", arr), arr, bigtiff=False)


def test_many_pages_keep_the_header_small(tmp_path):
    shape = (100_000, 2, 2)
    arr = np.arange(math.prod(shape), dtype=np.uint32).astype(np.uint8).reshape(shape)
    header = tiff_header(shape, arr.dtype)
    assert len(header) < 200 * shape[0]
    path = tmp_path / "a.tif"
    path.write_bytes(header + arr.tobytes())
    mapped = tifffile.memmap(str(path), mode="r")
    assert isinstance(mapped, np.memmap)
    assert np.array_equal(mapped, arr)
    del mapped


def test_too_many_pages_are_refused():
    with pytest.raises(NotApplicable):
        tiff_header((10_000_000, 1, 1), np.dtype("u1"))
    with pytest.raises(NotApplicable):
        tiff_header_size((10_000_000, 1, 1), np.dtype("u1"))


@pytest.mark.parametrize("big", [False, True])
def test_header_ranges_are_slices_of_the_header(big):
    shape, dtype = (5000, 2, 3), np.dtype(">u2")
    header = tiff_header(shape, dtype, force_bigtiff=big)
    assert tiff_header_size(shape, dtype, force_bigtiff=big) == len(header)
    assert len(header) % 16 == 0
    assert len(header) <= MAX_HEADER_BYTES
    rng = random.Random(1)
    edges = [0, 1, 15, 16, 17, len(header) - 1, len(header), len(header) + 5]
    cuts = [(a, b) for a in edges for b in edges]
    for _ in range(200):
        a = rng.randrange(len(header) + 10)
        cuts.append((a, a + rng.randrange(1, 1000)))
    for start, stop in cuts:
        got = tiff_header_range(shape, dtype, start, stop, force_bigtiff=big)
        assert got == header[start:stop], (start, stop)


def sparse_file(path, shape, dtype, known: dict[tuple[int, ...], int]) -> str:
    """A TIFF of ``shape`` that is zeros but for ``known``, made without writing the data."""
    header = tiff_header(shape, dtype)
    strides = [dtype.itemsize * math.prod(shape[k + 1 :]) for k in range(len(shape))]
    with open(path, "wb") as f:
        f.truncate(len(header) + math.prod(shape) * dtype.itemsize)
        f.write(header)
        for index, value in known.items():
            f.seek(len(header) + sum(i * s for i, s in zip(index, strides, strict=True)))
            f.write(np.array(value, dtype).tobytes())
    if os.stat(path).st_blocks * 512 > 1 << 30:
        pytest.skip("the temporary file system does not make sparse files")
    return str(path)


@pytest.mark.parametrize(
    ("shape", "bigtiff"),
    [
        ((3, 40000, 40000), True),  # 4.8 GB: BigTIFF
        ((65535, 65536), False),  # 2**32 - 65536 bytes of data: classic still fits
        ((65536, 65536), True),  # 2**32 bytes of data: offsets no longer fit 32 bits
    ],
    ids=str,
)
def test_large_arrays_choose_bigtiff_when_offsets_outgrow_32_bits(tmp_path, shape, bigtiff):
    dtype = np.dtype("u1")
    last = tuple(s - 1 for s in shape)
    known = {(0,) * len(shape): 7, last: 9, tuple(s // 2 for s in shape): 200}
    if len(shape) == 3:
        known[(1, 123, 39999)] = 42
    path = sparse_file(tmp_path / "big.tif", shape, dtype, known)
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff == bigtiff
        assert tif.series[0].shape == shape
        assert len(tif.pages) == (shape[0] if len(shape) == 3 else 1)
    mapped = tifffile.memmap(path, mode="r")
    assert isinstance(mapped, np.memmap)
    assert mapped.shape == shape
    for index, value in known.items():
        assert mapped[index] == value
    assert mapped[tuple(s // 3 for s in shape)] == 0
    del mapped


@pytest.mark.parametrize("dtype", ["u1", "<u2", ">u2", "<i4", ">f4"])
def test_pillow_opens_a_2d_image(tmp_path, dtype):
    image = pytest.importorskip("PIL.Image")
    arr = sample((5, 7), np.dtype(dtype))
    with image.open(write(tmp_path / "a.tif", arr)) as im:
        assert im.size == (7, 5)
        got = np.asarray(im)
    assert np.array_equal(got, arr, equal_nan=arr.dtype.kind == "f")


def imagemagick() -> str | None:
    for name in ("magick", "identify", "convert"):
        exe = shutil.which(name)
        if not exe:
            continue
        version = subprocess.run([exe, "-version"], capture_output=True, text=True, check=False)
        if "Version: ImageMagick" in version.stdout:
            return exe
    return None


@pytest.mark.parametrize("dtype", ["u1", ">u2", "<f4"])
def test_imagemagick_reads_width_and_height(tmp_path, dtype):
    exe = imagemagick()
    if exe is None:
        pytest.skip("ImageMagick is not installed")
    path = write(tmp_path / "a.tif", sample((2, 5, 7), np.dtype(dtype)))
    if exe.endswith("convert"):
        args = [exe, path, "-format", "%w %h\\n", "info:"]
    else:
        args = [exe, "-format", "%w %h\\n", path]
    if exe.endswith("magick"):
        args.insert(1, "identify")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["7", "5", "7", "5"]


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((), "u1"),
        ((2, 2, 2, 2), "u1"),
        ((0,), "u1"),
        ((3, 0), "u2"),
        ((0, 2, 2), "f4"),
        ((2**32,), "u1"),
        ((3, 4), "c8"),
        ((3, 4), "c16"),
        ((3, 4), "S4"),
        ((3, 4), "U2"),
        ((3, 4), "M8[ns]"),
        ((3, 4), "m8[s]"),
        ((3, 4), "O"),
        ((3, 4), "V8"),
        ((3, 4), [("a", "u1"), ("b", "<u2")]),
        ((3, 4), ("<u2", (2,))),
        ((3, 4), "f16" if hasattr(np, "float128") else "c8"),
    ],
    ids=str,
)
def test_not_applicable(shape, dtype):
    with pytest.raises(NotApplicable):
        tiff_header(shape, np.dtype(dtype))
    with pytest.raises(NotApplicable):
        tiff_header_range(shape, np.dtype(dtype), 0, 16)
