"""The first bytes of a chunk stored as one zstd frame, decoded without the rest of it.

A zstd frame decodes front to back and cannot start in the middle, but it can stop early:
a read near a chunk's start (the first read of a file, the first rows of each chunk of a
row) costs the decoding of that prefix instead of the whole chunk (4 KiB of a 4 MiB chunk:
0.2 ms instead of 5.5 ms here). zstd is Zarr v3's default compressor. This needs the
standard library's ``compression.zstd`` (Python 3.14) or its backport, whose decompressor
can stop at a given output length; without either, such chunks decode whole.
"""

from __future__ import annotations

import numpy as np

from zarrmount.codecs.base import ChunkDecodeError, Reader, Unsupported

try:
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:
    try:
        from backports import zstd  # type: ignore[import-not-found,no-redef]
    except ImportError:
        zstd = None

AVAILABLE = zstd is not None
# Stored bytes read at a time: compressed float data needs about this much for the largest
# prefix worth decoding in part (an eighth of a 4 MiB chunk).
STEP = 128 << 10


def decode_range(read: Reader, size: int, lo: int, hi: int, out: np.ndarray) -> None:
    """Bytes ``[lo, hi)`` of the frame stored as ``size`` bytes into ``out``, decoding the
    frame from its start up to ``hi`` only."""
    first = read(0, min(STEP, size))
    try:  # a frame that claims more than the chunk is a bomb: no part of it is served
        claimed = zstd.get_frame_info(first[:18]).decompressed_size
    except zstd.ZstdError as e:
        raise ChunkDecodeError(f"zstd frame header: {e}") from e
    if claimed is None:  # only a whole (capped) decode can tell whether it fits
        raise Unsupported("zstd frame does not state its size")
    if claimed > out.nbytes:
        raise ChunkDecodeError(f"zstd frame holds {claimed} bytes, expected {out.nbytes}")
    decompressor = zstd.ZstdDecompressor()
    at, done, pending = len(first), 0, first
    while done < hi:
        data = b""
        if decompressor.needs_input:
            if pending:
                data, pending = pending, b""
            else:
                if at >= size:
                    raise ChunkDecodeError(
                        f"zstd frame ends at {done} bytes, expected {out.nbytes}"
                    )
                data = read(at, min(STEP, size - at))
                if not data:
                    raise ChunkDecodeError(f"chunk ends at {at} bytes while read")
                at += len(data)
        piece = decompressor.decompress(data, max_length=hi - done)
        if not piece and not data:
            raise ChunkDecodeError(f"zstd frame stops at {done} bytes")
        start, stop = max(lo, done), done + len(piece)
        if stop > start:
            out[start:stop] = np.frombuffer(piece, np.uint8)[start - done :]
        done = stop
        if decompressor.eof and done < hi:
            if decompressor.unused_data:  # frames one after another: the whole decode knows
                raise Unsupported("zstd frames follow each other")
            raise ChunkDecodeError(f"zstd frame ends at {done} bytes, expected {out.nbytes}")
