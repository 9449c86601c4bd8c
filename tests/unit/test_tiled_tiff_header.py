"""A tiled TIFF header followed by the array's chunks as tiles must be a TIFF of the array
(and of its overviews) to real readers.

The tiles are cut out of the array with NumPy here, in the order the header promises
(image, page, band, tile row, tile column), edge tiles padded; expected values are the
NumPy arrays, read back by tifffile and rasterio (GDAL), never the generator's output.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from zarrmount.headers import NotApplicable
from zarrmount.headers.tiff import MAX_HEADER_BYTES, tiled_image, tiled_layout
from zarrmount.headers.tifftags import DOUBLE, Tag

tifffile = pytest.importorskip("tifffile")


def tiles_of(arr: np.ndarray, tile: tuple[int, int], pad: int = 0) -> bytes:
    """``arr``'s tiles, page by page, band by band, row by row, padded with ``pad``."""
    lead = arr.reshape(-1, *arr.shape[-2:])
    tl, tw = tile
    length, width = arr.shape[-2:]
    out = []
    for plane in lead:
        for r in range(0, length, tl):
            for c in range(0, width, tw):
                block = np.full(tile, pad, arr.dtype)
                part = plane[r : r + tl, c : c + tw]
                block[: part.shape[0], : part.shape[1]] = part
                out.append(block.tobytes())
    return b"".join(out)


def write(path, levels: list[np.ndarray], chunks: tuple[int, ...], planes=False, **kw) -> str:
    images = [tiled_image(a.shape, chunks, k > 0, planes) for k, a in enumerate(levels)]
    lay = tiled_layout(images, levels[0].dtype, **kw)
    header = lay.header_range(0, lay.size)
    assert len(header) == lay.size and lay.size % (64 << 10) == 0
    data = b"".join(tiles_of(a, chunks[-2:]) for a in levels)
    assert len(data) == lay.data_size
    path.write_bytes(header + data)
    return str(path)


def sample(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 200, math.prod(shape)).astype(dtype).reshape(shape)


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [
        ((64, 96), (32, 48)),  # whole tiles
        ((70, 100), (32, 48)),  # edge tiles
        ((3, 40, 50), (2, 16, 32)),  # bands, a chunk across two of them
        ((2, 3, 40, 50), (1, 3, 16, 32)),  # pages of bands
        ((20, 30), (64, 64)),  # one tile larger than the image
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["u1", "<i2", ">u2", "<f4", ">f8", "<i8"])
def test_tifffile_reads_every_tile(tmp_path, shape, chunks, dtype):
    arr = sample(shape, np.dtype(dtype))
    path = write(tmp_path / "a.tif", [arr], chunks)
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].is_tiled
        assert tif.pages[0].tilewidth == chunks[-1] and tif.pages[0].tilelength == chunks[-2]
        got = tif.asarray()
    assert np.array_equal(got.reshape(shape), arr)


@pytest.mark.parametrize("big", [False, True])
def test_rasterio_reads_bands_and_overviews(tmp_path, big):
    rasterio = pytest.importorskip("rasterio")
    full = sample((3, 130, 200), np.dtype("<u2"))
    levels = [full, full[:, ::2, ::2].copy(), full[:, ::4, ::4].copy()]
    path = write(tmp_path / "a.tif", levels, (1, 32, 64), force_bigtiff=big)
    with rasterio.open(path) as ds:
        assert ds.count == 3 and ds.shape == (130, 200)
        assert ds.block_shapes == [(32, 64)] * 3
        assert np.array_equal(ds.read(), full)
        assert ds.overviews(1) == [2, 4]
        smaller = ds.read(out_shape=(3, 33, 50))
    assert np.array_equal(smaller, levels[2])
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff == big
        assert len(tif.series[0].levels) == 3
        for level, expected in zip(tif.series[0].levels, levels, strict=True):
            assert np.array_equal(level.asarray(), expected)


def test_extra_tags_reach_the_first_image_only(tmp_path):
    arr = sample((40, 50), np.dtype("<f4"))
    scale = Tag(33550, DOUBLE, (2.5, 2.5, 0.0))  # ModelPixelScaleTag
    path = write(tmp_path / "a.tif", [arr, arr[::2, ::2].copy()], (16, 16), tags=[scale])
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].tags[33550].value == (2.5, 2.5, 0.0)
        assert 33550 not in tif.pages[1].tags


@pytest.mark.parametrize("big", [False, True])
def test_header_ranges_are_slices_of_the_header(big):
    images = [tiled_image((40, 3, 100, 100), (1, 1, 16, 32)), tiled_image((3, 50, 50), (1, 16, 16))]
    lay = tiled_layout(images, np.dtype(">u2"), force_bigtiff=big)
    header = lay.header_range(0, lay.size)
    rng = random.Random(1)
    cuts = [(0, 1), (15, 17), (lay.size - 3, lay.size + 5)]
    for _ in range(300):
        a = rng.randrange(lay.size)
        cuts.append((a, a + rng.randrange(1, 3000)))
    for start, stop in cuts:
        assert lay.header_range(start, stop) == header[start:stop], (start, stop)


def test_blocks_name_the_tile_each_data_byte_is_of():
    image = tiled_image((2, 3, 40, 50), (1, 1, 16, 32))  # 2 pages, 3 bands, 3 x 2 tiles
    lay = tiled_layout([image], np.dtype("u1"))
    size = 16 * 32
    blocks = list(lay.blocks_in(size * 7 + 5, size * 9 + 1))
    assert [(b.page, b.band, b.row, b.col, b.lo, b.hi) for b in blocks] == [
        (0, 1, 0, 1, 5, size),
        (0, 1, 1, 0, 0, size),
        (0, 1, 1, 1, 0, 1),
    ]
    last = list(lay.blocks_in(lay.data_size - 1, lay.data_size + 10))
    assert [(b.page, b.band, b.row, b.col) for b in last] == [(1, 2, 2, 1)]


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [((5,), (16,)), ((40, 40), (16, 20)), ((40, 40), (10, 16)), ((0, 16), (16, 16))],
    ids=str,
)
def test_not_tiled(shape, chunks):
    with pytest.raises(NotApplicable):
        tiled_image(shape, chunks)


def test_too_many_tiles_are_refused():
    image = tiled_image((100_000, 1, 4096, 4096), (1, 1, 16, 16))
    with pytest.raises(NotApplicable):
        tiled_layout([image], np.dtype("u1"))
    assert image.pages * image.blocks * 4 > MAX_HEADER_BYTES


@pytest.mark.parametrize("levels", [2, 3])
@pytest.mark.parametrize("big", [False, True])
def test_subifds_hold_each_planes_lower_levels(tmp_path, levels, big):
    """OME-TIFF's pyramid: every plane (a page) lists its reduced versions as SubIFDs."""
    full = sample((2, 3, 130, 200), np.dtype(">i2"))
    pyramid = [full[..., :: 2**k, :: 2**k].copy() for k in range(levels)]
    path = write(
        tmp_path / "a.tif", pyramid, (1, 1, 32, 64), planes=True, subifds=True, force_bigtiff=big
    )
    with tifffile.TiffFile(path) as tif:
        assert len(tif.pages) == 6  # the planes alone are in the chain
        series = tif.series[0]
        assert series.shape == (6, 130, 200) and len(series.levels) == levels
        for level, expected in zip(series.levels, pyramid, strict=True):
            assert np.array_equal(level.asarray(), expected.reshape(6, *expected.shape[-2:]))
