"""Decompression that stops at the size a chunk can have: a decompression bomb (a small
stored chunk that claims or inflates to gigabytes) fails its reads, it never allocates.

Formats with a size in their header (blosc, lz4, a zstd frame) are checked before
decoding; streams without one (zlib, gzip, bz2, lzma, zstd without a size) decode with a
cap on their output. Other codecs (filters, checksums) do not expand their input much
and decode as they are.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable

import numcodecs
import numpy as np

from zarrmount.codecs.base import ChunkDecodeError, as_bytes_array
from zarrmount.codecs.zstd_prefix import zstd


def _too_big(size: int, limit: int) -> ChunkDecodeError:
    return ChunkDecodeError(f"decodes to {size} bytes or more, at most {limit} expected")


def _capped(decompressor, data: object, limit: int) -> bytes:
    """Run a standard-library style decompressor with output capped at ``limit`` + 1."""
    got = decompressor.decompress(data, limit + 1)
    if len(got) > limit:
        raise _too_big(len(got), limit)
    if not decompressor.eof:
        raise ChunkDecodeError("compressed stream is truncated")
    return got


def _zstd(data: np.ndarray, limit: int) -> bytes | None:
    """A frame that states its size is checked and left to numcodecs (which decodes it
    into the chunk's buffer); one that does not is decoded here, capped, frame by frame."""
    if zstd is None:
        raise ChunkDecodeError("zstd chunks need compression.zstd or its backport")
    try:
        size = zstd.get_frame_info(data[:18].tobytes()).decompressed_size
    except zstd.ZstdError as e:
        raise ChunkDecodeError(f"zstd frame header: {e}") from e
    if size is not None:
        if size > limit:
            raise _too_big(size, limit)
        return None
    got, rest = b"", data
    while len(rest):
        decompressor = zstd.ZstdDecompressor()
        got += _capped(decompressor, rest, limit - len(got))
        rest = decompressor.unused_data
    return got


def _claimed_size(name: str, at: int, header: int) -> Callable[[np.ndarray, int], None]:
    """A check of the decoded size a format states (little-endian int32 at ``at`` of a
    ``header``-byte header): numcodecs' LZ4 frames and blosc frames."""

    def check(data: np.ndarray, limit: int) -> None:
        if data.nbytes < header:
            raise ChunkDecodeError(f"{name} chunk has no header")
        (size,) = struct.unpack("<i", data[at : at + 4].tobytes())
        if size > limit:
            raise _too_big(size, limit)

    return check


# codec class: decode capped at a size (returns the bytes) or check the header (None)
_BOUNDED: dict[type, Callable[[np.ndarray, int], bytes | None]] = {
    numcodecs.Zlib: lambda d, n: _capped(zlib.decompressobj(), d, n),
    numcodecs.GZip: lambda d, n: _capped(zlib.decompressobj(16 + zlib.MAX_WBITS), d, n),
    numcodecs.BZ2: lambda d, n: _capped(bz2.BZ2Decompressor(), d, n),
    numcodecs.LZMA: lambda d, n: _capped(lzma.LZMADecompressor(), d, n),
    numcodecs.Zstd: _zstd,
    numcodecs.LZ4: _claimed_size("lz4", 0, 4),
    numcodecs.Blosc: _claimed_size("blosc", 4, 16),
}


def decode(codec: object, buf: object, limit: int, out: np.ndarray | None = None) -> object:
    """``codec.decode(buf[, out])``, refusing to produce more than ``limit`` bytes."""
    bounded = next((f for kind, f in _BOUNDED.items() if isinstance(codec, kind)), None)
    if bounded is None:
        return codec.decode(buf) if out is None else codec.decode(buf, out=out)
    data = as_bytes_array(buf)
    got = bounded(data, limit)
    if got is not None:
        return got
    return codec.decode(data) if out is None else codec.decode(data, out=out)
