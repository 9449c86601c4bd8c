"""Decoding some blocks of a blosc (v1 format) frame instead of the whole chunk.

A blosc frame is a 16-byte header, a table of block starts and independently compressed
blocks (512 KiB for lz4 in a 4 MiB chunk), so a small read of a cold chunk needs a
fraction of the decoding. numcodecs no longer offers partial decompression; the frame
layout is stable and documented by blosc, and each block's streams are decoded here with
numcodecs' own lz4 and zstd or with zlib. Anything unusual (bitshuffle, blosclz, snappy,
a newer format) is :class:`Unsupported`, and the caller decodes the whole chunk instead.
"""

from __future__ import annotations

import struct
import zlib

import numcodecs.lz4
import numcodecs.zstd
import numpy as np

from zarrmount.codecs.base import ChunkDecodeError, Reader, Unsupported
from zarrmount.memory import scratch

HEADER = 16
_DOSHUFFLE, _MEMCPYED, _DOBITSHUFFLE, _FUTURE, _DONT_SPLIT = 0x1, 0x2, 0x4, 0x8, 0x10
_MAX_SPLITS, _MIN_SPLIT = 16, 128  # blosc splits a block into typesize streams within these
_LZ4, _ZLIB, _ZSTD = 1, 3, 4  # compressor formats (flags >> 5) decoded here
_MAX_VERSION = 2  # blosc 1.x writes format versions 1 and 2
# Decoding in part pays when the blocks needed are at most this part of the chunk (a 1 MiB
# chunk has two 512 KiB blocks for lz4: better read and cache it whole at once).
_WORTH = 4


class Frame:
    """The header of one stored blosc frame."""

    def __init__(self, header: bytes | memoryview) -> None:
        if len(header) < HEADER:
            raise ChunkDecodeError(f"blosc frame of {len(header)} bytes has no header")
        version, _, flags, typesize, nbytes, blocksize, cbytes = struct.unpack(
            "<BBBBiii", bytes(header[:HEADER])
        )
        if not 1 <= version <= _MAX_VERSION or flags & (_DOBITSHUFFLE | _FUTURE):
            raise Unsupported(f"blosc format {version}, flags {flags:#x}")
        if nbytes < 0 or cbytes < HEADER or (nbytes and blocksize <= 0):
            raise ChunkDecodeError("blosc header is inconsistent")
        self.flags, self.typesize, self.nbytes = flags, typesize, nbytes
        self.blocksize, self.cbytes = blocksize, cbytes
        self.memcpyed = bool(flags & _MEMCPYED)
        self.shuffled = bool(flags & _DOSHUFFLE) and typesize > 1
        self.format = flags >> 5
        if not self.memcpyed and self.format not in (_LZ4, _ZLIB, _ZSTD):
            raise Unsupported(f"blosc compressor format {self.format}")
        self.nblocks = -(-nbytes // blocksize) if nbytes else 0

    def block_size(self, j: int) -> int:
        return min(self.blocksize, self.nbytes - j * self.blocksize)

    def splits(self, j: int) -> int:
        """How many streams block ``j`` was compressed as (blosc's rule)."""
        full = self.block_size(j) == self.blocksize
        ts = self.typesize
        if self.flags & _DONT_SPLIT or not full or ts > _MAX_SPLITS:
            return 1
        return ts if self.blocksize // ts >= _MIN_SPLIT else 1


def decode_range(read: Reader, size: int, lo: int, hi: int, out: np.ndarray) -> None:
    """Decode bytes ``[lo, hi)`` of the chunk stored as ``size`` bytes into the same
    places of ``out`` (a flat uint8 array of the chunk's size), decompressing only the
    blocks that hold them; other bytes of ``out`` may change. Raises
    :class:`Unsupported` (also when those blocks are much of the chunk) or
    :class:`ChunkDecodeError`."""
    frame = Frame(read(0, HEADER))
    if frame.cbytes > size:
        raise ChunkDecodeError(f"blosc frame of {frame.cbytes} bytes stored in {size}")
    if frame.nbytes != out.nbytes:
        raise ChunkDecodeError(f"blosc frame holds {frame.nbytes} bytes, expected {out.nbytes}")
    if lo >= hi:
        return
    first, last = lo // frame.blocksize, (hi - 1) // frame.blocksize
    start = first * frame.blocksize
    stop = start + sum(frame.block_size(j) for j in range(first, last + 1))
    if stop - start > frame.nbytes // _WORTH:
        raise Unsupported(f"blocks of {stop - start} of {frame.nbytes} bytes")
    if frame.memcpyed:
        _exact(read, HEADER + start, stop - start, out[start:stop])
        return
    starts = np.frombuffer(_read_exactly(read, HEADER, 4 * frame.nblocks), dtype="<i4")
    # Blocks compressed by several threads land in any order: a block ends where the
    # next stored one starts.
    bounds = np.append(np.sort(starts), frame.cbytes)
    for j in range(first, last + 1):
        begin = int(starts[j])
        end = int(bounds[np.searchsorted(bounds, begin, side="right")])
        if not HEADER + 4 * frame.nblocks <= begin < end <= frame.cbytes:
            raise ChunkDecodeError("blosc block table is inconsistent")
        at = j * frame.blocksize
        dest = out[at : at + frame.block_size(j)]
        src = memoryview(_read_exactly(read, begin, end - begin))
        _decode_block(frame, j, src, dest, max(lo - at, 0), min(hi - at, dest.nbytes))


def _read_exactly(read: Reader, offset: int, length: int) -> bytes | memoryview:
    got = read(offset, length)
    if len(got) != length:
        raise ChunkDecodeError(f"blosc frame ends at {offset + len(got)}, expected more")
    return got


def _exact(read: Reader, offset: int, length: int, dest: np.ndarray) -> None:
    dest[:] = np.frombuffer(_read_exactly(read, offset, length), dtype=np.uint8)


def _decode_block(
    frame: Frame, j: int, src: memoryview, dest: np.ndarray, lo: int, hi: int
) -> None:
    """Decompress block ``j`` and put its bytes ``[lo, hi)`` in place in ``dest``."""
    size = dest.nbytes
    nsplits = frame.splits(j)
    per = size // nsplits
    streams = scratch("blosc-streams", size)[:size] if frame.shuffled else dest
    at = 0
    for k in range(nsplits):
        if at + 4 > len(src):
            raise ChunkDecodeError(f"blosc block {j} is truncated")
        (csize,) = struct.unpack_from("<i", src, at)
        at += 4
        if csize <= 0 or at + csize > len(src):
            raise ChunkDecodeError(f"blosc block {j} has a stream of {csize} bytes")
        piece = src[at : at + csize]
        at += csize
        target = streams[k * per : (k + 1) * per]
        if csize == per:
            target[:] = np.frombuffer(piece, dtype=np.uint8)
        else:
            _decompress(frame.format, piece, target)
    if frame.shuffled:
        _unshuffle(streams, frame.typesize, dest, lo, hi)


def _decompress(fmt: int, piece: memoryview, target: np.ndarray) -> None:
    """One stream of a block, decompressed into ``target`` (exactly its size)."""
    try:
        if fmt == _LZ4:  # numcodecs' lz4 frames are the raw block after a 4-byte size
            numcodecs.lz4.decompress(struct.pack("<I", target.nbytes) + bytes(piece), target)
        elif fmt == _ZSTD:
            numcodecs.zstd.decompress(piece, target)
        else:
            got = zlib.decompress(piece)
            if len(got) != target.nbytes:
                raise ValueError(f"decoded to {len(got)} bytes, expected {target.nbytes}")
            target[:] = np.frombuffer(got, dtype=np.uint8)
    except Exception as e:
        raise ChunkDecodeError(f"blosc stream: {type(e).__name__}: {e}") from e


def _unshuffle(streams: np.ndarray, typesize: int, dest: np.ndarray, lo: int, hi: int) -> None:
    """Byte-shuffled blocks store byte k of every element together, k = 0..typesize-1,
    and leave a tail shorter than one element as it is; only the elements holding bytes
    ``[lo, hi)`` are put back together (the whole block costs more than its decompression).
    """
    n = streams.nbytes // typesize
    first, last = lo // typesize, min(-(-hi // typesize), n)
    whole = n * typesize
    placed = dest[first * typesize : last * typesize].reshape(last - first, typesize)
    placed[...] = streams[:whole].reshape(typesize, n)[:, first:last].T
    dest[whole:] = streams[whole:]
