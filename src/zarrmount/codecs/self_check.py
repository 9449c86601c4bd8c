"""A new pipeline first decodes what it encodes: a chain that builds but cannot decode (a
codec's bug, or ours) hides its arrays with the reason, instead of showing files whose
every read fails with EIO."""

from __future__ import annotations

import numpy as np

from zarrmount.codecs.base import CodecError, Pipeline

# Larger chunks are not tried: the check would cost more than a listing can spend.
CHECK_MAX_BYTES = 16 << 20


# The sample repeats a pattern this long: making 4 MiB of it element by element took 23
# ms of a first listing's 29, repeating it takes one copy.
PATTERN_BYTES = 1 << 16


def _sample(nbytes: int) -> np.ndarray:
    """Patterned bytes that compress, yet are not all alike (those may skip whole paths)."""
    period = np.arange(min(nbytes, PATTERN_BYTES), dtype=np.uint32) * 2654435761 >> 24
    return np.resize(period.astype(np.uint8) & 0x3F, nbytes)


def check_round_trip(pipeline: Pipeline) -> None:
    """Raise CodecError when ``pipeline`` fails to decode a chunk it encoded itself. A
    chunk it cannot encode proves nothing (filters may refuse such values): no error."""
    meta = pipeline.meta
    nbytes = meta.chunk_nbytes
    if nbytes > CHECK_MAX_BYTES or meta.dtype.hasobject:
        return
    chunk = _sample(nbytes).view(meta.dtype).reshape(meta.chunks)
    try:
        stored = pipeline.encode(chunk)
    except Exception:  # see the docstring
        return
    try:
        pipeline.decode(stored, np.empty(nbytes, dtype=np.uint8))
    except Exception as e:
        raise CodecError(f"its codecs cannot decode what they encode: {e}") from e
