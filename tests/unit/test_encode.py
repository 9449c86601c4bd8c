"""Chunks our pipelines encode must read back through zarr-python as the NumPy data encoded."""

from __future__ import annotations

import warnings

import numcodecs
import numpy as np
import pytest
import zarr

from zarrmount import hierarchy
from zarrmount.store.local import LocalStore

warnings.filterwarnings("ignore", category=UserWarning)

V2_CASES = {
    "blosc-shuffle": dict(dtype="<f4", compressors=numcodecs.Blosc(cname="lz4", shuffle=1)),
    "zstd-F": dict(dtype=">i8", compressors=numcodecs.Zstd(level=3), order="F"),
    "delta-zlib": dict(
        dtype="<i4", filters=[numcodecs.Delta(dtype="<i4")], compressors=numcodecs.Zlib()
    ),
    "fso": dict(
        dtype="<f8",
        filters=[numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i4")],
        compressors=None,
    ),
    "raw-structured": dict(
        dtype=[("a", "<i2"), ("b", ">f8", (2,))], compressors=None, fill_value=None
    ),
}

V3_CASES = {
    "bytes-zstd": dict(dtype="float32"),
    "big-transpose-gzip": dict(
        dtype="uint16",
        serializer=zarr.codecs.BytesCodec(endian="big"),
        filters=[zarr.codecs.TransposeCodec(order=(1, 0))],
        compressors=zarr.codecs.GzipCodec(),
    ),
    "blosc-crc": dict(
        dtype="int64",
        compressors=[
            zarr.codecs.BloscCodec(cname="zstd", shuffle="bitshuffle"),
            zarr.codecs.Crc32cCodec(),
        ],
    ),
    "zstd-checksum": dict(
        dtype="complex64", compressors=zarr.codecs.ZstdCodec(level=1, checksum=True)
    ),
    "nested-sharding": dict(
        dtype="int16",
        serializer=zarr.codecs.ShardingCodec(
            chunk_shape=(4, 5),
            codecs=[
                zarr.codecs.ShardingCodec(
                    chunk_shape=(2, 5), codecs=[zarr.codecs.BytesCodec(), zarr.codecs.GzipCodec()]
                )
            ],
        ),
        compressors=None,
    ),
}


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 255, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype="u1")
    data = raw.view(np.dtype(dtype)).reshape(shape)
    if np.dtype(dtype).kind == "f":
        data = np.round(rng.normal(size=shape), 1).astype(dtype)
    return data


def _roundtrip(root, shape, chunks):
    store = LocalStore(root)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    data = _data(node.meta.dtype, shape)
    # One chunk, encoded by us, written where zarr-python will look for it.
    region = tuple(slice(0, c) for c in chunks)
    key = node.data_prefix + node.meta.key_encoding.key((0,) * len(shape))
    if pipeline.sharding is None:
        chunk = np.full(node.meta.chunks, node.meta.fill_value, dtype=node.meta.dtype)
        chunk[region] = data[region]
        store.set(key, pipeline.encode(chunk))
    else:  # one shard, assembled from inner chunks encoded one by one
        inner = node.meta.chunks
        pieces = {}
        for local in np.ndindex(*pipeline.sharding.chunks_per_shard):
            sel = tuple(slice(i * n, (i + 1) * n) for i, n in zip(local, inner, strict=True))
            pieces[local] = pipeline.encode(np.ascontiguousarray(data[sel]))
        store.set(key, pipeline.sharding.assemble(pieces))
    got = zarr.open_array(root, mode="r")[region]
    np.testing.assert_array_equal(
        got.view(node.meta.dtype) if got.dtype.fields else got, data[region]
    )


@pytest.mark.parametrize("name", sorted(V2_CASES))
def test_v2_encode_reads_back_in_zarr(tmp_path, name):
    root = str(tmp_path / "a.zarr")
    zarr.create_array(root, shape=(8, 10), chunks=(8, 10), zarr_format=2, **V2_CASES[name])
    _roundtrip(root, (8, 10), (8, 10))


@pytest.mark.parametrize("name", sorted(V3_CASES))
def test_v3_encode_reads_back_in_zarr(tmp_path, name):
    root = str(tmp_path / "a.zarr")
    zarr.create_array(root, shape=(8, 10), chunks=(8, 10), zarr_format=3, **V3_CASES[name])
    _roundtrip(root, (8, 10), (8, 10))
