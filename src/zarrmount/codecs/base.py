"""What every codec pipeline offers the cache: decode stored bytes into a chunk."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray

from zarrmount.format.model import ArrayMeta


class CodecError(ValueError):
    """The array's codecs cannot be built (unknown id, bad configuration)."""


class ChunkDecodeError(Exception):
    """A stored chunk is corrupt, truncated, or decodes to the wrong size."""


class Pipeline(ABC):
    """Decodes one stored chunk into an array of the chunk shape and the file dtype."""

    def __init__(self, meta: ArrayMeta) -> None:
        self.meta = meta

    @abstractmethod
    def decode_bytes(self, raw: bytes) -> object:
        """Undo the codecs; returns any buffer holding the chunk's elements."""

    def decode(self, raw: bytes) -> np.ndarray:
        """Decode ``raw``; any failure becomes :class:`ChunkDecodeError` with the cause."""
        meta = self.meta
        try:
            buf = self.decode_bytes(raw)
            flat = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        except Exception as e:  # codecs raise anything from RuntimeError to ValueError
            raise ChunkDecodeError(f"cannot decode: {type(e).__name__}: {e}") from e
        if flat.nbytes != meta.chunk_nbytes:
            raise ChunkDecodeError(
                f"decoded to {flat.nbytes} bytes, expected {meta.chunk_nbytes}"
            )
        return flat.view(meta.dtype).reshape(meta.chunks, order=meta.order)
