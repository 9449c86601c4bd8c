"""Decoding the first bytes of a zstd frame, against the NumPy data numcodecs encoded.

Frames are written by numcodecs (its bundled libzstd) and by zarr-python's v3 zstd codec
path (numcodecs too); the decoder under test is the standard library's API (backport).
"""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount.codecs import zstd_prefix
from zarrmount.codecs.base import ChunkDecodeError, Unsupported
from zarrmount.codecs.v2 import V2Pipeline
from zarrmount.format.v2 import parse_array

pytestmark = pytest.mark.skipif(not zstd_prefix.AVAILABLE, reason="no compression.zstd")


class Reader:
    """Reads parts of a stored frame, counting the bytes it hands out."""

    def __init__(self, frame: bytes) -> None:
        self.view, self.nbytes = memoryview(frame), 0

    def __call__(self, offset: int, length: int) -> memoryview:
        got = self.view[offset : offset + length]
        self.nbytes += len(got)
        return got


def data_of(kind: str, nbytes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":  # incompressible: zstd stores raw blocks
        return rng.integers(0, 256, nbytes, dtype=np.uint8)
    if kind == "zeros":
        return np.zeros(nbytes, dtype=np.uint8)
    walk = np.cumsum(rng.integers(-3, 4, nbytes // 4), dtype=np.int32)
    raw = np.zeros(nbytes, dtype=np.uint8)
    raw[: walk.nbytes] = walk.view(np.uint8)
    return raw


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["walk", "random", "zeros"]),
    nbytes=st.integers(1, 1_500_000),
    level=st.sampled_from([-5, 1, 3, 19]),
    checksum=st.booleans(),
    data=st.data(),
)
def test_any_range_equals_the_data(kind, nbytes, level, checksum, data):
    raw = data_of(kind, nbytes, nbytes)
    frame = bytes(numcodecs.Zstd(level=level, checksum=checksum).encode(raw))
    lo = data.draw(st.integers(0, nbytes - 1))
    hi = data.draw(st.integers(lo + 1, nbytes))
    out = np.zeros(nbytes, dtype=np.uint8)
    zstd_prefix.decode_range(Reader(frame), len(frame), lo, hi, out)
    assert np.array_equal(out[lo:hi], raw[lo:hi])
    assert not out[:lo].any() and not out[hi:].any()  # nothing outside the part written


def test_a_prefix_reads_a_prefix_of_the_stored_bytes():
    raw = data_of("walk", 4 << 20, 1)  # a 4 MiB chunk
    frame = bytes(numcodecs.Zstd(level=3).encode(raw))
    read = Reader(frame)
    out = np.empty(raw.nbytes, dtype=np.uint8)
    zstd_prefix.decode_range(read, len(frame), 0, 4096, out)
    assert np.array_equal(out[:4096], raw[:4096])
    assert read.nbytes <= zstd_prefix.STEP < len(frame)


def test_short_frame_is_a_decode_error():
    raw = data_of("walk", 300_000, 2)
    frame = bytes(numcodecs.Zstd().encode(raw))
    out = np.empty(raw.nbytes + 1000, dtype=np.uint8)  # the chunk should be longer
    with pytest.raises(ChunkDecodeError, match="ends at 300000"):
        zstd_prefix.decode_range(Reader(frame), len(frame), 0, out.nbytes, out)
    cut = frame[: len(frame) // 2]  # stored bytes end early
    with pytest.raises(ChunkDecodeError):
        zstd_prefix.decode_range(Reader(cut), len(cut), 0, raw.nbytes, out)


def test_frames_one_after_another_decode_whole():
    a, b = data_of("walk", 10_000, 3), data_of("walk", 10_000, 4)
    codec = numcodecs.Zstd()
    frames = bytes(codec.encode(a)) + bytes(codec.encode(b))
    out = np.empty(20_000, dtype=np.uint8)
    zstd_prefix.decode_range(Reader(frames), len(frames), 0, 10_000, out)  # first frame only
    assert np.array_equal(out[:10_000], a)
    with pytest.raises(Unsupported):
        zstd_prefix.decode_range(Reader(frames), len(frames), 5_000, 15_000, out)


def test_garbage_is_a_decode_error_through_the_pipeline():
    meta = parse_array(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": [100],
                "chunks": [100],
                "dtype": "<i4",
                "compressor": {"id": "zstd", "level": 1},
                "fill_value": 0,
                "filters": None,
                "order": "C",
            }
        ).encode(),
        {},
    )
    pipeline = V2Pipeline(meta)
    assert pipeline.decodes_from_start and pipeline.part_cost(100, 200) == 200
    junk = b"\x28\xb5\x2f\xfd" + bytes(range(60))  # a zstd magic number, then nonsense
    with pytest.raises((ChunkDecodeError, Unsupported)):  # no size stated: decode it whole
        pipeline.decode_part(Reader(junk), len(junk), 0, 40, np.empty(400, np.uint8))
    with pytest.raises(ChunkDecodeError):
        pipeline.decode(junk, np.empty(400, np.uint8))
