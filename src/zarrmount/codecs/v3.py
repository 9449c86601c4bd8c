"""Zarr v3 codec chains: array-to-array codecs, one array-to-bytes codec, bytes-to-bytes codecs.

Also the codecs zarr-python writes as ``numcodecs.<id>``, and sharding: read at
inner-chunk granularity when it is the whole chain (see :class:`V3Pipeline`), decoded a
whole shard at a time when nested or combined with other codecs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numcodecs
import numpy as np
from numcodecs.checksum32 import CRC32C

from zarrmount.codecs.base import (
    ChunkDecodeError,
    CodecError,
    Pipeline,
    ShardIndexSpec,
    as_bytes_array,
    from_flat,
)
from zarrmount.codecs.v2 import get_numcodec
from zarrmount.format.model import ArrayMeta

# numcodecs codecs that work on arrays rather than bytes (zarr-python's numcodecs.* names).
_NUMCODECS_ARRAY = {"delta", "fixedscaleoffset", "quantize", "bitround", "astype", "packbits"}
MISSING = np.uint64(2**64 - 1)

Spec = tuple[tuple[int, ...], np.dtype]  # the (shape, dtype) a codec decodes to


class _ArrayCodec:
    """array -> array: changes shape (transpose) or values (numcodecs filters)."""

    def encoded(self, spec: Spec) -> Spec:
        return spec

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        raise NotImplementedError


class _Transpose(_ArrayCodec):
    def __init__(self, config: dict[str, Any], ndim: int) -> None:
        order = config.get("order")
        if order == "C":
            order = list(range(ndim))
        elif order == "F":
            order = list(range(ndim))[::-1]
        if not isinstance(order, list) or sorted(order) != list(range(ndim)):
            raise CodecError(f"transpose order {order!r} is not a permutation of {ndim} axes")
        self.order = tuple(order)
        self.inverse = tuple(int(i) for i in np.argsort(order))

    def encoded(self, spec: Spec) -> Spec:
        shape, dtype = spec
        return tuple(shape[i] for i in self.order), dtype

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        return arr.transpose(self.inverse)


class _NumcodecsArray(_ArrayCodec):
    def __init__(self, codec: numcodecs.abc.Codec) -> None:
        self.codec = codec

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        out = np.asarray(self.codec.decode(np.ascontiguousarray(arr)))
        return from_flat(out.astype(dtype, copy=False), shape, dtype, "C")


class _BytesCodec:
    """array -> bytes: the element bytes in C order, in the given endian."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.endian = config.get("endian")

    def decode(self, buf: object, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        return from_flat(buf, shape, dtype, "C")


class _BytesToBytes:
    def __init__(self, decode: Callable[[object], object]) -> None:
        self.decode = decode


def _crc32c_decode(buf: object) -> object:
    data = as_bytes_array(buf)
    if data.nbytes < 4:
        raise ChunkDecodeError("crc32c: fewer than 4 bytes")
    body, (stored,) = data[:-4], struct.unpack("<I", data[-4:].tobytes())
    if CRC32C().checksum(body) != stored:
        raise ChunkDecodeError("crc32c checksum mismatch")
    return body


def _bytes_codec(name: str, config: dict[str, Any]) -> _BytesToBytes:
    if name == "crc32c":
        return _BytesToBytes(_crc32c_decode)
    if name == "gzip":
        return _BytesToBytes(numcodecs.GZip(level=config.get("level", 5)).decode)
    if name == "zstd":
        return _BytesToBytes(numcodecs.Zstd(level=config.get("level", 0)).decode)
    if name == "blosc":
        return _BytesToBytes(numcodecs.Blosc().decode)  # blosc frames describe themselves
    if name.startswith("numcodecs."):
        return _BytesToBytes(get_numcodec({**config, "id": name[len("numcodecs."):]}).decode)
    raise CodecError(f"unsupported codec {name!r}")


class Chain:
    """A v3 codec list bound to the (shape, dtype) it decodes to."""

    def __init__(self, codecs: list[dict[str, Any]], spec: Spec, fill: np.ndarray) -> None:
        self.spec = spec
        self.array_codecs: list[tuple[_ArrayCodec, Spec]] = []
        self.bytes_codecs: list[_BytesToBytes] = []
        self.to_bytes: _BytesCodec | ShardingCodec | None = None
        for codec in codecs:
            name, config = codec["name"], codec.get("configuration") or {}
            if self.to_bytes is None:
                a2a = self._array_codec(name, config, len(spec[0]))
                if a2a is not None:
                    self.array_codecs.append((a2a, spec))
                    spec = a2a.encoded(spec)
                elif name == "bytes":
                    self.to_bytes = _BytesCodec(config)
                elif name == "sharding_indexed":
                    self.to_bytes = ShardingCodec(config, spec, fill)
                else:
                    raise CodecError(f"codec {name!r} cannot come before the bytes codec")
            else:
                self.bytes_codecs.append(_bytes_codec(name, config))
        if self.to_bytes is None:
            raise CodecError("codec chain has no array-to-bytes codec (bytes, sharding_indexed)")
        self.bytes_spec = spec
        self.bytes_codecs.reverse()
        self.array_codecs.reverse()

    @staticmethod
    def _array_codec(name: str, config: dict[str, Any], ndim: int) -> _ArrayCodec | None:
        if name == "transpose":
            return _Transpose(config, ndim)
        if name.startswith("numcodecs.") and name[len("numcodecs."):] in _NUMCODECS_ARRAY:
            return _NumcodecsArray(get_numcodec({**config, "id": name[len("numcodecs."):]}))
        return None

    def decode(self, raw: object) -> np.ndarray:
        buf = raw
        for codec in self.bytes_codecs:
            buf = codec.decode(buf)
        arr = self.to_bytes.decode(buf, self.bytes_spec)
        for codec, spec in self.array_codecs:
            arr = codec.decode(arr, spec)
        return arr


def index_chain(config: dict[str, Any], chunks_per_shard: tuple[int, ...]) -> tuple[Chain, int]:
    """The chain decoding a shard index, and the index's encoded size in bytes."""
    codecs = config.get("index_codecs") or [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "crc32c"},
    ]
    names = [c.get("name") if isinstance(c, dict) else c for c in codecs]
    if not names or names[0] != "bytes" or any(n != "crc32c" for n in names[1:]):
        raise CodecError(f"unsupported sharding index codecs {names}")
    endian = (codecs[0].get("configuration") or {}).get("endian", "little")
    dtype = np.dtype("<u8" if endian == "little" else ">u8")
    spec = ((*chunks_per_shard, 2), dtype)
    norm = [{"name": n, "configuration": c.get("configuration", {}) if isinstance(c, dict) else {}}
            for n, c in zip(names, codecs, strict=True)]
    nbytes = 16 * int(np.prod(chunks_per_shard)) + 4 * (len(names) - 1)
    return Chain(norm, spec, np.zeros((), dtype)), nbytes


def _shard_layout(config: dict[str, Any], shard_shape: tuple[int, ...]):
    inner = tuple(config.get("chunk_shape") or ())
    if len(inner) != len(shard_shape) or any(
        not isinstance(i, int) or i <= 0 or s % i for s, i in zip(shard_shape, inner, strict=True)
    ):
        raise CodecError(f"sharding chunk_shape {list(inner)} does not divide {list(shard_shape)}")
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        raise CodecError(f"sharding index_location {location!r} is not start/end")
    per_shard = tuple(s // i for s, i in zip(shard_shape, inner, strict=True))
    index, index_nbytes = index_chain(config, per_shard)
    return inner, per_shard, index, index_nbytes, location == "end"


class ShardingCodec:
    """array -> bytes for a whole shard: used when sharding is nested or not alone."""

    def __init__(self, config: dict[str, Any], spec: Spec, fill: np.ndarray) -> None:
        shard_shape, dtype = spec
        inner, self.per_shard, self.index, self.index_nbytes, self.at_end = _shard_layout(
            config, shard_shape
        )
        self.inner_shape = inner
        self.inner = Chain(_codecs(config), (inner, dtype), fill)
        self.fill = fill

    def decode(self, buf: object, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        data = as_bytes_array(buf)
        n = self.index_nbytes
        if data.nbytes < n:
            raise ChunkDecodeError(f"shard of {data.nbytes} bytes is shorter than its index")
        index = self.index.decode(data[-n:] if self.at_end else data[:n])
        out = np.empty(shape, dtype=dtype)
        for coords in np.ndindex(*self.per_shard):
            region = tuple(slice(c * i, (c + 1) * i)
                           for c, i in zip(coords, self.inner_shape, strict=True))
            offset, length = index[coords]
            if offset == MISSING and length == MISSING:
                out[region] = self.fill
                continue
            if offset + length > data.nbytes:
                raise ChunkDecodeError(f"inner chunk {coords} lies outside the shard")
            out[region] = self.inner.decode(data[int(offset) : int(offset + length)])
        return out


def _codecs(config: dict[str, Any]) -> list[dict[str, Any]]:
    codecs = config.get("codecs")
    if not isinstance(codecs, list) or not codecs:
        raise CodecError("sharding has no inner codecs")
    return [c if isinstance(c, dict) else {"name": c} for c in codecs]


class V3Pipeline(Pipeline):
    """Decodes a v3 chunk, or with ``meta.shards`` one inner chunk of a shard."""

    def __init__(self, meta: ArrayMeta) -> None:
        super().__init__(meta)
        codecs = meta.codecs["codecs"]
        if meta.shards is not None:
            config = codecs[0]["configuration"]
            inner, per_shard, index, index_nbytes, at_end = _shard_layout(config, meta.shards)
            self.chain = Chain(_codecs(config), (inner, meta.dtype), meta.fill_value)
            self.sharding = ShardIndexSpec(per_shard, index_nbytes, at_end, index.decode)
        else:
            self.chain = Chain(codecs, (meta.chunks, meta.dtype), meta.fill_value)

    def _decode(self, raw: bytes) -> np.ndarray:
        return self.chain.decode(raw)
