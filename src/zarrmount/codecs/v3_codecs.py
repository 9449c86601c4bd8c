"""The codecs of Zarr v3 chains, one class per kind: array-to-array (transpose, numcodecs
filters), array-to-bytes (bytes, pcodec, zfpy) and bytes-to-bytes (crc32c, blosc, the
numcodecs compressors); chains and sharding are in ``v3.py``."""

from __future__ import annotations

import math
import struct
from typing import Any

import numcodecs
import numpy as np
from numcodecs.checksum32 import CRC32C

from zarrmount.codecs.base import (
    ChunkDecodeError,
    CodecError,
    as_bytes_array,
    from_flat,
    get_numcodec,
)

# numcodecs codecs that work on arrays rather than bytes (zarr-python's numcodecs.* names),
# with the configuration key naming the dtype they encode to.
NUMCODECS_ARRAY = {
    "delta": "astype",
    "fixedscaleoffset": "astype",
    "quantize": "astype",
    "bitround": None,
    "astype": "encode_dtype",
    "packbits": None,
}

Spec = tuple[tuple[int, ...], np.dtype]  # the (shape, dtype) a codec decodes to


class ArrayCodec:
    """array -> array: changes shape (transpose) or values (numcodecs filters)."""

    def encoded(self, spec: Spec) -> Spec:
        return spec

    def decode(self, arr: np.ndarray, spec: Spec) -> np.ndarray:
        raise NotImplementedError

    def encode(self, arr: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class Transpose(ArrayCodec):
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


class NumcodecsArray(ArrayCodec):
    """numcodecs filters view their input as the dtypes they name (``<i2``): they are
    given values in those dtypes, whatever byte order the ``bytes`` codec stores."""

    def __init__(self, codec_id: str, config: dict[str, Any]) -> None:
        self.codec = get_numcodec({**config, "id": codec_id})
        key = NUMCODECS_ARRAY[codec_id]
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


class BytesCodec:
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


class NumcodecsArrayBytes:
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


NUMCODECS_ARRAY_BYTES = {"numcodecs.pcodec", "numcodecs.zfpy"}


def grown(nbytes: int) -> int:
    """The most a bytes-to-bytes codec makes of ``nbytes`` bytes: compressors expand what
    they cannot shrink (bz2 1 % + 600, lz4 and zstd 0.4 % + 16, lzma and blosc headers),
    checksums add 4 or 8 bytes."""
    return nbytes + nbytes // 64 + 2048


class Crc32c:
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


class Blosc(numcodecs.Blosc):
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


def bytes_codec(name: str, config: dict[str, Any]):
    """A bytes -> bytes codec: anything with ``decode(buf)`` and ``encode(buf)``."""
    if name == "crc32c":
        return Crc32c()
    if name == "gzip":
        return numcodecs.GZip(level=config.get("level", 5))
    if name == "zstd":
        return numcodecs.Zstd(level=config.get("level", 0), checksum=config.get("checksum", False))
    if name == "blosc":
        return Blosc(config)
    if name.startswith("numcodecs."):
        return get_numcodec({**config, "id": name[len("numcodecs.") :]})
    raise CodecError(f"unsupported codec {name!r}")
