"""Partial decoding of blosc frames against numcodecs' whole-frame decoding (the oracle).

Every frame here is written by numcodecs (c-blosc), and every expected byte comes from
numcodecs decoding the whole frame, or from the NumPy data that was encoded.
"""

from __future__ import annotations

import numcodecs
import numcodecs.blosc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount.codecs.base import ChunkDecodeError, Unsupported
from zarrmount.codecs.blosc_blocks import decode_range

PARTIAL = ["lz4", "lz4hc", "zstd", "zlib"]  # decoded in part; blosclz only whole


def reader(frame: bytes):
    view = memoryview(frame)
    return lambda offset, length: view[offset : offset + length]


def data_of(kind: str, nbytes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":  # incompressible: streams and whole frames stored as they are
        return rng.integers(0, 256, nbytes, dtype=np.uint8)
    if kind == "zeros":
        return np.zeros(nbytes, dtype=np.uint8)
    field = np.sin(np.arange(nbytes // 4, dtype=np.float32) / 97) * 1000
    raw = np.zeros(nbytes, dtype=np.uint8)
    raw[: field.nbytes] = field.view(np.uint8)
    return raw


@settings(max_examples=300, deadline=None)
@given(
    cname=st.sampled_from(PARTIAL),
    shuffle=st.sampled_from([numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE]),
    typesize=st.sampled_from([1, 2, 4, 8, 16, 24]),
    elements=st.integers(1, 70_000),
    blocksize=st.sampled_from([0, 128, 256, 4096, 100_000]),
    kind=st.sampled_from(["field", "random", "zeros"]),
    clevel=st.sampled_from([0, 1, 5, 9]),
    data=st.data(),
)
def test_any_range_equals_whole_decode(
    cname, shuffle, typesize, elements, blocksize, kind, clevel, data
):
    raw = data_of(kind, elements * typesize, elements)
    codec = numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=shuffle, blocksize=blocksize)
    frame = bytes(codec.encode(raw.view(f"V{typesize}")))
    expected = np.frombuffer(codec.decode(frame), dtype=np.uint8)
    assert np.array_equal(expected, raw)
    lo = data.draw(st.integers(0, raw.nbytes - 1))
    hi = data.draw(st.integers(lo + 1, raw.nbytes))
    out = np.zeros(raw.nbytes, dtype=np.uint8)
    try:
        decode_range(reader(frame), len(frame), lo, hi, out)
    except Unsupported:  # only when the blocks needed are over a quarter of the chunk
        block = int.from_bytes(frame[8:12], "little")
        needed = min(-(-hi // block) * block, raw.nbytes) - lo // block * block
        assert needed > raw.nbytes // 4
        return
    assert np.array_equal(out[lo:hi], expected[lo:hi])


def test_blocks_compressed_by_several_threads(monkeypatch):
    """c-blosc's threads store blocks in the order they finish: each block is found by
    its start, not assumed to follow the one before."""
    monkeypatch.setattr(numcodecs.blosc, "use_threads", True)
    before = numcodecs.blosc.get_nthreads()
    numcodecs.blosc.set_nthreads(4)
    try:
        raw = data_of("field", 4 << 20, 1)
        codec = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
        frames = [bytes(codec.encode(raw.view("<f4"))) for _ in range(4)]
    finally:
        numcodecs.blosc.set_nthreads(before)
    for frame in frames:
        out = np.zeros(raw.nbytes, dtype=np.uint8)
        for lo in range(0, raw.nbytes, 300_000):
            decode_range(reader(frame), len(frame), lo, lo + 70_000, out)
            assert np.array_equal(out[lo : lo + 70_000], raw[lo : lo + 70_000])


def test_only_the_blocks_holding_the_range_are_read():
    raw = data_of("field", 4 << 20, 2)
    frame = bytes(numcodecs.Blosc(cname="lz4", clevel=5).encode(raw.view("<f4")))
    asked = []
    read = reader(frame)

    def counting(offset, length):
        asked.append(length)
        return read(offset, length)

    out = np.zeros(raw.nbytes, dtype=np.uint8)
    decode_range(counting, len(frame), 4096, 8192, out)
    assert np.array_equal(out[4096:8192], raw[4096:8192])
    assert sum(asked) < len(frame) / 4


@pytest.mark.parametrize(
    "codec",
    [
        numcodecs.Blosc(cname="blosclz", shuffle=numcodecs.Blosc.SHUFFLE),
        numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.BITSHUFFLE),
    ],
    ids=["blosclz", "bitshuffle"],
)
def test_frames_only_decoded_whole_say_so(codec):
    raw = data_of("field", 1 << 20, 3)
    frame = bytes(codec.encode(raw.view("<f4")))
    with pytest.raises(Unsupported):
        decode_range(reader(frame), len(frame), 0, 10, np.zeros(raw.nbytes, dtype=np.uint8))


@pytest.mark.parametrize(
    "damage",
    ["truncated", "short-header", "size", "stream"],
)
def test_damaged_frames_are_decode_errors(damage):
    raw = data_of("field", 4 << 20, 4)
    frame = bytearray(numcodecs.Blosc(cname="lz4", clevel=5).encode(raw.view("<f4")))
    nbytes = raw.nbytes
    if damage == "truncated":
        frame = frame[: len(frame) // 2]
    elif damage == "short-header":
        frame = frame[:10]
    elif damage == "size":
        nbytes //= 2
    else:  # the first block's first stream said to run past its block
        start = int.from_bytes(frame[16:20], "little")
        frame[start : start + 4] = (len(frame)).to_bytes(4, "little")
    with pytest.raises(ChunkDecodeError):
        out = np.zeros(nbytes, dtype=np.uint8)
        decode_range(reader(bytes(frame)), len(frame), 0, 100, out)
