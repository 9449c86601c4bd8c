"""Which decoder of chunk parts a chunk's single compressor allows, for v2 and v3 alike."""

from __future__ import annotations

from collections.abc import Callable

import numcodecs
import numpy as np

from zarrmount.codecs import blosc_blocks, zstd_prefix
from zarrmount.codecs.base import Reader

DecodeRange = Callable[[Reader, int, int, int, np.ndarray], None]


def part_decoder(compressor: object) -> tuple[DecodeRange | None, bool]:
    """``(decode_range, decodes_from_start)`` for chunks whose C-order bytes
    ``compressor`` alone codes; ``(None, False)`` when only whole chunks decode."""
    if isinstance(compressor, numcodecs.Blosc):
        return blosc_blocks.decode_range, False
    if isinstance(compressor, numcodecs.Zstd) and zstd_prefix.AVAILABLE:
        return zstd_prefix.decode_range, True
    return None, False
