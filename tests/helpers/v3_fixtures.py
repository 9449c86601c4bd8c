"""Zarr v3 test hierarchies (final spec and the May 2022 editor's draft) and their oracles.

The oracle is never zarrmount:

* arrays written by zarr-python 3 are read back with zarr-python:
  ``np.ascontiguousarray(zarr.open_array(...)[...]).astype(file_dtype).tobytes()``, where
  ``file_dtype`` is zarr-python's NumPy dtype in the byte order the ``bytes`` codec names;
  the expected ``user.zarr.chunks``/``shards`` are zarr-python's ``.chunks``/``.shards``;
* arrays zarr-python cannot write (``r*`` raw types) or cannot read (the draft layouts) are
  written here by hand, following the specs, from NumPy data; their oracle is NumPy.

Every builder accepts ``root=None`` for a dry run that only records node paths, so tests can
be parametrized at collection time without writing anything.

The writing itself is done by ``helpers.stores``; what is here is the case tables, one
function a theme (dtypes, fills, codecs, sharding, keys, ...), run in a fixed order so that
the seeded data comes out the same every time.
"""

from __future__ import annotations

import copy
import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr
import zarr.codecs.numcodecs as znc
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.codecs import ShardingCodec as Shard
from zarr.codecs import TransposeCodec as Transpose

from helpers.oracle import MISSING, json_xattr
from helpers.stores.core import prefixed, quiet, write_file, write_json, zarr_write
from helpers.stores.data import make_data, smooth_data
from helpers.stores.draft import DRAFT_PROTOCOL as DRAFT_PROTOCOL
from helpers.stores.draft import DraftArraySpec, write_draft_chunks
from helpers.stores.draft import write_entry_point as write_draft_entry_point
from helpers.stores.v2 import dtype_from_json
from helpers.stores.v3 import (
    array_doc,
    encode_shard_index,
    file_bytes,
    open_v3_group,
    patch_doc,
    relayout_shard,
    shard_index,
    write_doc,
    write_v3_array,
    zarr_oracle,
    zarr_v3_array,
)
from helpers.stores.v3 import file_dtype as file_dtype

# --------------------------------------------------------------------------- cases


@dataclass
class V3Array:
    """One array as the mount must show it."""

    path: str
    origin: str  # "zarr" (written and read back by zarr-python) or "manual" (NumPy oracle)
    tags: set[str] = field(default_factory=set)
    expected: bytes = b""
    dtype: np.dtype | None = None  # dtype of the file's bytes (user.zarr.dtype)
    shape: tuple[int, ...] = ()
    chunks: tuple[int, ...] = ()  # user.zarr.chunks (inner chunks when sharded)
    shards: tuple[int, ...] | None = None  # user.zarr.shards
    doc: dict = field(default_factory=dict)  # the metadata document as stored
    fmt: str = "3"  # user.zarr.format
    conventions: list[dict] | None = None  # expected user.zarr.conventions

    @property
    def nbytes(self) -> int:
        return len(self.expected)

    @property
    def attributes(self) -> dict:
        return self.doc.get("attributes", {})

    @property
    def fill_json(self) -> Any:
        return self.doc.get("fill_value")

    @property
    def dimension_names(self) -> list | None:
        return self.doc.get("dimension_names")


@dataclass
class V3Hierarchy:
    root: Path
    arrays: dict[str, V3Array] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)  # path -> attributes
    # path -> expected conventions list for groups that declare valid ones
    group_conventions: dict[str, list[dict]] = field(default_factory=dict)
    hidden: dict[str, str] = field(default_factory=dict)  # path -> "array"/"group"/"unknown"
    faults: dict[str, Fault] = field(default_factory=dict)
    malformed_conventions: list[str] = field(default_factory=list)

    def by_tag(self, tag: str) -> list[V3Array]:
        return [a for a in self.arrays.values() if tag in a.tags]


@dataclass
class Fault:
    """An array that is shown but has one broken shard / inner chunk / chunk."""

    path: str
    bad_key: str  # the store key the log line must name
    expected: bytes  # zarr-python's bytes, read before the data was broken
    good_ranges: list[tuple[int, int]]  # file byte ranges that must still read
    bad_ranges: list[tuple[int, int]]  # file byte ranges that must fail with EIO


# --------------------------------------------------------------------------- dtype helpers


def dtype_label_matches(label: str, want: np.dtype) -> str | None:
    """None if ``user.zarr.dtype`` text ``label`` describes ``want`` exactly, else why not."""
    if want.fields is None:
        if label != want.str:
            return f"user.zarr.dtype {label!r} != {want.str!r}"
        return None
    try:
        got = dtype_from_json(json.loads(label))
    except Exception as e:  # noqa: BLE001
        return f"user.zarr.dtype {label!r} is not a JSON descr list: {e}"
    if got != want:
        return f"user.zarr.dtype {label!r} -> {got} != {want}"
    return None


def normalize_codecs(codecs: list) -> list[dict]:
    """``{"name", "configuration"}`` objects, recursively inside sharding (to compare)."""
    out = []
    for c in codecs:
        if isinstance(c, str):
            c = {"name": c}
        config = copy.deepcopy(c.get("configuration") or {})
        for key in ("codecs", "index_codecs"):
            if c["name"] == "sharding_indexed" and isinstance(config.get(key), list):
                config[key] = normalize_codecs(config[key])
        out.append({"name": c["name"], "configuration": config})
    return out


def finish_zarr(root: Path, case: V3Array) -> None:
    """Fill ``case`` with zarr-python's view of the array at ``case.path``."""
    case.expected, case.dtype, case.chunks, case.shards, case.doc = zarr_oracle(root, case.path)
    case.shape = tuple(case.doc["shape"])


# --------------------------------------------------------------------------- builder


class V3Builder:
    def __init__(self, root: str | os.PathLike | None, root_attrs: dict | None = None):
        self.dry = root is None
        self.root = Path(root) if root is not None else Path("/nonexistent-dry-run")
        self.h = V3Hierarchy(self.root)
        self.rng = np.random.default_rng(3)
        self.h.groups[""] = dict(root_attrs or {})
        if not self.dry:
            open_v3_group(self.root, attrs=root_attrs)

    def group(self, path: str, attrs: dict | None = None) -> None:
        self._parents(path)
        self.h.groups[path] = dict(attrs or {})
        if not self.dry:
            open_v3_group(self.root, path, attrs)

    def _parents(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in self.h.groups:
                self.group(p)

    def _add(self, path: str, origin: str, tags) -> V3Array:
        self._parents(path)
        case = V3Array(path, origin, set(tags))
        self.h.arrays[path] = case
        return case

    def zarr_array(
        self,
        path: str,
        data: np.ndarray | None,
        *,
        region: Any = "all",
        patch: Callable[[dict], None] | None = None,
        tags: set[str] | frozenset = frozenset(),
        oracle_is_data: bool = False,
        **create,
    ) -> V3Array:
        """``zarr.create_array(..., **create)``, write ``data[region]``, optionally patch the
        stored zarr.json, then take the oracle from zarr-python reading the store (or, with
        ``oracle_is_data``, from ``data`` itself: zarr-python 3.1 writes some chains right
        but reads them back wrong)."""
        case = self._add(path, "zarr", tags)
        if self.dry:
            return case
        zarr_v3_array(self.root, path, data, region, **create)
        if patch is not None:
            patch_doc(self.root, path, patch)
        self.finish_zarr(case)
        if oracle_is_data:
            case.expected = np.ascontiguousarray(data, dtype=case.dtype).tobytes()
        return case

    def finish_zarr(self, case: V3Array) -> None:
        finish_zarr(self.root, case)

    def manual_array(
        self,
        path: str,
        data: np.ndarray,
        *,
        fill: Any,
        present: Callable[[tuple], bool] | None = None,
        tags: set[str] | frozenset = frozenset(),
        **doc,
    ) -> V3Array:
        """zarr.json (``doc``: the keywords of ``helpers.stores.v3.array_doc``) and chunk
        files written here; ``data`` is in the file's dtype and the oracle is ``data`` with
        ``fill`` wherever a chunk is absent."""
        case = self._add(path, "manual", tags)
        if self.dry:
            return case
        case.doc = array_doc(data.shape, **doc)
        expected = write_v3_array(self.root, path, data, case.doc, fill=fill, present=present)
        case.expected = np.ascontiguousarray(expected).tobytes()
        case.dtype, case.shape, case.chunks = data.dtype, data.shape, tuple(doc["chunks"])
        return case

    def under(self, prefix: str, **common) -> Callable[..., V3Array]:
        """``add(name, data, **kw)``: a zarr-python array ``prefix/name``, ``common``
        keywords first."""
        return prefixed(self.zarr_array, prefix, **common)


# --------------------------------------------------------------------------- main hierarchy

CORE_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
CORE_DTYPES += ["float16", "float32", "float64", "complex64", "complex128"]
# v3 core data type name -> NumPy dtype (little endian)
NP_OF = {name: np.dtype(name).newbyteorder("<").str for name in CORE_DTYPES}

# zarr-python's fixed-size extension data types
EXT_DTYPES = {
    "datetime64_ms": np.dtype("<M8[ms]"),
    "datetime64_D": np.dtype("<M8[D]"),
    "timedelta64_s": np.dtype("<m8[s]"),
    "timedelta64_ns": np.dtype("<m8[ns]"),
    "utf32_U1": np.dtype("<U1"),
    "utf32_U5": np.dtype("<U5"),
    "bytes_S1": np.dtype("|S1"),
    "bytes_S6": np.dtype("|S6"),
    "raw_V1": np.dtype("|V1"),
    "raw_V7": np.dtype("|V7"),
    "struct": np.dtype(
        [("a", "<i4"), ("b", "<f8"), ("c", "|S3"), ("d", "|b1"), ("e", "<U2"), ("f", "<c8")]
    ),
}
STRUCT_AB = np.dtype([("a", "<i4"), ("b", "<f8")])

UUID_A = "f010a634-3525-416e-9320-8f44b5bc352c"
UUID_B = "0396f4cd-47fa-4b09-8c79-9072d90ceed3"
UUID_C = "5a1c0d2e-7b7f-4c1e-9d6a-2f6e3b1f0c11"

# Fill values: name -> (v3 core data type name or NumPy dtype, fill JSON to store).
# zarr-python writes the array, the JSON form is then written into its zarr.json by hand;
# zarr-python reading the patched store is the oracle (see ZARR_LOSES_FILL_BITS).
FILLS: dict[str, tuple[str, Any]] = {
    "int8_min": ("int8", -128),
    "int16_neg": ("int16", -1),
    "int32_42": ("int32", 42),
    "int64_min": ("int64", -(2**63)),
    "int64_max": ("int64", 2**63 - 1),
    "uint8_max": ("uint8", 255),
    "uint16_zero": ("uint16", 0),
    "uint32_max": ("uint32", 2**32 - 1),
    "uint64_max": ("uint64", 2**64 - 1),
    "bool_true": ("bool", True),
    "bool_false": ("bool", False),
    "float32_nan": ("float32", "NaN"),
    "float64_inf": ("float64", "Infinity"),
    "float16_neginf": ("float16", "-Infinity"),
    "float32_hex_nan_payload": ("float32", "0x7fc00001"),
    "float32_hex_neg_nan": ("float32", "0xffc00000"),
    "float64_hex_one": ("float64", "0x3ff0000000000000"),
    "float64_hex_nan_payload": ("float64", "0x7ff8000000000123"),
    "float16_hex_one": ("float16", "0x3c00"),
    "float16_hex_nan": ("float16", "0x7e01"),
    "float32_neg_zero": ("float32", -0.0),
    "float64_int_number": ("float64", 7),
    "float32_rounded": ("float32", 3.14159265358979),
    "float64_big": ("float64", 1e300),
    "complex64_pair": ("complex64", [1.5, -2.0]),
    "complex128_nan_inf": ("complex128", ["NaN", "Infinity"]),
    "complex64_hex_neginf": ("complex64", ["0x7fc00000", "-Infinity"]),
    "complex128_neg_zero_hex": ("complex128", [0, "0x8000000000000000"]),
    "complex64_hex_payloads": ("complex64", ["0x7fc00001", "0xffc00002"]),
    "complex128_hex_payload": ("complex128", ["0x7ff8000000000123", 1]),
    "datetime64_nat": ("<M8[s]", "NaT"),
    "timedelta64_nat": ("<m8[ms]", "NaT"),
    "datetime64_int": ("<M8[D]", 19000),
}
# fill values in big-endian files: the fill's bytes must be swapped too
BIG_ENDIAN_FILLS = {
    "float32_hex_be": ("float32", "0x7fc00001"),
    "uint32_be": ("uint32", 0x01020304),
    "complex128_be": ("complex128", [1.0, "-Infinity"]),
    "float16_be": ("float16", "0x3c01"),
}


# Fill forms zarr-python 3.1 reads wrongly (see the oracle override in the builder).
ZARR_LOSES_FILL_BITS = {"float16_hex_nan"}


def _fill_patch(fill_json):
    def patch(doc):
        doc["fill_value"] = fill_json

    return patch


def _big() -> BytesCodec:
    return BytesCodec(endian="big")


def _v3_dtypes(b: V3Builder, rng: np.random.Generator) -> None:
    """dtypes/: every core data type, default codecs (bytes little + zstd), edge chunks;
    dtypes_be/: big endian through the bytes codec, gzip."""
    b.group("dtypes", {"what": "core data types"})
    for name in CORE_DTYPES:
        b.zarr_array(
            f"dtypes/{name}", make_data(NP_OF[name], (7, 9), rng), chunks=(3, 4), tags={"dtype"}
        )
    gzip1 = {"serializer": _big(), "compressors": [GzipCodec(level=1)]}
    for name in CORE_DTYPES:
        data = make_data(NP_OF[name], (5, 6), rng)
        b.zarr_array(f"dtypes_be/{name}", data, chunks=(2, 4), tags={"dtype", "big"}, **gzip1)


def _v3_ext(b: V3Builder, rng: np.random.Generator) -> None:
    """ext/: zarr-python's fixed-size extension data types, also big endian, and with fill
    values and missing chunks."""
    add = b.under("ext", chunks=(4, 2), tags={"ext"})
    for name, dt in EXT_DTYPES.items():
        add(name, make_data(dt, (6, 5), rng))
    for name, dt in (
        ("datetime64_ns_be", "<M8[ns]"),
        ("timedelta64_ms_be", "<m8[ms]"),
        ("utf32_U3_be", "<U3"),
    ):
        add(name, make_data(dt, (6, 5), rng), serializer=_big(), tags={"ext", "big"})
    for name, dt, fill, region in (
        ("utf32_fill", "<U3", "xé", slice(0, 3)),
        ("bytes_fill", "S4", b"ab", slice(5, 6)),
        ("raw_fill", "V3", np.void(b"\x01\x02\x03"), slice(0, 2)),
        ("struct_fill", STRUCT_AB, np.array((5, 2.5), dtype=STRUCT_AB)[()], slice(4, 5)),
        ("datetime_fill_zero", "<M8[s]", np.datetime64(0, "s"), slice(8, 9)),
    ):
        data = make_data(dt, (9,), rng)
        add(name, data, chunks=(4,), fill_value=fill, region=region, tags={"ext", "fill"})


def _v3_raw(b: V3Builder, rng: np.random.Generator) -> None:
    """raw/: the r* data types (zarr-python 3.1 has none), by hand; fill = list of bytes."""
    gzip1 = {"name": "gzip", "configuration": {"level": 1}}
    big = {"name": "bytes", "configuration": {"endian": "big"}}
    for bits, codecs, fill in (
        (8, [{"name": "bytes"}], [7]),
        (16, [{"name": "bytes"}], [1, 2]),
        (24, [{"name": "bytes"}, gzip1], [255, 0, 9]),
        (64, [big, {"name": "crc32c"}], [1, 2, 3, 4, 5, 6, 7, 8]),
    ):
        n = bits // 8
        dt = np.dtype(f"V{n}")
        data = rng.integers(0, 256, size=(7, 5, n), dtype=np.uint8).view(dt)[..., 0]
        b.manual_array(
            f"raw/r{bits}",
            data,
            chunks=(3, 2),
            data_type=f"r{bits}",
            fill_json=fill,
            fill=np.frombuffer(bytes(fill), dtype=dt)[0],
            codecs=codecs,
            present=lambda idx: (idx[0] + idx[1]) % 3 != 1,
            tags={"raw"},
        )


def _fill_bits_oracle(case: V3Array, fill_json: str, dt: np.dtype) -> None:
    """zarr-python 3.1 reads a float16 NaN fill through float64 and drops the NaN payload
    (0x7e01 reads as 0x7e00). The spec: the hex string IS the bit pattern. Oracle for the
    missing chunks (elements 0-2 and 6-9): NumPy on those bits."""
    values = np.frombuffer(case.expected, dtype=case.dtype).copy()
    bits = np.array(int(fill_json, 16), dtype=f"<u{dt.itemsize}").view(case.dtype)
    values[[0, 1, 2, 6, 7, 8, 9]] = bits
    case.expected = values.tobytes()


def _v3_fills(b: V3Builder, rng: np.random.Generator) -> None:
    """fill/: every fill value form; only element 4 of 10 is written (chunks (3,)):
    chunks 0, 2, 3 are missing and read as the fill value."""
    add = b.under("fill", chunks=(3,), region=slice(4, 5), tags={"fill"})
    for name, (dtype_name, fill_json) in FILLS.items():
        dt = np.dtype(NP_OF.get(dtype_name, dtype_name))
        case = add(name, make_data(dt, (10,), rng), patch=_fill_patch(fill_json))
        if name in ZARR_LOSES_FILL_BITS and not b.dry:
            _fill_bits_oracle(case, fill_json, dt)
    for name, (dtype_name, fill_json) in BIG_ENDIAN_FILLS.items():
        data = make_data(NP_OF[dtype_name], (10,), rng)
        add(name, data, serializer=_big(), patch=_fill_patch(fill_json), tags={"fill", "big"})


def _codec_data() -> dict[str, np.ndarray]:
    """Smooth data, so that compressors compress."""
    i4 = smooth_data(np.dtype("<i4"), (12, 10))
    return {
        "i4": i4,
        "f4": smooth_data(np.dtype("<f4"), (12, 10)),
        "f8": smooth_data(np.dtype("<f8"), (12, 10)),
        "u2": smooth_data(np.dtype("<u2"), (12, 10)),
        "cube": smooth_data(np.dtype("<i2"), (6, 7, 8)),
        "bits": i4 % 3 == 0,
    }


def _v3_codecs(b: V3Builder, rng: np.random.Generator) -> None:
    """codecs/: every core codec and combination."""
    d = _codec_data()
    i4, f4, f8, u2, cube = d["i4"], d["f4"], d["f8"], d["u2"], d["cube"]
    b.group("codecs", {"what": "codecs"})
    add = b.under("codecs", chunks=(5, 4), compressors=None, tags={"codec"})
    add("bytes_little", i4, serializer=BytesCodec(endian="little"))
    add("bytes_big_u2", u2, serializer=_big())
    add("bytes_big_f8", f8, serializer=_big())
    add("transpose_2d", i4, filters=[Transpose(order=(1, 0))])
    add("transpose_2d_identity", i4, filters=[Transpose(order=(0, 1))])
    for order in ((2, 0, 1), (1, 2, 0), (0, 2, 1), (2, 1, 0), (1, 0, 2)):
        name = "transpose_3d_" + "".join(map(str, order))
        gzip1 = [GzipCodec(level=1)]
        add(name, cube, chunks=(4, 3, 5), filters=[Transpose(order=order)], compressors=gzip1)
    t201 = [Transpose(order=(2, 0, 1))]
    add("transpose_3d_201_big", cube, chunks=(4, 3, 5), filters=t201, serializer=_big())
    twice = [Transpose(order=(2, 0, 1)), Transpose(order=(1, 2, 0))]
    add("transpose_twice", cube, chunks=(4, 3, 5), filters=twice)
    add("gzip_1", i4, compressors=[GzipCodec(level=1)])
    add("gzip_9", f8, compressors=[GzipCodec(level=9)])
    add("zstd_checksum", f4, compressors=[ZstdCodec(level=3, checksum=True)])
    add("zstd_no_checksum", i4, compressors=[ZstdCodec(level=-1, checksum=False)])
    for name, data, blosc in (
        ("blosc_lz4_noshuffle", i4, dict(cname="lz4", shuffle="noshuffle", typesize=4)),
        ("blosc_lz4_shuffle", f4, dict(cname="lz4", shuffle="shuffle", typesize=4)),
        (
            "blosc_zstd_bitshuffle",
            f8,
            dict(cname="zstd", clevel=3, shuffle="bitshuffle", typesize=8),
        ),
        ("blosc_zlib_shuffle_typesize1", u2, dict(cname="zlib", shuffle="shuffle", typesize=1)),
        (
            "blosc_blosclz_bitshuffle",
            u2,
            dict(cname="blosclz", clevel=9, shuffle="bitshuffle", typesize=2),
        ),
    ):
        add(name, data, compressors=[BloscCodec(**blosc)])
    lz4hc = [BloscCodec(cname="lz4hc", shuffle="shuffle", typesize=4)]
    add("blosc_lz4hc_big", f4, serializer=_big(), compressors=lz4hc)
    add("crc32c", i4, compressors=[Crc32cCodec()])
    add("gzip_crc32c", f4, compressors=[GzipCodec(level=2), Crc32cCodec()])
    add("zstd_then_gzip", i4, compressors=[ZstdCodec(level=1), GzipCodec(level=1)])
    add(
        "chain_transpose_big_blosc_crc32c",
        u2,
        filters=[Transpose(order=(1, 0))],
        serializer=_big(),
        compressors=[BloscCodec(cname="lz4", shuffle="bitshuffle", typesize=2), Crc32cCodec()],
    )


def _v3_numcodecs(b: V3Builder, rng: np.random.Generator) -> None:
    """codecs/numcodecs_*: numcodecs.* codecs as zarr-python writes them."""
    d = _codec_data()
    i4, f4, f8 = d["i4"], d["f4"], d["f8"]
    add = b.under("codecs", chunks=(5, 4), compressors=None, tags={"codec"})
    for name, data, codec in (
        ("zlib", i4, znc.Zlib(level=3)),
        ("gzip", i4, znc.GZip(level=1)),
        ("lz4", f4, znc.LZ4(acceleration=1)),
        ("bz2", i4, znc.BZ2(level=1)),
        ("lzma", i4, znc.LZMA()),
        ("zstd", f8, znc.Zstd(level=1)),
        ("blosc", f8, znc.Blosc(cname="lz4", shuffle=2)),
        ("shuffle", i4, znc.Shuffle(elementsize=4)),
        ("crc32", i4, znc.CRC32()),
        ("adler32", i4, znc.Adler32()),
        ("fletcher32", i4, znc.Fletcher32()),
        ("jenkins_lookup3", i4, znc.JenkinsLookup3()),
        ("crc32c", i4, znc.CRC32C()),
    ):
        add(f"numcodecs_{name}", data, compressors=[codec])
    add("numcodecs_delta", i4, filters=[znc.Delta(dtype="<i4")], compressors=[znc.Zlib(level=1)])
    for name, data, codec in (
        (
            "fixedscaleoffset",
            f8,
            znc.FixedScaleOffset(offset=100, scale=10, dtype="<f8", astype="<i4"),
        ),
        ("quantize", f8, znc.Quantize(digits=2, dtype="<f8")),
        ("bitround", f4, znc.BitRound(keepbits=6)),
        ("astype", f8, znc.AsType(encode_dtype="<f4", decode_dtype="<f8")),
    ):
        add(f"numcodecs_{name}", data, filters=[codec])
    packbits = [znc.PackBits()]
    add("numcodecs_packbits", d["bits"], filters=packbits, compressors=[GzipCodec(level=1)])
    add(
        "numcodecs_delta_big",
        i4,
        filters=[znc.Delta(dtype="<i4")],
        serializer=_big(),
        compressors=[znc.Zlib(level=1)],
        oracle_is_data=True,  # zarr-python 3.1 reads a filter before big-endian bytes wrong
    )


def _v3_shards(b: V3Builder, rng: np.random.Generator) -> None:
    """shard/: sharding_indexed."""
    b.group("shard", {"what": "sharding"})
    s2 = make_data("<f4", (20, 30), rng)
    add = b.under("shard", tags={"shard"})
    plain = b.under("shard", chunks=(10, 15), compressors=None, tags={"shard"})
    add("index_end", s2, chunks=(5, 5), shards=(10, 15))
    start_zstd = Shard(
        chunk_shape=(5, 5), index_location="start", codecs=[BytesCodec(), ZstdCodec(level=1)]
    )
    plain("index_start", s2, serializer=start_zstd)
    add("edge", make_data("<i8", (23, 31), rng), chunks=(5, 5), shards=(10, 15))
    edge_start = make_data("<u2", (23, 31), rng)
    plain("edge_start", edge_start, serializer=Shard(chunk_shape=(5, 3), index_location="start"))
    _shard_partial(b, rng)
    _shard_inner_codecs(b, s2)
    add("one_d", make_data("<f8", (100,), rng), chunks=(8,), shards=(32,))
    add("whole_shard_one_chunk", s2, chunks=(10, 15), shards=(10, 15))
    _shard_nested(b, rng)
    _shard_layouts(b, rng)


def _shard_partial(b: V3Builder, rng: np.random.Generator) -> None:
    """shards (20, 15), inner (5, 5); only parts written: shard (1, 1) is missing, shard
    (0, 0) has only some inner chunks, shard (1, 0) has one partly written chunk."""
    missing = b.under("shard", region=None, tags={"shard", "missing"})
    part = make_data("<i2", (40, 30), rng)
    missing("partial", part, chunks=(5, 5), shards=(20, 15), fill_value=-7)
    if not b.dry:
        with quiet():
            za = zarr.open_array(str(b.root), path="shard/partial", mode="r+")
            for region in (
                np.s_[0:5, 0:10],
                np.s_[12:13, 3:4],
                np.s_[10:15, 5:15],
                np.s_[27:29, 2:9],
                np.s_[0:20, 15:30],
            ):
                za[region] = part[region]
        b.finish_zarr(b.h.arrays["shard/partial"])
    empty = dict(shape=(20, 20), dtype="<f8", chunks=(5, 5), shards=(10, 10), fill_value=2.5)
    missing("empty", None, **empty)


def _shard_inner_codecs(b: V3Builder, s2: np.ndarray) -> None:
    """Codecs inside the shards, and index codecs."""
    plain = b.under("shard", chunks=(10, 15), compressors=None, tags={"shard"})
    lz4_bits = BloscCodec(cname="lz4", shuffle="bitshuffle", typesize=2)
    inner = [Transpose(order=(1, 0)), _big(), lz4_bits]
    u2 = smooth_data(np.dtype("<u2"), (20, 30))
    plain("inner_transpose_big_blosc", u2, serializer=Shard(chunk_shape=(5, 5), codecs=inner))
    zstd_shuffle = BloscCodec(cname="zstd", shuffle="shuffle", typesize=4)
    inner = [Transpose(order=(2, 0, 1)), BytesCodec(), zstd_shuffle]
    f4 = smooth_data(np.dtype("<f4"), (9, 10, 11))
    sharding = Shard(chunk_shape=(2, 5, 3), codecs=inner)
    plain("inner_3d_transpose", f4, chunks=(4, 10, 6), serializer=sharding)
    inner = [BytesCodec(), ZstdCodec(level=1, checksum=True), Crc32cCodec()]
    plain("inner_crc32c", s2, serializer=Shard(chunk_shape=(5, 5), codecs=inner))
    no_crc = Shard(chunk_shape=(5, 5), index_codecs=[BytesCodec()])
    plain("index_no_crc", s2, serializer=no_crc)
    big = Shard(chunk_shape=(5, 5), index_codecs=[_big(), Crc32cCodec()])
    plain("index_big", s2, serializer=big)


def _shard_nested(b: V3Builder, rng: np.random.Generator) -> None:
    """Shards inside shards."""
    nested = make_data("<i4", (40, 37), rng)
    add = b.under("shard", chunks=(16, 16), compressors=None, tags={"shard", "nested"})
    inner = Shard(chunk_shape=(4, 4), codecs=[BytesCodec(), GzipCodec()])
    add("nested", nested, serializer=Shard(chunk_shape=(8, 8), codecs=[inner]))
    codecs = [Transpose(order=(1, 0)), _big(), ZstdCodec(level=1)]
    inner = Shard(chunk_shape=(4, 2), index_location="start", codecs=codecs)
    add(
        "nested_start_partial",
        nested,
        tags={"shard", "nested", "missing"},
        fill_value=99,
        region=np.s_[3:17, 0:9],
        serializer=Shard(chunk_shape=(8, 8), index_location="start", codecs=[inner]),
    )


def _shard_layouts(b: V3Builder, rng: np.random.Generator) -> None:
    """A filter before sharding; shards whose inner chunks are stored in another order,
    with unused bytes between them (any write order is valid; the index is rewritten to
    match); sharding followed by bytes-to-bytes codecs on the whole shard."""
    add = b.under("shard", compressors=None, tags={"shard"})
    transposed = make_data("<i4", (12, 10), rng)
    t10 = [Transpose(order=(1, 0))]
    add(
        "transpose_then_shard",
        transposed,
        chunks=(8, 8),
        filters=t10,
        serializer=Shard(chunk_shape=(4, 2)),
    )
    bools = make_data("|b1", (20, 30), rng)
    b.zarr_array("shard/bool", bools, chunks=(5, 5), shards=(10, 15), tags={"shard"})
    for loc in ("end", "start"):
        name = f"reordered_with_gaps_{loc}"
        codecs = [BytesCodec(), GzipCodec(level=1)]
        sharding = Shard(chunk_shape=(5, 5), index_location=loc, codecs=codecs)
        case = add(name, make_data("<u4", (20, 30), rng), chunks=(10, 15), serializer=sharding)
        if not b.dry:
            for f in sorted((b.root / "shard" / name / "c").rglob("*")):
                if f.is_file():
                    f.write_bytes(relayout_shard(f.read_bytes(), 6, loc))
            b.finish_zarr(case)
    whole = [GzipCodec(level=1), Crc32cCodec()]
    data = make_data("<i4", (12, 10), rng)
    sharding = Shard(chunk_shape=(3, 5))
    add("shard_then_gzip_crc32c", data, chunks=(6, 10), serializer=sharding, compressors=whole)


def _v3_names_edges(b: V3Builder, rng: np.random.Generator) -> None:
    """names/: safe path components but unusual; edge/: chunks / shards larger than the
    whole array, one-element chunks."""
    for name in ("with space", "ünïcödé 漢字", "dots.in.name", "c"):
        data = make_data("<u2", (3, 4), rng)
        b.zarr_array(f"names/{name}", data, chunks=(2, 2), tags={"names"})
    add = b.under("edge", tags={"edge"})
    add("chunk_bigger_than_array", make_data("<f8", (3, 5), rng), chunks=(8, 8))
    shard = dict(chunks=(8, 4), shards=(16, 16), tags={"edge", "shard"})
    add("shard_bigger_than_array", make_data("<i2", (5, 7), rng), **shard)
    add("one_element_chunks", make_data("<u4", (3, 4), rng), chunks=(1, 1))


def _v3_by_hand(b: V3Builder, rng: np.random.Generator) -> None:
    """The smallest documents the spec allows (no attributes, no dimension_names, no
    storage_transformers; a group document with only zarr_format and node_type), short-hand
    extension names (v3.1: a bare string is an object with only "name"), and chunk key
    encodings written by hand (the plain ``bytes`` codec, so that only the key encoding
    is under test)."""
    b.manual_array(
        "minimal/array",
        make_data("<i2", (5, 3), rng),
        chunks=(2, 2),
        data_type="int16",
        fill_json=-3,
        fill=np.int16(-3),
        codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
        present=lambda idx: idx != (2, 0),
        omit=("attributes",),
        tags={"manual"},
    )
    b.h.groups["minimal/bare_group"] = {}
    if not b.dry:
        write_doc(b.root, "minimal/bare_group", {"zarr_format": 3, "node_type": "group"})
    sh = make_data("|u1", (7, 5), rng)
    u8 = dict(data_type="uint8", fill=np.uint8(3), fill_json=3)
    b.manual_array(
        "codecs/shorthand_names",
        sh,
        chunks=(3, 2),
        codecs=["bytes", "crc32c"],
        present=lambda idx: idx != (1, 1),
        tags={"codec", "manual"},
        **u8,
    )
    for name, chunks, fill, key_encoding, present in (
        ("shorthand_v2", (3, 2), 0, {"name": "v2"}, None),
        ("default_no_configuration", (2, 3), 9, {"name": "default"}, lambda i: i != (0, 1)),
    ):
        b.manual_array(
            f"keys/{name}",
            sh,
            chunks=chunks,
            data_type="uint8",
            fill_json=fill,
            fill=np.uint8(fill),
            codecs=[{"name": "bytes"}],
            key_encoding=key_encoding,
            present=present,
            tags={"keys", "manual"},
        )
    if not b.dry:
        patch_doc(b.root, "keys/shorthand_v2", lambda d: d.update({"chunk_key_encoding": "v2"}))
        b.h.arrays["keys/shorthand_v2"].doc["chunk_key_encoding"] = "v2"


def _v3_keys(b: V3Builder, rng: np.random.Generator) -> None:
    """keys/: chunk key encodings, written by zarr-python."""
    k2 = make_data("<i4", (7, 9), rng)
    k3 = make_data("<u1", (5, 6, 7), rng)
    for name, enc in (
        ("default_slash", {"name": "default", "separator": "/"}),
        ("default_dot", {"name": "default", "separator": "."}),
        ("v2_dot", {"name": "v2", "separator": "."}),
        ("v2_slash", {"name": "v2", "separator": "/"}),
    ):
        add = b.under("keys", chunk_key_encoding=enc, tags={"keys"})
        add(name, k2, chunks=(3, 4))
        add(f"{name}_3d", k3, chunks=(2, 4, 3))
        add(f"{name}_0d", np.array(-123456, dtype="<i8"), tags={"keys", "zerod"})
        add(f"{name}_sharded", k2, chunks=(1, 2), shards=(3, 4), tags={"keys", "shard"})


def _v3_missing_zerod(b: V3Builder, rng: np.random.Generator) -> None:
    """missing/: missing chunks; zerod/: 0-d arrays; zerolen/: zero-length arrays."""
    add = b.under("missing", chunks=(4, 4), tags={"missing"})
    add("none_written", make_data("<i2", (9, 11), rng), fill_value=5, region=None)
    add("some", make_data("<f8", (9, 11), rng), fill_value=-1.25, region=np.s_[0:4, 4:11])
    add("edge_only", make_data("<u4", (9, 11), rng), fill_value=3, region=np.s_[8:9, 8:11])
    add = b.under("zerod", tags={"zerod"})
    add("value", np.array(2.75, dtype="<f8"))
    add("missing", np.array(0, dtype="<i4"), fill_value=-9, region=None, tags={"zerod", "missing"})
    add("big", np.array(-1.5, dtype="<f8"), serializer=_big(), tags={"zerod", "big"})
    add("complex_gzip", np.array(1 - 2j, dtype="<c16"), compressors=[GzipCodec()])
    add("struct", np.array((1, 2.0), dtype=STRUCT_AB))
    add = b.under("zerolen", region=None, tags={"zerolen"})
    add("rows", None, shape=(0, 5), dtype="<f4", chunks=(2, 2))
    add("middle", None, shape=(3, 0, 2), dtype="<i8", chunks=(2, 2, 2))


def _v3_groups(b: V3Builder, rng: np.random.Generator) -> None:
    """Groups with attributes, dimension names."""
    b.group("g1", {"level": 1, "list": [1, "two", None], "float": 0.5})
    b.group("g1/g2", {"level": 2, "uni": "漢字 ß é", "empty": {}})
    b.group("g1/g2/g3", {"level": 3, "nested": {"deep": {"deeper": [True, False]}}})
    b.group("g1/empty_group", {})
    b.zarr_array(
        "g1/g2/g3/leaf",
        make_data("<u2", (4, 5, 6), rng),
        chunks=(2, 5, 4),
        dimension_names=["t", "y", "x"],
        attributes={"units": "K", "scale": [1.0, 0.5]},
        tags={"dims"},
    )
    dims = [None, "x"]
    add = b.under("g1")
    add(
        "partial_dims",
        make_data("<f4", (3, 4), rng),
        chunks=(2, 2),
        dimension_names=dims,
        tags={"dims"},
    )
    attrs = {"a": 1, "b": {"c": "d"}}
    add("attrs_only", make_data("<i1", (5,), rng), chunks=(5,), attributes=attrs, tags={"attrs"})


# zarr conventions 0.1.0
VALID_CONVENTIONS_GROUP = {
    "zarr_conventions_version": "0.1.0",
    "zarr_conventions_metadata": {
        UUID_A: {
            "version": "0.1.0",
            "name": "geo:proj",
            "schema": "https://example.org/s",
            "spec": "https://example.org/spec",
            "description": "projection",
            "configuration": {"code": "epsg:4326", "transform": [0, 0, 1, 1, 1, 1]},
        },
        UUID_B: {"version": "1.2.3", "name": "minimal", "configuration": {}},
    },
    "other": "attribute",
}
MALFORMED_CONVENTIONS_GROUP = {
    "zarr_conventions_version": "0.1.0",
    "zarr_conventions_metadata": {
        "not-a-uuid": {"version": "0.1.0", "configuration": {}},
        UUID_A: {"name": "no version", "configuration": {}, "bogus": 1},
    },
}


def _v3_conventions(b: V3Builder, rng: np.random.Generator) -> None:
    """conv/: groups and arrays that declare conventions, validly or not."""
    b.group("conv", {})
    b.group("conv/valid_group", copy.deepcopy(VALID_CONVENTIONS_GROUP))
    b.h.group_conventions["conv/valid_group"] = [
        {"uuid": UUID_A, "name": "geo:proj", "version": "0.1.0"},
        {"uuid": UUID_B, "name": "minimal", "version": "1.2.3"},
    ]
    multiscales = {"version": "0.2.0", "name": "multiscales", "configuration": {"levels": [0, 1]}}
    attrs = {
        "zarr_conventions_version": "0.1.0",
        "zarr_conventions_metadata": {UUID_C: multiscales},
    }
    add = b.under("conv", chunks=(2, 2), tags={"conventions"})
    c = add("valid_group/valid_array", make_data("<f4", (4, 4), rng), attributes=attrs)
    c.conventions = [{"uuid": UUID_C, "name": "multiscales", "version": "0.2.0"}]
    b.group("conv/malformed_group", copy.deepcopy(MALFORMED_CONVENTIONS_GROUP))
    b.h.malformed_conventions.append("conv/malformed_group")
    add = b.under("conv", chunks=(4,), tags={"conventions_malformed"})
    not_object = {"zarr_conventions_metadata": "not an object"}
    add("malformed_array", make_data("<i2", (6,), rng), attributes=not_object)
    b.h.malformed_conventions.append("conv/malformed_array")
    entry = {
        "zarr_conventions_version": 1,
        "zarr_conventions_metadata": {UUID_B: ["not", "an", "object"]},
    }
    add("malformed_entry_array", make_data("<u1", (6,), rng), attributes=entry)
    b.h.malformed_conventions.append("conv/malformed_entry_array")
    plain = {"zarr": "no conventions"}
    add("plain", make_data("<u1", (6,), rng), attributes=plain, tags={"conventions_none"})


def _v3_strays(b: V3Builder, rng: np.random.Generator) -> None:
    """Things in the store that are not nodes: a directory without zarr.json (final v3 has
    no implicit groups) holding a valid array, a stray file, a stray empty directory."""
    if b.dry:
        return
    zarr_v3_array(b.root / "orphan_dir" / "deep", "arr", np.array([1, 2], dtype="<u1"))
    assert not (b.root / "orphan_dir" / "zarr.json").exists()
    (b.root / "stray_file.txt").write_text("not zarr")
    (b.root / "stray_empty_dir").mkdir()
    (b.root / "g1" / "notes.json").write_text("{}")


V3_MAIN_SECTIONS = (
    _v3_dtypes,
    _v3_ext,
    _v3_raw,
    _v3_fills,
    _v3_codecs,
    _v3_numcodecs,
    _v3_shards,
    _v3_names_edges,
    _v3_by_hand,
    _v3_keys,
    _v3_missing_zerod,
    _v3_groups,
    _v3_conventions,
    _v3_strays,
)


def build_v3_main(root: str | os.PathLike | None) -> V3Hierarchy:
    with quiet():
        b = V3Builder(root, {"title": "zarrmount v3 hierarchy", "n": 3, "nested": {"k": [1, 2]}})
        for section in V3_MAIN_SECTIONS:
            section(b, b.rng)
        return b.h


# --------------------------------------------------------------------------- small stores


def build_root_array(root: str | os.PathLike) -> V3Array:
    """A v3 store whose root node is an array (sharded, big endian inner chunks)."""
    data = make_data(np.dtype("<i4"), (9, 10), np.random.default_rng(5))
    sharding = Shard(chunk_shape=(3, 5), codecs=[_big(), GzipCodec(level=1)])
    kw = dict(chunks=(6, 10), fill_value=-1, attributes={"root": True}, compressors=None)
    zarr_write(root, data, np.s_[:5], zarr_format=3, serializer=sharding, **kw)
    case = V3Array("", "zarr")
    finish_zarr(Path(root), case)
    return case


def build_consolidated(root: str | os.PathLike) -> dict:
    """A consolidated v3 hierarchy; after consolidation one more array is added on disk
    only. zarr-python (which lists from the consolidated metadata) is the oracle of what is
    listed and of the bytes: ``{path: ("array", bytes) | ("group", attributes)}``."""
    root = Path(root)
    rng = np.random.default_rng(11)
    with quiet():
        g = zarr.open_group(str(root), mode="w", zarr_format=3, attributes={"c": 1})
        g.create_group("sub", attributes={"s": 2})
        a = g.create_array("sub/a", shape=(6, 7), chunks=(4, 4), dtype="<f4")
        a[:] = make_data(np.dtype("<f4"), (6, 7), rng)
        b = g.create_array("b", shape=(5,), chunks=(2,), dtype="<i2", serializer=_big())
        b[:] = np.arange(5, dtype="<i2")
        c = g.create_array("sub/deep/c", shape=(3,), chunks=(3,), dtype="<u1")
        c[:] = [1, 2, 3]
        zarr.consolidate_metadata(str(root))
        # after consolidation: an array that only exists on disk
        zarr_v3_array(root, "late", np.array([9, 9], dtype="<u1"))
        members = {}
        for path, node in zarr.open_group(str(root), mode="r", zarr_format=3).members(
            max_depth=None
        ):
            if isinstance(node, zarr.Array):
                dt = file_dtype(node.dtype, [c.to_dict() for c in node.metadata.codecs])
                members[path] = ("array", file_bytes(node[...], dt))
            else:
                members[path] = ("group", dict(node.attrs))
    return members


def build_big_shard(root: str | os.PathLike) -> dict:
    """float32 (64, 512, 512) in one 64 MiB shard, inner chunks (1, 512, 512) = 1 MiB,
    blosc-lz4; random data so each inner chunk stays about 1 MiB compressed."""
    shape = (64, 512, 512)
    data = np.random.default_rng(64).standard_normal(shape, dtype=np.float32)
    lz4 = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)
    zarr_v3_array(root, "big", data, chunks=(1, 512, 512), shards=shape, compressors=[lz4])
    raw = (Path(root) / "big" / "c" / "0" / "0" / "0").read_bytes()
    index = shard_index(raw, 64)
    return {
        "path": "big",
        "shard_key": "big/c/0/0/0",
        "shard_size": len(raw),
        "index_nbytes": 16 * 64 + 4,
        "inner_nbytes": [int(x) for x in index[:, 1]],
        "inner_offsets": [int(x) for x in index[:, 0]],
        "data": data,
        "inner_chunk_bytes": 512 * 512 * 4,
    }


# --------------------------------------------------------------------------- bad v3 input


def _bad_shown(b: V3Builder, rng: np.random.Generator) -> None:
    """Good siblings; unknown fields that say must_understand false, empty
    storage_transformers: shown."""
    b.zarr_array("good/a", make_data("<i4", (10, 3), rng), chunks=(3, 3))
    b.zarr_array("bad/good_sibling", make_data("<u2", (9,), rng), chunks=(4,))
    future = {"future_thing": {"must_understand": False, "value": 1}}
    add = b.under("bad", chunks=(2,))
    add("must_understand_false", make_data("<f4", (5,), rng), patch=lambda d: d.update(future))
    transformers = {"storage_transformers": []}
    add(
        "storage_transformers_empty",
        make_data("<u1", (5,), rng),
        patch=lambda d: d.update(transformers),
    )


def _hidden_array_writers(root: Path, small: np.ndarray) -> dict[str, Callable[[str], None]]:
    """bad/<name> -> ``write(path)`` of the arrays that must be hidden: zarr-python's
    documents patched with what zarrmount must not accept, and variable-length data."""

    def patched(patch: Callable[[dict], None]) -> Callable[[str], None]:
        def write(path: str) -> None:
            zarr_v3_array(root, path, small, chunks=(3,))
            patch_doc(root, path, patch)

        return write

    def update(**fields) -> Callable[[str], None]:
        return patched(lambda doc: doc.update(fields))

    frobnicate = {"name": "frobnicate", "configuration": {"level": 3}}
    a_filter = {"name": "frobnicate_filter"}
    manifest = {"name": "chunk-manifest-json", "configuration": {"manifest": "m.json"}}
    grid = {"name": "rectilinear", "configuration": {"chunk_shapes": [[2, 4]]}}
    return {
        "unknown_codec": patched(lambda doc: doc["codecs"].append(frobnicate)),
        "unknown_serializer": update(codecs=[{"name": "frobnicate_serializer"}]),
        "unknown_array_to_array": patched(lambda doc: doc["codecs"].insert(0, a_filter)),
        "must_understand": update(future_thing={"name": "x", "configuration": {}}),
        "must_understand_true": update(future_thing={"must_understand": True}),
        "must_understand_plain_value": update(future_number=3),
        "storage_transformers": update(storage_transformers=[manifest]),
        "unknown_data_type": update(data_type="float8_e4m3fn"),
        "unknown_chunk_grid": update(chunk_grid=grid),
        "unknown_chunk_key_encoding": update(chunk_key_encoding={"name": "morton"}),
    }


def _hidden_documents(root: Path) -> list[tuple[str, str, Callable[[str], None]]]:
    """(path, kind, write(path)) of the documents that are no node at all, and of a group
    with an unknown must-understand field (hidden with everything below it)."""

    def text(content: str) -> Callable[[str], None]:
        return lambda path: write_file(root / path / "zarr.json", content)

    return [
        (
            "bad/malformed_json",
            "unknown",
            text('{"zarr_format": 3, "node_type": "array", "shape": ['),
        ),
        ("bad/not_an_object", "unknown", text("[3, 4]")),
        ("bad/must_understand_group", "group", lambda p: _must_understand_group(root, p)),
    ]


def _must_understand_group(root: Path, path: str) -> None:
    """A group with an unknown must-understand field: hidden with everything below it."""
    open_v3_group(root, path)
    zarr_v3_array(root, f"{path}/child", np.array([1, 2], dtype="<u1"))
    patch_doc(root, path, lambda doc: doc.update({"future_group_thing": {"x": 1}}))


# Fault arrays: 1-D <f8, shards of 32768 elements (256 KiB) with inner chunks of 4096
# (32 KiB); 8 inner chunks a shard.
N_SHARD, N_INNER = 32768, 4096
SB, IB = N_SHARD * 8, N_INNER * 8  # bytes of the file per shard, per inner chunk


def _flip_index_crc(raw: bytes) -> bytes:  # index at the end: break its checksum
    return raw[:-4] + bytes(x ^ 0xFF for x in raw[-4:])


def _corrupt_inner(raw: bytes) -> bytes:  # inner chunk 2 replaced by junk
    off, ln = (int(v) for v in shard_index(raw, N_SHARD // N_INNER)[2])
    junk = bytes(np.random.default_rng(1).integers(0, 256, ln, dtype=np.uint8))
    return raw[:off] + junk + raw[off + ln :]


def _inner_out_of_range(raw: bytes) -> bytes:  # inner chunk 5 points past the shard's end
    n = N_SHARD // N_INNER
    index = shard_index(raw, n).copy()
    index[5, 0] = len(raw) + 1000
    return raw[: -(16 * n + 4)] + encode_shard_index(index)


def _flip_byte(raw: bytes) -> bytes:
    i = len(raw) // 2
    return raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1 :]


def _fault_rows() -> list[tuple]:
    """(name, breaker, broken key, good ranges, bad ranges, create keywords)."""
    sharded = dict(chunks=(N_INNER,), shards=(N_SHARD,), compressors=[ZstdCodec(level=1)])
    outer = [(0, SB), (2 * SB, 3 * SB)]
    return [
        (
            "corrupt_shard_index",
            _flip_index_crc,
            "c/1",
            outer,
            [(SB, SB + 8), (2 * SB - 16, 2 * SB)],
            sharded,
        ),
        (
            "corrupt_inner_chunk",
            _corrupt_inner,
            "c/0",
            [(0, 2 * IB), (3 * IB, SB), (SB, 3 * SB)],
            [(2 * IB, 2 * IB + 8), (3 * IB - 8, 3 * IB)],
            sharded,
        ),
        (
            "inner_out_of_range",
            _inner_out_of_range,
            "c/2",
            [(0, 2 * SB), (2 * SB, 2 * SB + 5 * IB), (2 * SB + 6 * IB, 3 * SB)],
            [(2 * SB + 5 * IB, 2 * SB + 5 * IB + 8)],
            sharded,
        ),
        (
            "truncated_shard",
            lambda raw: raw[:100],
            "c/1",
            outer,
            [(SB + 3 * IB, SB + 3 * IB + 8)],
            sharded,
        ),
        (
            "corrupt_crc32c_chunk",
            _flip_byte,
            "c/1",
            outer,
            [(SB + 100, SB + 108)],
            dict(chunks=(N_SHARD,), compressors=[Crc32cCodec()]),
        ),
        (
            "corrupt_gzip_chunk",
            lambda raw: raw[:10] + bytes(len(raw) - 10),
            "c/1",
            outer,
            [(SB, SB + 8)],
            dict(chunks=(N_SHARD,), compressors=[GzipCodec(level=1)]),
        ),
    ]


def _bad_faults(b: V3Builder) -> None:
    """faults/: shown, one shard / inner chunk / chunk broken."""
    data = smooth_data(np.dtype("<f8"), (3 * N_SHARD,))
    for name, breaker, key, good, bad, create in _fault_rows():
        path = f"faults/{name}"
        if b.dry:
            b.h.faults[path] = Fault(path, "", b"", [], [])
            continue
        zarr_v3_array(b.root, path, data, **create)
        expected, *_ = zarr_oracle(b.root, path)
        key_file = b.root / path / key
        key_file.write_bytes(breaker(key_file.read_bytes()))
        b.h.faults[path] = Fault(path, f"{path}/{key}", expected, good, bad)


def build_v3_bad(root: str | os.PathLike | None) -> V3Hierarchy:
    b = V3Builder(root, {"what": "bad v3 input"})
    _bad_shown(b, b.rng)
    small = make_data(np.dtype("<i4"), (6,), b.rng)
    arrays = _hidden_array_writers(b.root, small)
    hidden = [(f"bad/{name}", "array", write) for name, write in arrays.items()]
    for path, kind, write in hidden + _hidden_documents(b.root):
        b.h.hidden[path] = kind
        if not b.dry:
            write(path)
    _bad_faults(b)
    return b.h


# --------------------------------------------------------------------------- the May 2022 draft


def _never(idx: tuple) -> bool:
    return False


def _draft_specs(rng) -> list[DraftArraySpec]:
    """The draft arrays: (path, data, chunks, data_type, fill JSON, the value a missing chunk
    reads as, options). Data is drawn from ``rng`` in the order of the rows."""
    i2 = make_data("<i2", (10, 7), rng)
    f4 = make_data("<f4", (9, 11), rng)
    f4b = make_data("<f4", (5, 6, 7), rng)
    u4 = make_data("<u4", (13, 5), rng)
    f8 = make_data("<f8", (9, 8), rng)
    nan_payload = np.frombuffer(bytes.fromhex("7fc00001")[::-1], "<f4")[0]
    D = DraftArraySpec
    gz, bl = "gzip", "blosc"
    # fmt: off
    return [
        D("a_gzip", i2, (4, 3), "int16", -1, np.int16(-1), compressor=gz, attrs={"k": "v"}),
        D("b_blosc_F", f4, (4, 5), "float32", "NaN", np.float32("nan"), layout="F", compressor=bl),
        D("c_big_gzip", u4, (5, 2), "uint32", 7, np.uint32(7), big=True, compressor=gz),
        D("d_big_F_3d", f4b, (2, 4, 3), "float32", "0x7fc00001", nan_payload,
          layout="F", big=True, compressor=bl, present=lambda idx: sum(idx) % 4 != 1),
        D("e_missing_hex_fill", f4, (4, 4), "float32", "0x3fc00000", np.float32(1.5),
          present=lambda idx: (idx[0] * 3 + idx[1]) % 2 == 0),
        D("f_null_fill", i2, (3, 3), "int16", None, np.int16(0),
          compressor=gz, present=lambda idx: idx[0] != 1),
        D("g_dot_separator", u4, (4, 2), "uint32", 0, np.uint32(0), separator=".", compressor=bl),
        D("h_uint16_hex", make_data("<u2", (11,), rng), (4,), "uint16", "0xfffe", np.uint16(0xFFFE),
          present=lambda idx: idx[0] != 1),
        D("i_int8_binary", make_data("|i1", (3, 5), rng), (2, 2), "int8", "0b11111110", np.int8(-2),
          present=lambda idx: idx != (1, 1)),
        D("j_bool", make_data("|b1", (6, 6), rng), (4, 4), "bool", False, np.False_,
          layout="F", compressor=gz),
        D("k_float64_neg_inf", f8, (4, 3), "float64", "-Infinity", np.float64("-inf"),
          big=True, present=lambda idx: idx[1] != 1, layout="F"),
        D("l_float64_plus_inf", f8, (5, 5), "float64", "+Infinity", np.float64("inf"),
          present=_never),
        D("m_complex64", make_data("<c8", (4, 5), rng), (3, 3), "complex64", None, np.complex64(0),
          compressor=gz),
        D("implicit/deeper/arr", make_data("<i8", (5, 4), rng), (2, 3), "int64", 3, np.int64(3),
          compressor=gz, present=lambda idx: idx != (0, 1)),
        D("explicit/child", make_data("<u1", (7,), rng), (3,), "uint8", 255, np.uint8(255),
          compressor=bl),
        D("zerod", np.array(-4.25, dtype="<f8"), (), "float64", 0, np.float64(0), big=True),
        D("zerod_missing", np.array(0, dtype="<i4"), (), "int32", 77, np.int32(77), present=_never),
        D("n_raw_r24", rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8).view("V3")[..., 0],
          (2, 3), "r24", None, np.zeros((), "V3")[()],
          compressor=gz, present=lambda idx: idx != (1, 0)),
        D("o_ignorable_extension", make_data("<u2", (6,), rng), (4,), "uint16", 1, np.uint16(1),
          extra={"extensions": [IGNORABLE_EXTENSION]}),
    ]
    # fmt: on


IGNORABLE_EXTENSION = {
    "extension": "https://example.org/zarr/ext/ignore-me",
    "must_understand": False,
    "configuration": {"a": 1},
}

# Draft arrays that must be hidden (extension that must be understood, storage transformer)
DRAFT_HIDDEN = {
    "p_required_extension": {
        "extensions": [{"extension": "https://example.org/zarr/ext/x", "must_understand": True}]
    },
    "q_storage_transformer": {
        "storage_transformers": [
            {
                "extension": "https://purl.org/zarr/spec/storage_transformers/sharding/1.0",
                "type": "indexed",
                "configuration": {"chunks_per_shard": [2]},
            }
        ]
    },
    "r_unknown_field": {"not_in_the_spec": 1},
}


def write_draft_array(root: Path, path: str, spec: DraftArraySpec) -> V3Array:
    """One array in the May 2022 layout: meta/<path>.array.json, data/<path>/c<i>/<j>."""
    doc, expected = write_draft_chunks(root, path, spec)
    return V3Array(
        path,
        "manual",
        {"draft"},
        expected=expected,
        dtype=spec.file_dtype,
        shape=spec.data.shape,
        chunks=tuple(spec.chunks),
        doc=doc,
        fmt="3-draft",
    )


DRAFT_ROOT_ATTRS = {
    "title": "May 2022 draft",
    "list": [1, 2],
    "zarr_conventions_version": "0.1.0",
    "zarr_conventions_metadata": {
        UUID_B: {"version": "0.1.0", "name": "draft-convention", "configuration": {"x": 1}},
    },
}
DRAFT_ROOT_CONVENTIONS = [{"uuid": UUID_B, "name": "draft-convention", "version": "0.1.0"}]
DRAFT_GROUP_ATTRS = {"explicit": True, "nested": {"a": None}}


def build_draft(
    root: str | os.PathLike | None, spec_form: bool = False, root_doc: bool = True
) -> V3Hierarchy:
    """The May 2022 draft layout, by hand: entry point, meta/..., data/..., no root/.
    ``root_doc=False``: no ``meta/group.json`` (the root group is implicit)."""
    specs = _draft_specs(np.random.default_rng(2022))
    h = V3Hierarchy(Path(root) if root is not None else Path("/nonexistent-dry-run"))
    h.groups = {
        "": dict(DRAFT_ROOT_ATTRS),
        "implicit": {},
        "implicit/deeper": {},
        "explicit": dict(DRAFT_GROUP_ATTRS),
    }
    if root is None:
        for s in specs:
            h.arrays[s.path] = V3Array(s.path, "manual", {"draft"})
        h.hidden = dict.fromkeys(DRAFT_HIDDEN, "array")
        return h
    write_draft_entry_point(h.root, spec_form)
    (h.root / "meta").mkdir(parents=True, exist_ok=True)
    if root_doc:
        write_json(h.root / "meta" / "group.json", {"attributes": DRAFT_ROOT_ATTRS})
    else:
        h.groups[""] = {}
    explicit = {"attributes": DRAFT_GROUP_ATTRS, "extensions": []}
    write_json(h.root / "meta" / "explicit.group.json", explicit)
    for s in specs:
        h.arrays[s.path] = write_draft_array(h.root, s.path, s)
    for name, extra in DRAFT_HIDDEN.items():
        data = np.arange(4, dtype="<i2")
        write_draft_array(
            h.root, name, DraftArraySpec(name, data, (2,), "int16", 0, np.int16(0), extra=extra)
        )
        h.hidden[name] = "array"
    return h


def build_draft_root_array(root: str | os.PathLike) -> V3Array:
    """A May 2022 draft store whose root is an array: meta/array.json, data/c0/0."""
    rootp = Path(root)
    write_draft_entry_point(rootp)
    data = make_data(np.dtype("<i4"), (7, 6), np.random.default_rng(9))
    spec = DraftArraySpec("", data, (3, 4), "int32", 0, np.int32(0), big=True, compressor="gzip")
    spec.present = lambda idx: idx != (2, 1)
    return write_draft_array(rootp, "", spec)


# --------------------------------------------------------------------------- assertions


def getxattr_json(path: str | os.PathLike, name: str) -> Any:
    return json.loads(os.getxattr(path, name).decode("utf-8"))


def has_xattr(path: str | os.PathLike, name: str) -> bool:
    try:
        os.getxattr(path, name)
    except OSError as e:
        if e.errno == errno.ENODATA:
            return False
        raise
    return True


def _same_fill(value: Any, want: Any) -> bool:
    """JSON equality, with ints and floats alike (but never a bool for a number)."""
    return value == want and (
        type(value) is type(want)
        or (
            isinstance(want, int | float)
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and not isinstance(want, bool)
        )
    )


def _codecs_problems(value: Any, case: V3Array) -> list[str]:
    """``user.zarr.codecs`` against the stored codecs (final v3: name/configuration)."""
    if value is None:
        return []
    if case.fmt != "3":
        return (
            [] if isinstance(value, dict) else [f"user.zarr.codecs {value!r} is not a JSON object"]
        )
    if not isinstance(value, dict) or not isinstance(value.get("codecs"), list):
        return [f"user.zarr.codecs {value!r} is not {{'codecs': [...]}}"]
    top = value["codecs"]
    if not all(isinstance(c, dict) and set(c) == {"name", "configuration"} for c in top):
        return [f"user.zarr.codecs {top!r}: not name/configuration objects"]
    if normalize_codecs(top) != normalize_codecs(case.doc["codecs"]):
        return [f"user.zarr.codecs {top!r} != stored {case.doc['codecs']!r}"]
    return []


class _XattrCheck:
    """Reads one file's xattrs, collecting what cannot be read or differs in ``errors``."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.errors: list[str] = []

    def get(self, name: str) -> str | None:
        try:
            return os.getxattr(self.path, name).decode("utf-8")
        except OSError as e:
            self.errors.append(f"{name}: {e}")
            return None

    def get_json(self, name: str) -> Any:
        value = json_xattr(self.get, name, self.errors)
        return None if value is MISSING else value

    def equal(self, name: str, want: Any) -> None:
        value = self.get_json(name)
        if value is not None and value != want:
            self.errors.append(f"{name} {value!r} != {want!r}")

    def optional(self, name: str, want: Any, absent: str) -> None:
        """``name`` equals ``want``, or (``want`` None) is not there at all."""
        if want is not None:
            self.equal(name, want)
        elif has_xattr(self.path, name):
            self.errors.append(f"{name} present {absent}")


def v3_xattr_problems(path: str | os.PathLike, case: V3Array) -> list[str]:
    """Every documented ``user.zarr.*`` attribute of an array file against ``case``."""
    check = _XattrCheck(path)
    label = check.get("user.zarr.dtype")
    if label is not None and (why := dtype_label_matches(label, case.dtype)):
        check.errors.append(why)
    check.equal("user.zarr.shape", list(case.shape))
    check.equal("user.zarr.chunks", list(case.chunks))
    check.equal("user.zarr.attributes", case.attributes)
    shards = list(case.shards) if case.shards is not None else None
    check.optional("user.zarr.shards", shards, "on an array that is not sharded")
    check.optional("user.zarr.dimension_names", case.dimension_names, "although none are set")
    value = json_xattr(check.get, "user.zarr.fill_value", check.errors)
    if value is not MISSING and not _same_fill(value, case.fill_json):
        check.errors.append(f"user.zarr.fill_value {value!r} != stored {case.fill_json!r}")
    fmt = check.get("user.zarr.format")
    if fmt is not None and fmt.strip() != case.fmt:
        check.errors.append(f"user.zarr.format {fmt!r} != {case.fmt!r}")
    check.errors += _codecs_problems(check.get_json("user.zarr.codecs"), case)
    if case.conventions is not None:
        value = check.get_json("user.zarr.conventions")
        by_uuid = sorted(case.conventions, key=lambda c: c["uuid"])
        if value is not None and sorted(value, key=lambda c: c.get("uuid", "")) != by_uuid:
            check.errors.append(f"user.zarr.conventions {value!r} != {case.conventions!r}")
    return check.errors
