"""Zarr v2 chunks: filters, then one compressor, each a numcodecs codec."""

from __future__ import annotations

import numcodecs

from zarrmount.codecs.base import CodecError, Pipeline
from zarrmount.format.model import ArrayMeta


def _get_codec(config: dict) -> numcodecs.abc.Codec:
    try:
        return numcodecs.get_codec(dict(config))
    except Exception as e:
        raise CodecError(f"codec {config.get('id')!r} is not available: {e}") from e


class V2Pipeline(Pipeline):
    def __init__(self, meta: ArrayMeta) -> None:
        super().__init__(meta)
        compressor = meta.codecs.get("compressor")
        self.compressor = _get_codec(compressor) if compressor else None
        self.filters = [_get_codec(f) for f in meta.codecs.get("filters") or ()]

    def decode_bytes(self, raw: bytes) -> object:
        buf: object = self.compressor.decode(raw) if self.compressor else raw
        for f in reversed(self.filters):
            buf = f.decode(buf)
        return buf
