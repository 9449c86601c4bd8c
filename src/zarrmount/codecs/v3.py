"""Zarr v3 codec chains: array-to-array codecs, one array-to-bytes codec, bytes-to-bytes codecs.

Also the codecs zarr-python writes as ``numcodecs.<id>``, and sharding: read and written at
inner-chunk granularity when it is the whole chain (see :class:`V3Pipeline`), handled a
whole shard at a time when nested or combined with other codecs.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numcodecs
import numpy as np
from numcodecs.checksum32 import CRC32C

from zarrmount.codecs import bounded
from zarrmount.codecs.base import (
    ChunkDecodeError,
    CodecError,
    Pipeline,
    ShardIndexSpec,
    as_bytes_array,
    from_flat,
    get_numcodec,
    is_fill,
    stored_range,
)
from zarrmount.codecs.parts import part_decoder
from zarrmount.format.model import ArrayMeta

# numcodecs codecs that work on arrays rather than bytes (zarr-python's numcodecs.* names),
# with the configuration key naming the dtype they encode to.
_NUMCODECS_ARRAY = {
    "delta": "astype",
    "fixedscaleoffset": "astype",
    "quantize": "astype",
    "bitround": None,
    "astype": "encode_dtype",
    "packbits": None,
}
MISSING = 2**64 - 1

Spec = tuple[tuple[int, ...], np.dtype]  # the (shape, dtype) a codec decodes to


class _ArrayCodec:
    """array -> array: changes shape (transpose) or values (numcodecs filters)."""

    def encoded(self, spec: Spec) -> Spec:
        return spec

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        raise NotImplementedError

    def encode(self, arr: np.ndarray) -> np.ndarray:
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

    def encode(self, arr: np.ndarray) -> np.ndarray:
        return arr.transpose(self.order)


class _NumcodecsArray(_ArrayCodec):
    """numcodecs filters view their input as the dtypes they name (``<i2``): they are
    given values in those dtypes, whatever byte order the ``bytes`` codec stores."""

    def __init__(self, codec_id: str, config: dict[str, Any]) -> None:
        self.codec = get_numcodec({**config, "id": codec_id})
        key = _NUMCODECS_ARRAY[codec_id]
        self.encoded_dtype = np.dtype(config[key]) if key and config.get(key) else None
        # the dtypes the codec itself works in (Delta's astype defaults to its dtype)
        self.codec_in = self._attr("decode_dtype", "dtype")
        self.codec_out = self._attr("encode_dtype", "astype")

    def _attr(self, *names: str) -> np.dtype | None:
        return next((getattr(self.codec, n) for n in names if hasattr(self.codec, n)), None)

    def encoded(self, spec: Spec) -> Spec:
        shape, dtype = spec
        if self.codec.codec_id == "packbits":  # one header byte, then 8 booleans a byte
            return (1 + -(-math.prod(shape) // 8),), np.dtype("u1")
        return shape, self.encoded_dtype or dtype

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        out = np.asarray(self.codec.decode(np.ascontiguousarray(arr, dtype=self.codec_out)))
        return from_flat(out.astype(dtype, copy=False), shape, dtype, "C")

    def encode(self, arr: np.ndarray) -> np.ndarray:
        out = np.asarray(self.codec.encode(np.ascontiguousarray(arr, dtype=self.codec_in)))
        return out if self.codec.codec_id == "packbits" else out.reshape(arr.shape)


class _BytesCodec:
    """array -> bytes: the element bytes in C order, in the given endian."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.order = {"little": "<", "big": ">"}.get(config.get("endian"), "=")

    def decode(self, buf: object, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        if self.order != "=" and dtype.itemsize > 1 and dtype.fields is None:
            dtype = dtype.newbyteorder(self.order)  # a filter before may name another order
        return from_flat(buf, shape, dtype, "C")

    def encode(self, arr: np.ndarray) -> bytes:
        dtype = arr.dtype if arr.dtype.itemsize == 1 else arr.dtype.newbyteorder(self.order)
        return np.ascontiguousarray(arr, dtype=dtype).tobytes()


class _NumcodecsArrayBytes:
    """array -> bytes codecs of numcodecs (``numcodecs.pcodec``, ``numcodecs.zfpy``): a
    stored chunk states its element count, checked before anything is allocated. Floats
    may be stored as the integers of their width: ``numcodecs.bitround`` before hands
    on their bits so (and decodes them as the floats they are)."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.codec = get_numcodec({**config, "id": name.removeprefix("numcodecs.")})

    def decode(self, buf: object, spec: Spec) -> np.ndarray:
        shape, dtype = spec
        data = as_bytes_array(buf).tobytes()
        count = math.prod(shape)
        native = dtype.newbyteorder("=")
        as_int = np.dtype(f"=i{dtype.itemsize}") if dtype.kind == "f" else native
        if self.codec.codec_id == "pcodec":
            from pcodec import standalone

            out = np.empty(count, dtype=native)
            try:
                progress = standalone.simple_decompress_into(data, out)
            except RuntimeError:  # another number type: the floats' bits as integers?
                progress = standalone.simple_decompress_into(data, out.view(as_int))
            if progress.n_processed != count or not progress.finished:
                raise ChunkDecodeError(f"pcodec chunk does not hold {count} elements")
        else:
            import zfpy

            head = zfpy.header(data)
            stated = math.prod(head[k] for k in ("nx", "ny", "nz", "nw") if head[k])
            if stated != count or np.dtype(head["type"]) not in (native, as_int):
                raise ChunkDecodeError(
                    f"zfp chunk holds {stated} of {np.dtype(head['type'])}, "
                    f"expected {count} of {native}"
                )
            out = np.ascontiguousarray(self.codec.decode(data)).reshape(-1).view(native)
        return from_flat(np.ascontiguousarray(out, dtype=dtype), shape, dtype, "C")

    def encode(self, arr: np.ndarray) -> bytes:
        native = arr.dtype.newbyteorder("=")
        return as_bytes_array(self.codec.encode(np.ascontiguousarray(arr, dtype=native)))


_NUMCODECS_ARRAY_BYTES = {"numcodecs.pcodec", "numcodecs.zfpy"}


def _grown(nbytes: int) -> int:
    """The most a bytes-to-bytes codec makes of ``nbytes`` bytes: compressors expand what
    they cannot shrink (bz2 1 % + 600, lz4 and zstd 0.4 % + 16, lzma and blosc headers),
    checksums add 4 or 8 bytes."""
    return nbytes + nbytes // 64 + 2048


class _Crc32c:
    def decode(self, buf: object, out: object = None) -> object:
        data = as_bytes_array(buf)
        if data.nbytes < 4:
            raise ChunkDecodeError("crc32c: fewer than 4 bytes")
        body, (stored,) = data[:-4], struct.unpack("<I", data[-4:].tobytes())
        if CRC32C().checksum(body) != stored:
            raise ChunkDecodeError("crc32c checksum mismatch")
        return body

    def encode(self, buf: object) -> bytes:
        data = as_bytes_array(buf)
        return data.tobytes() + struct.pack("<I", CRC32C().checksum(data))


class _Blosc(numcodecs.Blosc):
    """Blosc frames describe themselves; the configuration only matters for encoding."""

    _SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}

    def __init__(self, config: dict[str, Any]) -> None:
        shuffle = config.get("shuffle", "noshuffle")
        self.typesize = int(config.get("typesize") or 1)
        super().__init__(
            cname=config.get("cname", "lz4"),
            clevel=int(config.get("clevel", 5)),
            shuffle=self._SHUFFLE.get(shuffle, shuffle),
            blocksize=int(config.get("blocksize", 0)),
            typesize=self.typesize,
        )

    def encode(self, buf: object) -> object:
        return super().encode(as_bytes_array(buf))


def _bytes_codec(name: str, config: dict[str, Any]):
    """A bytes -> bytes codec: anything with ``decode(buf)`` and ``encode(buf)``."""
    if name == "crc32c":
        return _Crc32c()
    if name == "gzip":
        return numcodecs.GZip(level=config.get("level", 5))
    if name == "zstd":
        return numcodecs.Zstd(level=config.get("level", 0), checksum=config.get("checksum", False))
    if name == "blosc":
        return _Blosc(config)
    if name.startswith("numcodecs."):
        return get_numcodec({**config, "id": name[len("numcodecs.") :]})
    raise CodecError(f"unsupported codec {name!r}")


class Chain:
    """A v3 codec list bound to the (shape, dtype) it decodes to."""

    def __init__(self, codecs: list[dict[str, Any]], spec: Spec, fill: np.ndarray) -> None:
        self.spec = spec
        self.array_codecs: list[tuple[_ArrayCodec, Spec]] = []
        self.bytes_codecs: list = []
        self.to_bytes: _BytesCodec | ShardingCodec | _NumcodecsArrayBytes | None = None
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
                elif name in _NUMCODECS_ARRAY_BYTES:
                    self.to_bytes = _NumcodecsArrayBytes(name, config)
                else:
                    raise CodecError(f"codec {name!r} cannot come before the bytes codec")
            else:
                self.bytes_codecs.append(_bytes_codec(name, config))
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
            if not isinstance(self.to_bytes, _BytesCodec):  # pcodec, zfpy: not much more
                size = 2 * size + 1024
        # What each bytes codec decodes to at most: the most the codecs before it make.
        self.limits = []
        for _ in self.bytes_codecs:
            self.limits.append(size)
            size = _grown(size)
        self.stored = size  # the most a stored chunk can hold
        # Only the bytes codec's input has the array's size: one compressor before it
        # decodes straight into the caller's buffer.
        self._into = (
            not self.array_codecs
            and len(self.bytes_codecs) == 1
            and isinstance(self.to_bytes, _BytesCodec)
        )

    @staticmethod
    def _array_codec(name: str, config: dict[str, Any], ndim: int) -> _ArrayCodec | None:
        if name == "transpose":
            return _Transpose(config, ndim)
        codec_id = name.removeprefix("numcodecs.")
        if name.startswith("numcodecs.") and codec_id in _NUMCODECS_ARRAY:
            return _NumcodecsArray(codec_id, config)
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
            offset, length = (int(v) for v in index[coords])
            if offset == MISSING and length == MISSING:
                out[region] = self.fill
            elif offset + length > data.nbytes:
                raise ChunkDecodeError(f"inner chunk {list(coords)} lies outside the shard")
            else:
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
        if isinstance(chain.to_bytes, _BytesCodec) and not chain.array_codecs:
            if not chain.bytes_codecs:
                self.decode_range = stored_range
            elif len(chain.bytes_codecs) == 1:
                self.decode_range, self.decodes_from_start = part_decoder(chain.bytes_codecs[0])

    def _decode(self, raw: bytes, out: np.ndarray | None) -> np.ndarray:
        return self.chain.decode(raw, out)

    def _encode(self, chunk: np.ndarray) -> bytes:
        return self.chain.encode(chunk)
