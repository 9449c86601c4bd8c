"""Chunks of arrays of variable-length strings or bytes (``vlen-utf8``, ``vlen-bytes``)
decoded to object arrays of the chunk's shape, for their text. Every decode is bounded:
the bytes before the element codec by ``limit``, the element count by the chunk's."""

from __future__ import annotations

import math
import struct

import numcodecs
import numpy as np

from zarrmount.codecs import bounded
from zarrmount.codecs.base import ChunkDecodeError, CodecError, as_bytes_array, get_numcodec
from zarrmount.codecs.v3 import ShardLayout, index_entry
from zarrmount.codecs.v3_codecs import bytes_codec
from zarrmount.format.model import ArrayMeta
from zarrmount.format.strings import ELEMENT_CODECS

_ELEMENTS = {"vlen-utf8": numcodecs.VLenUTF8, "vlen-bytes": numcodecs.VLenBytes}


class StringChunks:
    """Decodes the stored chunks of one array of strings (``meta.strings`` set)."""

    def __init__(self, meta: ArrayMeta, limit: int) -> None:
        self.meta = meta
        self.limit = limit  # the most the bytes codecs may decode to
        self.layout: ShardLayout | None = None  # of shards, where they hold the chunks
        if meta.zarr_format == 2:
            names = [f["id"] for f in meta.codecs.get("filters") or ()]
            codecs = [get_numcodec(f) for f in meta.codecs["filters"][1:]]
            if meta.codecs.get("compressor"):
                codecs.append(get_numcodec(meta.codecs["compressor"]))
        else:
            chain = meta.codecs["codecs"]
            if meta.shards is not None:  # the chain is sharding_indexed alone
                self.layout = ShardLayout(chain[0].get("configuration") or {}, meta.shards)
                chain = self.layout.codecs
            names = [c["name"] for c in chain]
            codecs = [bytes_codec(c["name"], c["configuration"]) for c in chain[1:]]
        if not names or names[0] not in ELEMENT_CODECS:
            raise CodecError(f"codecs {names} of an array of strings do not start with vlen")
        self.element = _ELEMENTS[names[0]]()
        self.codecs = codecs  # bytes to bytes, in the order they encode

    def inner(self, shard: bytes, local: tuple[int, ...]) -> bytes | None:
        """The encoded chunk at ``local`` in a shard's bytes; None where it is absent."""
        assert self.layout is not None
        try:
            index = self.layout.read_index(np.frombuffer(shard, dtype=np.uint8))
        except ChunkDecodeError:
            raise
        except Exception as e:  # a damaged index: its checksum, its size
            raise ChunkDecodeError(f"shard index: {type(e).__name__}: {e}") from e
        place = index_entry(index, local)
        if place is None:
            return None
        start, length = place
        if start + length > len(shard):
            raise ChunkDecodeError(f"inner chunk {list(local)} lies past the shard's end")
        return shard[start : start + length]

    def decode(self, raw: bytes) -> np.ndarray:
        """The chunk's elements (str or bytes) in an object array of the chunk's shape;
        any failure is a :class:`ChunkDecodeError` naming the cause."""
        meta = self.meta
        count = math.prod(meta.chunks)
        try:
            buf: object = raw
            for codec in reversed(self.codecs):
                buf = bounded.decode(codec, buf, self.limit)
            data = as_bytes_array(buf)
            if data.nbytes < 4 or struct.unpack("<I", data[:4].tobytes())[0] != count:
                raise ChunkDecodeError(f"does not hold the chunk's {count} elements")
            items = self.element.decode(data)
        except ChunkDecodeError:
            raise
        except Exception as e:  # codecs raise anything from RuntimeError to ValueError
            raise ChunkDecodeError(f"cannot decode: {type(e).__name__}: {e}") from e
        return np.asarray(items, dtype=object).reshape(meta.chunks, order=meta.order)
