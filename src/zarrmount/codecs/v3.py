"""Zarr v3 codec chains: array-to-array codecs, one array-to-bytes codec, bytes-to-bytes codecs
(each in ``v3_codecs.py``, with those zarr-python writes as ``numcodecs.<id>``), and
sharding: read and written at inner-chunk granularity when it is the whole chain (see
:class:`V3Pipeline`), handled a whole shard at a time when nested or combined with other
codecs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarrmount.codecs import bounded
from zarrmount.codecs.base import (
    ChunkDecodeError,
    CodecError,
    Pipeline,
    ShardIndexSpec,
    as_bytes_array,
    is_fill,
    stored_range,
)
from zarrmount.codecs.parts import part_decoder
from zarrmount.codecs.v3_codecs import (
    NUMCODECS_ARRAY,
    NUMCODECS_ARRAY_BYTES,
    ArrayCodec,
    BytesCodec,
    NumcodecsArray,
    NumcodecsArrayBytes,
    Spec,
    Transpose,
    bytes_codec,
    grown,
)
from zarrmount.format.model import ArrayMeta

MISSING = 2**64 - 1


def index_entry(index: np.ndarray, local: tuple[int, ...]) -> tuple[int, int] | None:
    """``(offset, length)`` of an inner chunk by its shard's index; None when absent."""
    offset, length = (int(v) for v in index[local])
    return None if offset == MISSING and length == MISSING else (offset, length)


class Chain:
    """A v3 codec list bound to the (shape, dtype) it decodes to."""

    def __init__(self, codecs: list[dict[str, Any]], spec: Spec, fill: np.ndarray) -> None:
        self.spec = spec
        self.array_codecs: list[tuple[ArrayCodec, Spec]] = []
        self.bytes_codecs: list = []
        self.to_bytes: BytesCodec | ShardingCodec | NumcodecsArrayBytes | None = None
        for codec in codecs:
            name, config = codec["name"], codec.get("configuration") or {}
            if self.to_bytes is None:
                a2a = self._array_codec(name, config, len(spec[0]))
                if a2a is not None:
                    self.array_codecs.append((a2a, spec))
                    spec = a2a.encoded(spec)
                elif name == "bytes":
                    self.to_bytes = BytesCodec(config)
                elif name == "sharding_indexed":
                    self.to_bytes = ShardingCodec(config, spec, fill)
                elif name in NUMCODECS_ARRAY_BYTES:
                    self.to_bytes = NumcodecsArrayBytes(name, config)
                else:
                    raise CodecError(f"codec {name!r} cannot come before the bytes codec")
            else:
                self.bytes_codecs.append(bytes_codec(name, config))
        if self.to_bytes is None:
            raise CodecError("codec chain has no array-to-bytes codec (bytes, sharding_indexed)")
        self.bytes_spec = spec
        shape, dtype = spec
        if isinstance(self.to_bytes, ShardingCodec):  # inner chunks as stored, and the index
            layout = self.to_bytes.layout
            size = math.prod(layout.per_shard) * self.to_bytes.inner.stored
            size += layout.index_nbytes
        else:
            size = math.prod(shape) * dtype.itemsize
            if not isinstance(self.to_bytes, BytesCodec):  # pcodec, zfpy: not much more
                size = 2 * size + 1024
        # What each bytes codec decodes to at most: the most the codecs before it make.
        self.limits = []
        for _ in self.bytes_codecs:
            self.limits.append(size)
            size = grown(size)
        self.stored = size  # the most a stored chunk can hold
        # Only the bytes codec's input has the array's size: one compressor before it
        # decodes straight into the caller's buffer.
        self._into = (
            not self.array_codecs
            and len(self.bytes_codecs) == 1
            and isinstance(self.to_bytes, BytesCodec)
        )

    @staticmethod
    def _array_codec(name: str, config: dict[str, Any], ndim: int) -> ArrayCodec | None:
        if name == "transpose":
            return Transpose(config, ndim)
        codec_id = name.removeprefix("numcodecs.")
        if name.startswith("numcodecs.") and codec_id in NUMCODECS_ARRAY:
            return NumcodecsArray(codec_id, config)
        return None

    def decode(self, raw: object, out: np.ndarray | None = None) -> np.ndarray:
        """Decode a stored chunk; into ``out`` when one numcodecs codec ends the chain.
        No bytes codec may produce more than the array-to-bytes codec takes."""
        buf = raw
        into = out if self._into else None
        for codec, limit in zip(reversed(self.bytes_codecs), reversed(self.limits), strict=True):
            buf = bounded.decode(codec, buf, limit, into)
        arr = self.to_bytes.decode(buf, self.bytes_spec)
        for codec, spec in reversed(self.array_codecs):
            arr = codec.decode(arr, spec)
        return arr

    def encode(self, arr: np.ndarray) -> bytes:
        for codec, _ in self.array_codecs:
            arr = codec.encode(arr)
        buf: object = self.to_bytes.encode(arr)
        for codec in self.bytes_codecs:
            buf = codec.encode(buf)
        return as_bytes_array(buf).tobytes()


def index_chain(config: dict[str, Any], chunks_per_shard: tuple[int, ...]) -> tuple[Chain, int]:
    """The chain coding a shard index, and the index's encoded size in bytes."""
    codecs = config.get("index_codecs") or [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "crc32c"},
    ]
    norm = [c if isinstance(c, dict) else {"name": c} for c in codecs]
    names = [c.get("name") for c in norm]
    at = next((i for i, n in enumerate(names) if n != "transpose"), len(names))  # bytes
    if at == len(names) or names[at] != "bytes" or any(n != "crc32c" for n in names[at + 1 :]):
        raise CodecError(f"unsupported sharding index codecs {names}")
    endian = (norm[at].get("configuration") or {}).get("endian", "little")
    dtype = np.dtype("<u8" if endian == "little" else ">u8")
    nbytes = 16 * int(np.prod(chunks_per_shard)) + 4 * (len(names) - at - 1)
    return Chain(norm, ((*chunks_per_shard, 2), dtype), np.zeros((), dtype)), nbytes


class ShardLayout:
    """Where inner chunks sit in a shard, and how its index is coded."""

    def __init__(self, config: dict[str, Any], shard_shape: tuple[int, ...]) -> None:
        inner = tuple(config.get("chunk_shape") or ())
        if len(inner) != len(shard_shape) or any(
            not isinstance(i, int) or i <= 0 or s % i
            for s, i in zip(shard_shape, inner, strict=True)
        ):
            raise CodecError(
                f"sharding chunk_shape {list(inner)} does not divide {list(shard_shape)}"
            )
        location = config.get("index_location", "end")
        if location not in ("start", "end"):
            raise CodecError(f"sharding index_location {location!r} is not start/end")
        codecs = config.get("codecs")
        if not isinstance(codecs, list) or not codecs:
            raise CodecError("sharding has no inner codecs")
        self.codecs = [c if isinstance(c, dict) else {"name": c} for c in codecs]
        self.inner = inner
        self.per_shard = tuple(s // i for s, i in zip(shard_shape, inner, strict=True))
        self.index, self.index_nbytes = index_chain(config, self.per_shard)
        self.at_end = location == "end"

    def read_index(self, data: np.ndarray) -> np.ndarray:
        n = self.index_nbytes
        if data.nbytes < n:
            raise ChunkDecodeError(f"shard of {data.nbytes} bytes is shorter than its index")
        return self.index.decode(data[-n:] if self.at_end else data[:n])

    def assemble(self, pieces: dict[tuple[int, ...], bytes]) -> bytes:
        """A shard from the encoded inner chunks present; absent ones read as fill."""
        index = np.full((*self.per_shard, 2), MISSING, dtype=np.uint64)
        offset = 0 if self.at_end else self.index_nbytes
        body = []
        for coords in np.ndindex(*self.per_shard):
            piece = pieces.get(coords)
            if piece is not None:
                index[coords] = (offset, len(piece))
                offset += len(piece)
                body.append(piece)
        encoded = self.index.encode(index.astype(self.index.spec[1]))
        return b"".join([*body, encoded] if self.at_end else [encoded, *body])


class ShardingCodec:
    """array -> bytes for a whole shard: used when sharding is nested or not alone."""

    def __init__(self, config: dict[str, Any], spec: Spec, fill: np.ndarray) -> None:
        shard_shape, dtype = spec
        self.layout = ShardLayout(config, shard_shape)
        self.inner = Chain(self.layout.codecs, (self.layout.inner, dtype), fill)
        self.fill = fill

    def _regions(self):
        for coords in np.ndindex(*self.layout.per_shard):
            yield (
                coords,
                tuple(
                    slice(c * i, (c + 1) * i)
                    for c, i in zip(coords, self.layout.inner, strict=True)
                ),
            )

    def decode(self, buf: object, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        data = as_bytes_array(buf)
        index = self.layout.read_index(data)
        out = np.empty(shape, dtype=dtype)
        for coords, region in self._regions():
            entry = index_entry(index, coords)
            if entry is None:
                out[region] = self.fill
                continue
            offset, length = entry
            if offset + length > data.nbytes:
                raise ChunkDecodeError(f"inner chunk {list(coords)} lies outside the shard")
            out[region] = self.inner.decode(data[offset : offset + length])
        return out

    def encode(self, arr: np.ndarray) -> bytes:
        pieces = {
            coords: self.inner.encode(arr[region])
            for coords, region in self._regions()
            if not is_fill(arr[region], self.fill)
        }
        return self.layout.assemble(pieces)


class V3Pipeline(Pipeline):
    """Codes a v3 chunk, or with ``meta.shards`` one inner chunk of a shard."""

    def __init__(self, meta: ArrayMeta) -> None:
        super().__init__(meta)
        codecs = meta.codecs["codecs"]
        if meta.shards is not None:
            self.layout = ShardLayout(codecs[0]["configuration"], meta.shards)
            self.chain = Chain(self.layout.codecs, (meta.chunks, meta.dtype), meta.fill_value)
            self.sharding = ShardIndexSpec(
                self.layout.per_shard,
                self.layout.index_nbytes,
                self.layout.at_end,
                self.layout.index.decode,
                self.layout.assemble,
                self.chain.stored,
            )
        else:
            self.chain = Chain(codecs, (meta.chunks, meta.dtype), meta.fill_value)
        chain = self.chain  # of a chunk, or an inner chunk
        if isinstance(chain.to_bytes, BytesCodec) and not chain.array_codecs:
            if not chain.bytes_codecs:
                self.decode_range = stored_range
                self.passthrough = meta.shards is None  # a chunk's file is its bytes
            elif len(chain.bytes_codecs) == 1:
                self.decode_range, self.decodes_from_start = part_decoder(chain.bytes_codecs[0])

    def _decode(self, raw: bytes, out: np.ndarray | None) -> np.ndarray:
        return self.chain.decode(raw, out)

    def _encode(self, chunk: np.ndarray) -> bytes:
        return self.chain.encode(chunk)
