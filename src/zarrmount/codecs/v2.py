"""Zarr v2 chunks: filters, then one compressor, each a numcodecs codec."""

from __future__ import annotations

import numpy as np

from zarrmount.codecs import bounded
from zarrmount.codecs.base import Pipeline, as_bytes_array, from_flat, get_numcodec, stored_range
from zarrmount.codecs.parts import part_decoder
from zarrmount.format.model import ArrayMeta

# How much larger than the chunk a filter's encoded form may be (astype to a wider type).
FILTER_GROWTH = 8


class V2Pipeline(Pipeline):
    def __init__(self, meta: ArrayMeta) -> None:
        super().__init__(meta)
        compressor = meta.codecs.get("compressor")
        self.compressor = get_numcodec(compressor) if compressor else None
        self.filters = [get_numcodec(f) for f in meta.codecs.get("filters") or ()]
        plain = not self.filters and meta.order == "C"
        self.passthrough = plain and not self.compressor
        if self.passthrough:
            self.decode_range = stored_range
        elif plain:
            self.decode_range, self.decodes_from_start = part_decoder(self.compressor)

    def _decode(self, raw: bytes, out: np.ndarray | None) -> np.ndarray:
        # Filters may change the size (astype, packbits): before them, allow some room.
        nbytes = self.meta.chunk_nbytes
        limit = nbytes * FILTER_GROWTH + (64 << 10) if self.filters else nbytes
        if self.compressor is None:
            buf: object = raw
        else:
            # typed as the chunk: some codecs (pcodec) decode by the output's dtype
            into = None if self.filters or out is None else out.view(self.meta.dtype)
            buf = bounded.decode(self.compressor, raw, limit, into)
        for f in reversed(self.filters):
            buf = bounded.decode(f, buf, limit)
        return from_flat(buf, self.meta.chunks, self.meta.dtype, self.meta.order)

    def _encode(self, chunk: np.ndarray) -> bytes:
        buf: object = chunk.ravel(order=self.meta.order)
        for f in self.filters:
            buf = f.encode(buf)
        if self.compressor:
            buf = self.compressor.encode(buf)
        return as_bytes_array(buf).tobytes()
