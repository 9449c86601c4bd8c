"""What every codec pipeline offers the cache: decode stored bytes into a chunk."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numcodecs
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray

from zarrmount.format.model import ArrayMeta

# Reads ``length`` bytes of a stored chunk at ``offset`` (fewer at its end).
Reader = Callable[[int, int], bytes | memoryview]


class Unsupported(Exception):
    """This stored chunk cannot be decoded in part; decode all of it instead."""


class CodecError(ValueError):
    """The array's codecs cannot be built (unknown id, bad configuration)."""


class ChunkDecodeError(Exception):
    """A stored chunk is corrupt, truncated, or decodes to the wrong size."""


def get_numcodec(config: dict) -> numcodecs.abc.Codec:
    """A numcodecs codec from its ``{"id": ..., ...}`` configuration."""
    if not isinstance(config, dict):
        raise CodecError(f"codec configuration {config!r} is not an object")
    try:
        return numcodecs.get_codec(dict(config))
    except Exception as e:
        raise CodecError(f"codec {config.get('id')!r} is not available: {e}") from e


def raw_dtype(itemsize: int) -> np.dtype:
    """A dtype that copies or compares ``itemsize`` bytes verbatim, never converting values."""
    if itemsize in (1, 2, 4, 8):
        return np.dtype(f"=u{itemsize}")
    return np.dtype((np.void, itemsize))


def is_fill(chunk: np.ndarray, fill: np.ndarray) -> bool:
    """True when every element has the fill value's bytes (NaN fills included)."""
    raw = raw_dtype(chunk.dtype.itemsize)
    return bool(np.all(chunk.view(raw) == fill.reshape(()).view(raw)))


def as_bytes_array(buf: object) -> np.ndarray:
    """Any buffer a codec returns, as a flat uint8 array without copying."""
    return ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)


def from_flat(buf: object, shape: tuple[int, ...], dtype: np.dtype, order: str) -> np.ndarray:
    """Interpret a decoded buffer as a chunk; raises ChunkDecodeError on a size mismatch."""
    flat = as_bytes_array(buf)
    expected = dtype.itemsize * int(np.prod(shape))
    if flat.nbytes != expected:
        raise ChunkDecodeError(f"decoded to {flat.nbytes} bytes, expected {expected}")
    return flat.view(dtype).reshape(shape, order=order)


def stored_range(read: Reader, size: int, lo: int, hi: int, out: np.ndarray) -> None:
    """Chunks stored as their C-order bytes: the part is the stored bytes themselves."""
    if size != out.nbytes:
        raise ChunkDecodeError(f"decoded to {size} bytes, expected {out.nbytes}")
    got = read(lo, hi - lo)
    if len(got) != hi - lo:
        raise ChunkDecodeError(f"chunk ends at {lo + len(got)} bytes while read")
    out[lo:hi] = np.frombuffer(got, dtype=np.uint8)


@dataclass(frozen=True)
class ShardIndexSpec:
    """How to find inner chunks in a shard: where its index is and how to decode it."""

    chunks_per_shard: tuple[int, ...]
    index_nbytes: int
    at_end: bool
    decode_index: object  # Callable[[bytes], np.ndarray]: (*chunks_per_shard, 2) uint64
    assemble: object  # Callable[[dict[coords, bytes]], bytes]: a shard from inner chunks
    inner_stored: int  # the most an inner chunk's stored form can take (longer is damage)


class Pipeline(ABC):
    """Decodes one stored read unit (a chunk, or an inner chunk of a shard)."""

    sharding: ShardIndexSpec | None = None
    # decode_range(read, stored_size, lo, hi, out): bytes [lo, hi) of the decoded chunk
    # into the same places of ``out`` from parts of the stored chunk, where the codecs
    # allow (stored as is, blosc, zstd); see decode_part.
    decode_range: Callable[[Reader, int, int, int, np.ndarray], None] | None = None
    # True when decode_range decodes from the chunk's start (a zstd frame) up to ``hi``
    decodes_from_start = False
    # True when a chunk's stored bytes are its C-order bytes, so they need no decoding
    passthrough: bool = False

    def __init__(self, meta: ArrayMeta) -> None:
        self.meta = meta

    @abstractmethod
    def _decode(self, raw: bytes, out: np.ndarray | None) -> np.ndarray:
        """Undo the codecs: an array of the chunk shape in the file's dtype, in ``out``
        (a flat uint8 buffer of the chunk's size) where the last codec can write there."""

    @abstractmethod
    def _encode(self, chunk: np.ndarray) -> bytes:
        """Apply the codecs to an array of the chunk shape in the file's dtype."""

    def encode(self, chunk: np.ndarray) -> bytes:
        """The stored form of ``chunk`` (any strides; viewed as the file's dtype)."""
        return self._encode(chunk.view(self.meta.dtype))

    def part_cost(self, lo: int, hi: int) -> int:
        """The decoded bytes a part ``[lo, hi)`` costs to get."""
        return hi if self.decodes_from_start else hi - lo

    def decode_part(self, read: Reader, size: int, lo: int, hi: int, out: np.ndarray) -> None:
        """Bytes ``[lo, hi)`` of a chunk stored as ``size`` bytes, put in place in ``out``
        (the chunk's flat uint8 buffer); raises :class:`Unsupported` when only a whole
        decode can tell, and :class:`ChunkDecodeError` like :meth:`decode`."""
        if self.decode_range is None:
            raise Unsupported("codecs decode whole chunks")
        try:
            self.decode_range(read, size, lo, hi, out)
        except (ChunkDecodeError, Unsupported):
            raise
        except Exception as e:
            raise ChunkDecodeError(f"cannot decode: {type(e).__name__}: {e}") from e

    def decode(self, raw: bytes, out: np.ndarray | None = None) -> np.ndarray:
        """Decode ``raw``; any failure becomes :class:`ChunkDecodeError` with the cause.

        With ``out``, the chunk is returned in that buffer (decoded there, or copied when
        the codecs could not), so it never aliases ``raw``, which may be a reused scratch.
        """
        meta = self.meta
        try:
            chunk = self._decode(raw, out)
        except ChunkDecodeError:
            raise
        except Exception as e:  # codecs raise anything from RuntimeError to ValueError
            raise ChunkDecodeError(f"cannot decode: {type(e).__name__}: {e}") from e
        if chunk.shape != meta.chunks or chunk.dtype.itemsize != meta.itemsize:
            raise ChunkDecodeError(
                f"decoded to shape {list(chunk.shape)} of {chunk.dtype}, "
                f"expected {list(meta.chunks)} of {meta.dtype}"
            )
        if out is not None and not np.may_share_memory(chunk, out):
            placed = out.view(chunk.dtype).reshape(chunk.shape)
            np.copyto(placed, chunk)
            chunk = placed
        return chunk
