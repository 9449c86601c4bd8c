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
"""

from __future__ import annotations

import copy
import gzip as gzip_module
import itertools
import json
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr
import zarr.codecs.numcodecs as znc
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarr.core.dtype import VariableLengthBytes

from helpers.oracle import MISSING, json_xattr
from helpers.zarrdata import dtype_from_json, make_data, smooth_data

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


def bytes_codec_endian(codecs: list) -> str | None:
    """The ``endian`` of the array-to-bytes codec (inside sharding: of the inner chunks)."""
    for c in codecs:
        name = c if isinstance(c, str) else c["name"]
        config = {} if isinstance(c, str) else c.get("configuration") or {}
        if name == "bytes":
            return config.get("endian")
        if name == "sharding_indexed":
            return bytes_codec_endian(config["codecs"])
    return None


def file_dtype(np_dtype: np.dtype, codecs: list) -> np.dtype:
    """zarr-python's in-memory dtype in the byte order the stored elements use."""
    np_dtype = np.dtype(np_dtype)
    endian = bytes_codec_endian(codecs)
    if np_dtype.fields is not None or np_dtype.byteorder == "|" or endian is None:
        return np_dtype
    return np_dtype.newbyteorder({"little": "<", "big": ">"}[endian])


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


# --------------------------------------------------------------------------- store helpers


def read_doc(root: Path, path: str) -> dict:
    return json.loads(
        (root / path / "zarr.json").read_text() if path else (root / "zarr.json").read_text()
    )


def write_doc(root: Path, path: str, doc: dict) -> None:
    d = root / path if path else root
    d.mkdir(parents=True, exist_ok=True)
    (d / "zarr.json").write_text(json.dumps(doc, indent=2))


def patch_doc(root: Path, path: str, fn: Callable[[dict], None]) -> None:
    doc = read_doc(root, path)
    fn(doc)
    write_doc(root, path, doc)


def zarr_oracle(root: Path, path: str) -> tuple[bytes, np.dtype, tuple, tuple | None, dict]:
    """(bytes, file dtype, chunks, shards, document) as zarr-python reads ``path``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.open_array(str(root), path=path, mode="r", zarr_format=3)
        values = arr[...]
        doc = read_doc(root, path)
        dt = file_dtype(arr.dtype, doc["codecs"])
        expected = np.ascontiguousarray(np.asarray(values).astype(dt)).tobytes()
        shards = arr.shards
        return expected, dt, tuple(arr.chunks), tuple(shards) if shards else None, doc


def finish_zarr(root: Path, case: V3Array) -> None:
    """Fill ``case`` with zarr-python's view of the array at ``case.path``."""
    expected, dt, chunks, shards, doc = zarr_oracle(root, case.path)
    case.expected, case.dtype, case.chunks, case.shards, case.doc = (
        expected,
        dt,
        chunks,
        shards,
        doc,
    )
    case.shape = tuple(doc["shape"])


def chunk_regions(shape, chunks):
    grid = [range(math.ceil(s / c)) for s, c in zip(shape, chunks, strict=True)]
    for idx in itertools.product(*grid):
        yield (
            idx,
            tuple(
                slice(i * c, min((i + 1) * c, s))
                for i, c, s in zip(idx, chunks, shape, strict=True)
            ),
        )


def padded_chunk(data: np.ndarray, idx, chunks, fill) -> np.ndarray:
    """The full-size chunk ``idx`` of ``data`` (edge chunks padded with ``fill``)."""
    out = np.full(chunks, fill, dtype=data.dtype)
    region = tuple(
        slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, data.shape, strict=True)
    )
    out[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
    return out


# --------------------------------------------------------------------------- builder


class V3Builder:
    def __init__(self, root: str | os.PathLike | None, root_attrs: dict | None = None):
        self.dry = root is None
        self.root = Path(root) if root is not None else Path("/nonexistent-dry-run")
        self.h = V3Hierarchy(self.root)
        self.rng = np.random.default_rng(3)
        self.h.groups[""] = dict(root_attrs or {})
        if not self.dry:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zarr.open_group(
                    str(self.root), mode="w", zarr_format=3, attributes=root_attrs or {}
                )

    # -- groups --------------------------------------------------------------------------

    def group(self, path: str, attrs: dict | None = None) -> None:
        self._parents(path)
        self.h.groups[path] = dict(attrs or {})
        if not self.dry:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zarr.open_group(
                    str(self.root), path=path, mode="w", zarr_format=3, attributes=attrs or {}
                )

    def _parents(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in self.h.groups:
                self.group(p)

    # -- arrays written by zarr-python ---------------------------------------------------

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
    ) -> V3Array | None:
        """``zarr.create_array(..., **create)``, write ``data[region]``, optionally patch the
        stored zarr.json, then take the oracle from zarr-python reading the store (or, with
        ``oracle_is_data``, from ``data`` itself: zarr-python 3.1 writes some chains right
        but reads them back wrong)."""
        self._parents(path)
        case = V3Array(path, "zarr", set(tags))
        self.h.arrays[path] = case
        if self.dry:
            return case
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if data is not None:
                create.setdefault("shape", data.shape)
                create.setdefault("dtype", data.dtype)
            arr = zarr.create_array(str(self.root), name=path, zarr_format=3, **create)
            if data is not None and region is not None:
                if region == "all":
                    arr[...] = data
                else:
                    arr[region] = data[region]
        if patch is not None:
            patch_doc(self.root, path, patch)
        self.finish_zarr(case)
        if oracle_is_data:
            case.expected = np.ascontiguousarray(data, dtype=case.dtype).tobytes()
        return case

    def finish_zarr(self, case: V3Array) -> None:
        finish_zarr(self.root, case)

    # -- arrays written by hand ----------------------------------------------------------

    def manual_array(
        self,
        path: str,
        data: np.ndarray,
        *,
        chunks: tuple[int, ...],
        data_type: Any,
        fill_json: Any,
        fill: Any,
        codecs: list,
        encode: Callable[[np.ndarray], bytes],
        present: Callable[[tuple], bool] = lambda idx: True,
        key_encoding: dict | None = None,
        attrs: dict | None = None,
        extra: dict | None = None,
        omit: tuple[str, ...] = (),
        tags: set[str] | frozenset = frozenset(),
    ) -> V3Array:
        """zarr.json and chunk files written here; ``data`` is in the file's dtype and the
        oracle is ``data`` with ``fill`` wherever a chunk is absent."""
        self._parents(path)
        case = V3Array(path, "manual", set(tags))
        self.h.arrays[path] = case
        if self.dry:
            return case
        key_encoding = key_encoding or {"name": "default", "configuration": {"separator": "/"}}
        doc = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(data.shape),
            "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": key_encoding,
            "fill_value": fill_json,
            "codecs": codecs,
            "attributes": attrs or {},
            **(extra or {}),
        }
        for key in omit:
            doc.pop(key, None)
        write_doc(self.root, path, doc)
        expected = np.full(data.shape, fill, dtype=data.dtype)
        name = key_encoding["name"]
        sep = key_encoding.get("configuration", {}).get(
            "separator", "/" if name == "default" else "."
        )
        for idx, region in chunk_regions(data.shape, chunks):
            if not present(idx):
                continue
            if name == "default":
                key = (
                    "/".join(["c", *map(str, idx)])
                    if sep == "/"
                    else ".".join(["c", *map(str, idx)])
                )
            else:
                key = sep.join(map(str, idx)) if idx else "0"
            f = self.root / path / key
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(encode(padded_chunk(data, idx, chunks, fill)))
            expected[region] = data[region]
        case.expected = np.ascontiguousarray(expected).tobytes()
        case.dtype = data.dtype
        case.shape = data.shape
        case.chunks = tuple(chunks)
        case.doc = doc
        return case


# --------------------------------------------------------------------------- main hierarchy

CORE_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
NP_OF = {
    "bool": "|b1",
    "int8": "|i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "|u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "complex64": "<c8",
    "complex128": "<c16",
}

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


# Fill forms zarr-python 3.1 reads wrongly (see the oracle override in the builder).
ZARR_LOSES_FILL_BITS = {"float16_hex_nan"}


def _fill_patch(fill_json):
    def patch(doc):
        doc["fill_value"] = fill_json

    return patch


def build_v3_main(root: str | os.PathLike | None) -> V3Hierarchy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _build_v3_main(root)


def _build_v3_main(root: str | os.PathLike | None) -> V3Hierarchy:
    b = V3Builder(root, {"title": "zarrmount v3 hierarchy", "n": 3, "nested": {"k": [1, 2]}})
    rng = b.rng

    # dtypes/: every core data type, default codecs (bytes little + zstd), edge chunks
    b.group("dtypes", {"what": "core data types"})
    for name in CORE_DTYPES:
        dt = np.dtype(NP_OF[name])
        b.zarr_array(f"dtypes/{name}", make_data(dt, (7, 9), rng), chunks=(3, 4), tags={"dtype"})
    # big endian through the bytes codec, gzip
    for name in CORE_DTYPES:
        dt = np.dtype(NP_OF[name])
        b.zarr_array(
            f"dtypes_be/{name}",
            make_data(dt, (5, 6), rng),
            chunks=(2, 4),
            serializer=BytesCodec(endian="big"),
            compressors=[GzipCodec(level=1)],
            tags={"dtype", "big"},
        )

    # zarr-python's fixed-size extension data types
    ext = {
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
    for name, dt in ext.items():
        b.zarr_array(f"ext/{name}", make_data(dt, (6, 5), rng), chunks=(4, 2), tags={"ext"})
    for name, dt in (
        ("datetime64_ns_be", "<M8[ns]"),
        ("timedelta64_ms_be", "<m8[ms]"),
        ("utf32_U3_be", "<U3"),
    ):
        dt = np.dtype(dt)
        b.zarr_array(
            f"ext/{name}",
            make_data(dt, (6, 5), rng),
            chunks=(4, 2),
            serializer=BytesCodec(endian="big"),
            tags={"ext", "big"},
        )
    # extension types with fill values and missing chunks
    b.zarr_array(
        "ext/utf32_fill",
        make_data(np.dtype("<U3"), (9,), rng),
        chunks=(4,),
        fill_value="xé",
        region=slice(0, 3),
        tags={"ext", "fill"},
    )
    b.zarr_array(
        "ext/bytes_fill",
        make_data(np.dtype("S4"), (9,), rng),
        chunks=(4,),
        fill_value=b"ab",
        region=slice(5, 6),
        tags={"ext", "fill"},
    )
    b.zarr_array(
        "ext/raw_fill",
        make_data(np.dtype("V3"), (9,), rng),
        chunks=(4,),
        fill_value=np.void(b"\x01\x02\x03"),
        region=slice(0, 2),
        tags={"ext", "fill"},
    )
    st = np.dtype([("a", "<i4"), ("b", "<f8")])
    b.zarr_array(
        "ext/struct_fill",
        make_data(st, (9,), rng),
        chunks=(4,),
        fill_value=np.array((5, 2.5), dtype=st)[()],
        region=slice(4, 5),
        tags={"ext", "fill"},
    )
    b.zarr_array(
        "ext/datetime_fill_zero",
        make_data(np.dtype("<M8[s]"), (9,), rng),
        chunks=(4,),
        fill_value=np.datetime64(0, "s"),
        region=slice(8, 9),
        tags={"ext", "fill"},
    )

    # raw r* data types (zarr-python 3.1 has none): by hand, fill = list of bytes
    for bits, codecs, fill in (
        (8, [{"name": "bytes"}], [7]),
        (16, [{"name": "bytes"}], [1, 2]),
        (24, [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}], [255, 0, 9]),
        (
            64,
            [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "crc32c"}],
            [1, 2, 3, 4, 5, 6, 7, 8],
        ),
    ):
        n = bits // 8
        dt = np.dtype(f"V{n}")
        data = rng.integers(0, 256, size=(7, 5, n), dtype=np.uint8).view(dt)[..., 0]
        gz = any(c["name"] == "gzip" for c in codecs)
        crc = any(c["name"] == "crc32c" for c in codecs)

        def encode(chunk, gz=gz, crc=crc):
            raw = np.ascontiguousarray(chunk).tobytes()
            if gz:
                raw = gzip_module.compress(raw, compresslevel=1)
            if crc:
                raw += _crc32c(raw)
            return raw

        b.manual_array(
            f"raw/r{bits}",
            data,
            chunks=(3, 2),
            data_type=f"r{bits}",
            fill_json=fill,
            fill=np.frombuffer(bytes(fill), dtype=dt)[0],
            codecs=codecs,
            encode=encode,
            present=lambda idx: (idx[0] + idx[1]) % 3 != 1,
            tags={"raw"},
        )

    # fill/: every fill value form; only element 4 of 10 is written (chunks (3,)):
    # chunks 0, 2, 3 are missing and read as the fill value
    for name, (dtype_name, fill_json) in FILLS.items():
        dt = np.dtype(NP_OF.get(dtype_name, dtype_name))
        b.zarr_array(
            f"fill/{name}",
            make_data(dt, (10,), rng),
            chunks=(3,),
            region=slice(4, 5),
            patch=_fill_patch(fill_json),
            tags={"fill"},
        )
        if name in ZARR_LOSES_FILL_BITS and not b.dry:
            # zarr-python 3.1 reads a float16 NaN fill through float64 and drops the NaN
            # payload (0x7e01 reads as 0x7e00). The spec: the hex string IS the bit pattern.
            # Oracle for the missing chunks (elements 0-2 and 6-9): NumPy on those bits.
            case = b.h.arrays[f"fill/{name}"]
            values = np.frombuffer(case.expected, dtype=case.dtype).copy()
            bits = np.array(int(fill_json, 16), dtype=f"<u{dt.itemsize}").view(case.dtype)
            values[[0, 1, 2, 6, 7, 8, 9]] = bits
            case.expected = values.tobytes()
    # fill values in big-endian files: the fill's bytes must be swapped too
    for name, dtype_name, fill_json in (
        ("float32_hex_be", "float32", "0x7fc00001"),
        ("uint32_be", "uint32", 0x01020304),
        ("complex128_be", "complex128", [1.0, "-Infinity"]),
        ("float16_be", "float16", "0x3c01"),
    ):
        dt = np.dtype(NP_OF[dtype_name])
        b.zarr_array(
            f"fill/{name}",
            make_data(dt, (10,), rng),
            chunks=(3,),
            region=slice(4, 5),
            serializer=BytesCodec(endian="big"),
            patch=_fill_patch(fill_json),
            tags={"fill", "big"},
        )

    # codecs/: every codec and combination, smooth data so compressors compress
    i4 = smooth_data(np.dtype("<i4"), (12, 10))
    f4 = smooth_data(np.dtype("<f4"), (12, 10))
    f8 = smooth_data(np.dtype("<f8"), (12, 10))
    u2 = smooth_data(np.dtype("<u2"), (12, 10))
    cube = smooth_data(np.dtype("<i2"), (6, 7, 8))
    b.group("codecs", {"what": "codecs"})

    def codec_case(name, data, chunks=(5, 4), **kw):
        kw.setdefault("compressors", None)
        b.zarr_array(f"codecs/{name}", data, chunks=chunks, tags={"codec"}, **kw)

    codec_case("bytes_little", i4, serializer=BytesCodec(endian="little"))
    codec_case("bytes_big_u2", u2, serializer=BytesCodec(endian="big"))
    codec_case("bytes_big_f8", f8, serializer=BytesCodec(endian="big"))
    codec_case("transpose_2d", i4, filters=[TransposeCodec(order=(1, 0))])
    codec_case("transpose_2d_identity", i4, filters=[TransposeCodec(order=(0, 1))])
    for order in ((2, 0, 1), (1, 2, 0), (0, 2, 1), (2, 1, 0), (1, 0, 2)):
        codec_case(
            "transpose_3d_" + "".join(map(str, order)),
            cube,
            chunks=(4, 3, 5),
            filters=[TransposeCodec(order=order)],
            compressors=[GzipCodec(level=1)],
        )
    codec_case(
        "transpose_3d_201_big",
        cube,
        chunks=(4, 3, 5),
        filters=[TransposeCodec(order=(2, 0, 1))],
        serializer=BytesCodec(endian="big"),
    )
    codec_case(
        "transpose_twice",
        cube,
        chunks=(4, 3, 5),
        filters=[TransposeCodec(order=(2, 0, 1)), TransposeCodec(order=(1, 2, 0))],
    )
    codec_case("gzip_1", i4, compressors=[GzipCodec(level=1)])
    codec_case("gzip_9", f8, compressors=[GzipCodec(level=9)])
    codec_case("zstd_checksum", f4, compressors=[ZstdCodec(level=3, checksum=True)])
    codec_case("zstd_no_checksum", i4, compressors=[ZstdCodec(level=-1, checksum=False)])
    codec_case(
        "blosc_lz4_noshuffle",
        i4,
        compressors=[BloscCodec(cname="lz4", shuffle="noshuffle", typesize=4)],
    )
    codec_case(
        "blosc_lz4_shuffle",
        f4,
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle", typesize=4)],
    )
    codec_case(
        "blosc_zstd_bitshuffle",
        f8,
        compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle", typesize=8)],
    )
    codec_case(
        "blosc_zlib_shuffle_typesize1",
        u2,
        compressors=[BloscCodec(cname="zlib", shuffle="shuffle", typesize=1)],
    )
    codec_case(
        "blosc_blosclz_bitshuffle",
        u2,
        compressors=[BloscCodec(cname="blosclz", clevel=9, shuffle="bitshuffle", typesize=2)],
    )
    codec_case(
        "blosc_lz4hc_big",
        f4,
        serializer=BytesCodec(endian="big"),
        compressors=[BloscCodec(cname="lz4hc", shuffle="shuffle", typesize=4)],
    )
    codec_case("crc32c", i4, compressors=[Crc32cCodec()])
    codec_case("gzip_crc32c", f4, compressors=[GzipCodec(level=2), Crc32cCodec()])
    codec_case("zstd_then_gzip", i4, compressors=[ZstdCodec(level=1), GzipCodec(level=1)])
    codec_case(
        "chain_transpose_big_blosc_crc32c",
        u2,
        filters=[TransposeCodec(order=(1, 0))],
        serializer=BytesCodec(endian="big"),
        compressors=[BloscCodec(cname="lz4", shuffle="bitshuffle", typesize=2), Crc32cCodec()],
    )
    # numcodecs.* codecs as zarr-python writes them
    codec_case("numcodecs_zlib", i4, compressors=[znc.Zlib(level=3)])
    codec_case("numcodecs_gzip", i4, compressors=[znc.GZip(level=1)])
    codec_case("numcodecs_lz4", f4, compressors=[znc.LZ4(acceleration=1)])
    codec_case("numcodecs_bz2", i4, compressors=[znc.BZ2(level=1)])
    codec_case("numcodecs_lzma", i4, compressors=[znc.LZMA()])
    codec_case("numcodecs_zstd", f8, compressors=[znc.Zstd(level=1)])
    codec_case("numcodecs_blosc", f8, compressors=[znc.Blosc(cname="lz4", shuffle=2)])
    codec_case("numcodecs_shuffle", i4, compressors=[znc.Shuffle(elementsize=4)])
    codec_case("numcodecs_crc32", i4, compressors=[znc.CRC32()])
    codec_case("numcodecs_adler32", i4, compressors=[znc.Adler32()])
    codec_case("numcodecs_fletcher32", i4, compressors=[znc.Fletcher32()])
    codec_case("numcodecs_jenkins_lookup3", i4, compressors=[znc.JenkinsLookup3()])
    codec_case("numcodecs_crc32c", i4, compressors=[znc.CRC32C()])
    codec_case(
        "numcodecs_delta", i4, filters=[znc.Delta(dtype="<i4")], compressors=[znc.Zlib(level=1)]
    )
    codec_case(
        "numcodecs_fixedscaleoffset",
        f8,
        filters=[znc.FixedScaleOffset(offset=100, scale=10, dtype="<f8", astype="<i4")],
    )
    codec_case("numcodecs_quantize", f8, filters=[znc.Quantize(digits=2, dtype="<f8")])
    codec_case("numcodecs_bitround", f4, filters=[znc.BitRound(keepbits=6)])
    codec_case("numcodecs_astype", f8, filters=[znc.AsType(encode_dtype="<f4", decode_dtype="<f8")])
    codec_case(
        "numcodecs_packbits",
        smooth_data(np.dtype("<i4"), (12, 10)) % 3 == 0,
        filters=[znc.PackBits()],
        compressors=[GzipCodec(level=1)],
    )
    codec_case(
        "numcodecs_delta_big",
        i4,
        filters=[znc.Delta(dtype="<i4")],
        serializer=BytesCodec(endian="big"),
        compressors=[znc.Zlib(level=1)],
        oracle_is_data=True,  # zarr-python 3.1 reads a filter before big-endian bytes wrong
    )

    # shard/: sharding_indexed
    b.group("shard", {"what": "sharding"})
    s2 = make_data(np.dtype("<f4"), (20, 30), rng)
    b.zarr_array("shard/index_end", s2, chunks=(5, 5), shards=(10, 15), tags={"shard"})
    b.zarr_array(
        "shard/index_start",
        s2,
        chunks=(5, 5),
        tags={"shard"},
        serializer=ShardingCodec(
            chunk_shape=(5, 5), index_location="start", codecs=[BytesCodec(), ZstdCodec(level=1)]
        ),
        shards=None,
    ) if False else b.zarr_array(
        "shard/index_start",
        s2,
        tags={"shard"},
        chunks=(10, 15),
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(5, 5), index_location="start", codecs=[BytesCodec(), ZstdCodec(level=1)]
        ),
    )
    b.zarr_array(
        "shard/edge",
        make_data(np.dtype("<i8"), (23, 31), rng),
        chunks=(5, 5),
        shards=(10, 15),
        tags={"shard"},
    )
    b.zarr_array(
        "shard/edge_start",
        make_data(np.dtype("<u2"), (23, 31), rng),
        chunks=(10, 15),
        compressors=None,
        tags={"shard"},
        serializer=ShardingCodec(chunk_shape=(5, 3), index_location="start"),
    )
    part = make_data(np.dtype("<i2"), (40, 30), rng)
    # shards are (20, 15), inner (5, 5); only parts written: shard (1, 1) is missing,
    # shard (0, 0) has only some inner chunks, shard (1, 0) has one partly written chunk
    b.zarr_array(
        "shard/partial",
        part,
        chunks=(5, 5),
        shards=(20, 15),
        fill_value=-7,
        region=None,
        tags={"shard", "missing"},
    )
    if not b.dry:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            za = zarr.open_array(str(b.root), path="shard/partial", mode="r+")
            za[0:5, 0:10] = part[0:5, 0:10]
            za[12:13, 3:4] = part[12:13, 3:4]
            za[10:15, 5:15] = part[10:15, 5:15]
            za[27:29, 2:9] = part[27:29, 2:9]
            za[0:20, 15:30] = part[0:20, 15:30]
        b.finish_zarr(b.h.arrays["shard/partial"])
    b.zarr_array(
        "shard/empty",
        None,
        shape=(20, 20),
        dtype="<f8",
        chunks=(5, 5),
        shards=(10, 10),
        fill_value=2.5,
        region=None,
        tags={"shard", "missing"},
    )
    b.zarr_array(
        "shard/inner_transpose_big_blosc",
        smooth_data(np.dtype("<u2"), (20, 30)),
        chunks=(10, 15),
        tags={"shard"},
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(5, 5),
            codecs=[
                TransposeCodec(order=(1, 0)),
                BytesCodec(endian="big"),
                BloscCodec(cname="lz4", shuffle="bitshuffle", typesize=2),
            ],
        ),
    )
    b.zarr_array(
        "shard/inner_3d_transpose",
        smooth_data(np.dtype("<f4"), (9, 10, 11)),
        chunks=(4, 10, 6),
        tags={"shard"},
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(2, 5, 3),
            codecs=[
                TransposeCodec(order=(2, 0, 1)),
                BytesCodec(),
                BloscCodec(cname="zstd", shuffle="shuffle", typesize=4),
            ],
        ),
    )
    b.zarr_array(
        "shard/inner_crc32c",
        s2,
        chunks=(10, 15),
        tags={"shard"},
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(5, 5),
            codecs=[BytesCodec(), ZstdCodec(level=1, checksum=True), Crc32cCodec()],
        ),
    )
    b.zarr_array(
        "shard/index_no_crc",
        s2,
        chunks=(10, 15),
        tags={"shard"},
        compressors=None,
        serializer=ShardingCodec(chunk_shape=(5, 5), index_codecs=[BytesCodec()]),
    )
    b.zarr_array(
        "shard/index_big",
        s2,
        chunks=(10, 15),
        tags={"shard"},
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(5, 5), index_codecs=[BytesCodec(endian="big"), Crc32cCodec()]
        ),
    )
    b.zarr_array(
        "shard/one_d",
        make_data(np.dtype("<f8"), (100,), rng),
        chunks=(8,),
        shards=(32,),
        tags={"shard"},
    )
    b.zarr_array(
        "shard/whole_shard_one_chunk", s2, chunks=(10, 15), shards=(10, 15), tags={"shard"}
    )
    nested = make_data(np.dtype("<i4"), (40, 37), rng)
    b.zarr_array(
        "shard/nested",
        nested,
        chunks=(16, 16),
        tags={"shard", "nested"},
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(8, 8),
            codecs=[ShardingCodec(chunk_shape=(4, 4), codecs=[BytesCodec(), GzipCodec()])],
        ),
    )
    b.zarr_array(
        "shard/nested_start_partial",
        nested,
        chunks=(16, 16),
        tags={"shard", "nested", "missing"},
        compressors=None,
        fill_value=99,
        region=(slice(3, 17), slice(0, 9)),
        serializer=ShardingCodec(
            chunk_shape=(8, 8),
            index_location="start",
            codecs=[
                ShardingCodec(
                    chunk_shape=(4, 2),
                    index_location="start",
                    codecs=[
                        TransposeCodec(order=(1, 0)),
                        BytesCodec(endian="big"),
                        ZstdCodec(level=1),
                    ],
                )
            ],
        ),
    )
    b.zarr_array(
        "shard/transpose_then_shard",
        make_data(np.dtype("<i4"), (12, 10), rng),
        chunks=(8, 8),
        tags={"shard"},
        compressors=None,
        filters=[TransposeCodec(order=(1, 0))],
        serializer=ShardingCodec(chunk_shape=(4, 2)),
    )
    b.zarr_array(
        "shard/bool",
        make_data(np.dtype("|b1"), (20, 30), rng),
        chunks=(5, 5),
        shards=(10, 15),
        tags={"shard"},
    )
    # shards whose inner chunks are stored in another order, with unused bytes between
    # them (any write order is valid); the index is rewritten to match
    for loc in ("end", "start"):
        path = f"shard/reordered_with_gaps_{loc}"
        b.zarr_array(
            path,
            make_data(np.dtype("<u4"), (20, 30), rng),
            chunks=(10, 15),
            tags={"shard"},
            compressors=None,
            serializer=ShardingCodec(
                chunk_shape=(5, 5), index_location=loc, codecs=[BytesCodec(), GzipCodec(level=1)]
            ),
        )
        if not b.dry:
            for f in sorted((b.root / path / "c").rglob("*")):
                if f.is_file():
                    f.write_bytes(relayout_shard(f.read_bytes(), 6, loc))
            b.finish_zarr(b.h.arrays[path])

    # sharding followed by bytes-to-bytes codecs on the whole shard
    b.zarr_array(
        "shard/shard_then_gzip_crc32c",
        make_data(np.dtype("<i4"), (12, 10), rng),
        chunks=(6, 10),
        tags={"shard"},
        serializer=ShardingCodec(chunk_shape=(3, 5)),
        compressors=[GzipCodec(level=1), Crc32cCodec()],
    )

    # names that are safe path components but unusual
    for name in ("with space", "ünïcödé 漢字", "dots.in.name", "c"):
        b.zarr_array(
            f"names/{name}", make_data(np.dtype("<u2"), (3, 4), rng), chunks=(2, 2), tags={"names"}
        )

    # chunks / shards larger than the whole array
    b.zarr_array(
        "edge/chunk_bigger_than_array",
        make_data(np.dtype("<f8"), (3, 5), rng),
        chunks=(8, 8),
        tags={"edge"},
    )
    b.zarr_array(
        "edge/shard_bigger_than_array",
        make_data(np.dtype("<i2"), (5, 7), rng),
        chunks=(8, 4),
        shards=(16, 16),
        tags={"edge", "shard"},
    )
    b.zarr_array(
        "edge/one_element_chunks",
        make_data(np.dtype("<u4"), (3, 4), rng),
        chunks=(1, 1),
        tags={"edge"},
    )

    # the smallest documents the spec allows: no attributes, no dimension_names, no
    # storage_transformers; a group document with only zarr_format and node_type
    b.manual_array(
        "minimal/array",
        make_data(np.dtype("<i2"), (5, 3), rng),
        chunks=(2, 2),
        data_type="int16",
        fill_json=-3,
        fill=np.int16(-3),
        codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
        encode=lambda chunk: chunk.tobytes(),
        present=lambda idx: idx != (2, 0),
        omit=("attributes",),
        tags={"manual"},
    )
    b.h.groups["minimal/bare_group"] = {}
    if not b.dry:
        write_doc(b.root, "minimal/bare_group", {"zarr_format": 3, "node_type": "group"})

    # short-hand extension names (v3.1: a bare string is an object with only "name")
    sh = make_data(np.dtype("|u1"), (7, 5), rng)
    b.manual_array(
        "codecs/shorthand_names",
        sh,
        chunks=(3, 2),
        data_type="uint8",
        fill_json=3,
        fill=np.uint8(3),
        codecs=["bytes", "crc32c"],
        encode=lambda chunk: chunk.tobytes() + _crc32c(chunk.tobytes()),
        present=lambda idx: idx != (1, 1),
        tags={"codec", "manual"},
    )

    def plain_u8_keys(name, chunks, fill, key_encoding, **kw):
        """``sh`` as uint8 with the plain ``bytes`` codec, so that only the hand-written
        chunk key encoding is under test."""
        b.manual_array(
            f"keys/{name}",
            sh,
            chunks=chunks,
            data_type="uint8",
            fill_json=fill,
            fill=np.uint8(fill),
            codecs=[{"name": "bytes"}],
            key_encoding=key_encoding,
            encode=lambda chunk: chunk.tobytes(),
            tags={"keys", "manual"},
            **kw,
        )

    plain_u8_keys("shorthand_v2", (3, 2), 0, {"name": "v2"})
    plain_u8_keys(
        "default_no_configuration", (2, 3), 9, {"name": "default"}, present=lambda i: i != (0, 1)
    )
    if not b.dry:
        patch_doc(b.root, "keys/shorthand_v2", lambda d: d.update({"chunk_key_encoding": "v2"}))
        b.h.arrays["keys/shorthand_v2"].doc["chunk_key_encoding"] = "v2"

    # keys/: chunk key encodings
    k2 = make_data(np.dtype("<i4"), (7, 9), rng)
    k3 = make_data(np.dtype("<u1"), (5, 6, 7), rng)
    for name, enc in (
        ("default_slash", {"name": "default", "separator": "/"}),
        ("default_dot", {"name": "default", "separator": "."}),
        ("v2_dot", {"name": "v2", "separator": "."}),
        ("v2_slash", {"name": "v2", "separator": "/"}),
    ):
        b.zarr_array(f"keys/{name}", k2, chunks=(3, 4), chunk_key_encoding=enc, tags={"keys"})
        b.zarr_array(f"keys/{name}_3d", k3, chunks=(2, 4, 3), chunk_key_encoding=enc, tags={"keys"})
        b.zarr_array(
            f"keys/{name}_0d",
            np.array(-123456, dtype="<i8"),
            chunk_key_encoding=enc,
            tags={"keys", "zerod"},
        )
        b.zarr_array(
            f"keys/{name}_sharded",
            k2,
            chunks=(1, 2),
            shards=(3, 4),
            chunk_key_encoding=enc,
            tags={"keys", "shard"},
        )

    # missing chunks, 0-d, zero-length
    b.zarr_array(
        "missing/none_written",
        make_data(np.dtype("<i2"), (9, 11), rng),
        chunks=(4, 4),
        fill_value=5,
        region=None,
        tags={"missing"},
    )
    b.zarr_array(
        "missing/some",
        make_data(np.dtype("<f8"), (9, 11), rng),
        chunks=(4, 4),
        fill_value=-1.25,
        region=(slice(0, 4), slice(4, 11)),
        tags={"missing"},
    )
    b.zarr_array(
        "missing/edge_only",
        make_data(np.dtype("<u4"), (9, 11), rng),
        chunks=(4, 4),
        fill_value=3,
        region=(slice(8, 9), slice(8, 11)),
        tags={"missing"},
    )
    b.zarr_array("zerod/value", np.array(2.75, dtype="<f8"), tags={"zerod"})
    b.zarr_array(
        "zerod/missing",
        np.array(0, dtype="<i4"),
        fill_value=-9,
        region=None,
        tags={"zerod", "missing"},
    )
    b.zarr_array(
        "zerod/big",
        np.array(-1.5, dtype="<f8"),
        serializer=BytesCodec(endian="big"),
        tags={"zerod", "big"},
    )
    b.zarr_array(
        "zerod/complex_gzip",
        np.array(1 - 2j, dtype="<c16"),
        compressors=[GzipCodec()],
        tags={"zerod"},
    )
    b.zarr_array("zerod/struct", np.array((1, 2.0), dtype=st), tags={"zerod"})
    b.zarr_array(
        "zerolen/rows",
        None,
        shape=(0, 5),
        dtype="<f4",
        chunks=(2, 2),
        region=None,
        tags={"zerolen"},
    )
    b.zarr_array(
        "zerolen/middle",
        None,
        shape=(3, 0, 2),
        dtype="<i8",
        chunks=(2, 2, 2),
        region=None,
        tags={"zerolen"},
    )

    # groups with attributes, dimension names
    b.group("g1", {"level": 1, "list": [1, "two", None], "float": 0.5})
    b.group("g1/g2", {"level": 2, "uni": "漢字 ß é", "empty": {}})
    b.group("g1/g2/g3", {"level": 3, "nested": {"deep": {"deeper": [True, False]}}})
    b.group("g1/empty_group", {})
    b.zarr_array(
        "g1/g2/g3/leaf",
        make_data(np.dtype("<u2"), (4, 5, 6), rng),
        chunks=(2, 5, 4),
        dimension_names=["t", "y", "x"],
        attributes={"units": "K", "scale": [1.0, 0.5]},
        tags={"dims"},
    )
    b.zarr_array(
        "g1/partial_dims",
        make_data(np.dtype("<f4"), (3, 4), rng),
        chunks=(2, 2),
        dimension_names=[None, "x"],
        tags={"dims"},
    )
    b.zarr_array(
        "g1/attrs_only",
        make_data(np.dtype("<i1"), (5,), rng),
        chunks=(5,),
        attributes={"a": 1, "b": {"c": "d"}},
        tags={"attrs"},
    )

    # conventions (zarr conventions 0.1.0)
    valid_group = {
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
    b.group("conv", {})
    b.group("conv/valid_group", valid_group)
    b.h.group_conventions["conv/valid_group"] = [
        {"uuid": UUID_A, "name": "geo:proj", "version": "0.1.0"},
        {"uuid": UUID_B, "name": "minimal", "version": "1.2.3"},
    ]
    c = b.zarr_array(
        "conv/valid_group/valid_array",
        make_data(np.dtype("<f4"), (4, 4), rng),
        chunks=(2, 2),
        tags={"conventions"},
        attributes={
            "zarr_conventions_version": "0.1.0",
            "zarr_conventions_metadata": {
                UUID_C: {
                    "version": "0.2.0",
                    "name": "multiscales",
                    "configuration": {"levels": [0, 1]},
                }
            },
        },
    )
    c.conventions = [{"uuid": UUID_C, "name": "multiscales", "version": "0.2.0"}]
    malformed = {
        "zarr_conventions_version": "0.1.0",
        "zarr_conventions_metadata": {
            "not-a-uuid": {"version": "0.1.0", "configuration": {}},
            UUID_A: {"name": "no version", "configuration": {}, "bogus": 1},
        },
    }
    b.group("conv/malformed_group", malformed)
    b.h.malformed_conventions.append("conv/malformed_group")
    b.zarr_array(
        "conv/malformed_array",
        make_data(np.dtype("<i2"), (6,), rng),
        chunks=(4,),
        attributes={"zarr_conventions_metadata": "not an object"},
        tags={"conventions_malformed"},
    )
    b.h.malformed_conventions.append("conv/malformed_array")
    b.zarr_array(
        "conv/malformed_entry_array",
        make_data(np.dtype("<u1"), (6,), rng),
        chunks=(4,),
        tags={"conventions_malformed"},
        attributes={
            "zarr_conventions_version": 1,
            "zarr_conventions_metadata": {UUID_B: ["not", "an", "object"]},
        },
    )
    b.h.malformed_conventions.append("conv/malformed_entry_array")
    b.zarr_array(
        "conv/plain",
        make_data(np.dtype("<u1"), (6,), rng),
        chunks=(4,),
        attributes={"zarr": "no conventions"},
        tags={"conventions_none"},
    )
    # things in the store that are not nodes: a directory without zarr.json (final v3 has
    # no implicit groups) holding a valid array, a stray file, a stray empty directory
    if not b.dry:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            orphan = zarr.create_array(
                str(b.root / "orphan_dir" / "deep"),
                name="arr",
                shape=(2,),
                dtype="<u1",
                zarr_format=3,
            )
            orphan[:] = [1, 2]
        assert not (b.root / "orphan_dir" / "zarr.json").exists()
        (b.root / "stray_file.txt").write_text("not zarr")
        (b.root / "stray_empty_dir").mkdir()
        (b.root / "g1" / "notes.json").write_text("{}")

    return b.h


def relayout_shard(raw: bytes, n: int, location: str, gap: bytes = b"\xa5" * 37) -> bytes:
    """The same shard (``n`` inner chunks, index ``bytes`` little + ``crc32c``) with its
    inner chunks in reverse order, ``gap`` bytes before each, and a matching new index."""
    size = 16 * n + 4
    enc = raw[-size:] if location == "end" else raw[:size]
    index = np.frombuffer(enc[:-4], "<u8").reshape(n, 2)
    assert _crc32c(enc[:-4]) == enc[-4:]
    pieces = {
        i: raw[int(o) : int(o) + int(ln)]
        for i, (o, ln) in enumerate(index)
        if not (o == 2**64 - 1 and ln == 2**64 - 1)
    }
    new_index = np.full((n, 2), 2**64 - 1, dtype="<u8")
    body = b""
    base = size if location == "start" else 0
    for i in sorted(pieces, reverse=True):
        body += gap
        new_index[i] = (base + len(body), len(pieces[i]))
        body += pieces[i]
    body += gap
    idx = new_index.tobytes()
    idx += _crc32c(idx)
    return idx + body if location == "start" else body + idx


def _crc32c(raw: bytes) -> bytes:
    import google_crc32c

    return google_crc32c.value(raw).to_bytes(4, "little")


# --------------------------------------------------------------------------- small stores


def build_root_array(root: str | os.PathLike) -> V3Array:
    """A v3 store whose root node is an array (sharded, big endian inner chunks)."""
    data = make_data(np.dtype("<i4"), (9, 10), np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            str(root),
            shape=data.shape,
            dtype=data.dtype,
            chunks=(6, 10),
            zarr_format=3,
            fill_value=-1,
            attributes={"root": True},
            compressors=None,
            serializer=ShardingCodec(
                chunk_shape=(3, 5), codecs=[BytesCodec(endian="big"), GzipCodec(level=1)]
            ),
        )
        arr[:5] = data[:5]
    case = V3Array("", "zarr")
    finish_zarr(Path(root), case)
    return case


def build_consolidated(root: str | os.PathLike) -> dict:
    """A consolidated v3 hierarchy; after consolidation one more array is added on disk
    only. zarr-python (which lists from the consolidated metadata) is the oracle of what is
    listed and of the bytes: ``{path: ("array", bytes) | ("group", attributes)}``."""
    root = Path(root)
    rng = np.random.default_rng(11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(root), mode="w", zarr_format=3, attributes={"c": 1})
        g.create_group("sub", attributes={"s": 2})
        a = g.create_array("sub/a", shape=(6, 7), chunks=(4, 4), dtype="<f4")
        a[:] = make_data(np.dtype("<f4"), (6, 7), rng)
        b = g.create_array(
            "b",
            shape=(5,),
            chunks=(2,),
            dtype="<i2",
            serializer=BytesCodec(endian="big"),
        )
        b[:] = np.arange(5, dtype="<i2")
        c = g.create_array("sub/deep/c", shape=(3,), chunks=(3,), dtype="<u1")
        c[:] = [1, 2, 3]
        zarr.consolidate_metadata(str(root))
        # after consolidation: an array that only exists on disk
        late = zarr.create_array(str(root), name="late", shape=(2,), dtype="<u1", zarr_format=3)
        late[:] = [9, 9]
        g2 = zarr.open_group(str(root), mode="r", zarr_format=3)
        members = {}
        for path, node in g2.members(max_depth=None):
            if isinstance(node, zarr.Array):
                dt = file_dtype(node.dtype, [c.to_dict() for c in node.metadata.codecs])
                members[path] = (
                    "array",
                    np.ascontiguousarray(np.asarray(node[...]).astype(dt)).tobytes(),
                )
            else:
                members[path] = ("group", dict(node.attrs))
    return members


def build_big_shard(root: str | os.PathLike) -> dict:
    """float32 (64, 512, 512) in one 64 MiB shard, inner chunks (1, 512, 512) = 1 MiB,
    blosc-lz4; random data so each inner chunk stays about 1 MiB compressed."""
    shape = (64, 512, 512)
    rng = np.random.default_rng(64)
    data = rng.standard_normal(shape, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            str(root),
            name="big",
            shape=shape,
            dtype="<f4",
            chunks=(1, 512, 512),
            shards=shape,
            zarr_format=3,
            compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)],
        )
        arr[...] = data
    shard = Path(root) / "big" / "c" / "0" / "0" / "0"
    raw = shard.read_bytes()
    n = 64
    index = np.frombuffer(raw[-(16 * n + 4) : -4], dtype="<u8").reshape(n, 2)
    return {
        "path": "big",
        "shard_key": "big/c/0/0/0",
        "shard_size": len(raw),
        "index_nbytes": 16 * n + 4,
        "inner_nbytes": [int(x) for x in index[:, 1]],
        "inner_offsets": [int(x) for x in index[:, 0]],
        "data": data,
        "inner_chunk_bytes": 512 * 512 * 4,
    }


# --------------------------------------------------------------------------- bad v3 input


def build_v3_bad(root: str | os.PathLike | None) -> V3Hierarchy:
    b = V3Builder(root, {"what": "bad v3 input"})
    rng = b.rng
    rootp = b.root
    h = b.h

    b.zarr_array("good/a", make_data(np.dtype("<i4"), (10, 3), rng), chunks=(3, 3))
    b.zarr_array("bad/good_sibling", make_data(np.dtype("<u2"), (9,), rng), chunks=(4,))
    # unknown fields that say must_understand false, empty storage_transformers: shown
    b.zarr_array(
        "bad/must_understand_false",
        make_data(np.dtype("<f4"), (5,), rng),
        chunks=(2,),
        patch=lambda d: d.update({"future_thing": {"must_understand": False, "value": 1}}),
    )
    b.zarr_array(
        "bad/storage_transformers_empty",
        make_data(np.dtype("<u1"), (5,), rng),
        chunks=(2,),
        patch=lambda d: d.update({"storage_transformers": []}),
    )

    def hidden_zarr(path, data, patch, kind="array", **kw):
        h.hidden[path] = kind
        if b.dry:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = zarr.create_array(
                str(rootp), name=path, zarr_format=3, shape=data.shape, dtype=data.dtype, **kw
            )
            arr[...] = data
        if patch is not None:
            patch_doc(rootp, path, patch)

    small = make_data(np.dtype("<i4"), (6,), rng)

    def add_codec(doc):
        doc["codecs"].append({"name": "frobnicate", "configuration": {"level": 3}})

    hidden_zarr("bad/unknown_codec", small, add_codec, chunks=(3,))
    hidden_zarr(
        "bad/unknown_serializer",
        small,
        lambda d: d.update({"codecs": [{"name": "frobnicate_serializer"}]}),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/unknown_array_to_array",
        small,
        lambda d: d["codecs"].insert(0, {"name": "frobnicate_filter"}),
        chunks=(3,),
    )
    h.hidden["bad/vlen_string"] = "array"
    h.hidden["bad/vlen_bytes"] = "array"
    if not b.dry:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = zarr.create_array(
                str(rootp), name="bad/vlen_string", shape=(4,), dtype=str, zarr_format=3
            )
            s[:] = np.array(["a", "bb", "", "dddd"])
            v = zarr.create_array(
                str(rootp),
                name="bad/vlen_bytes",
                shape=(3,),
                dtype=VariableLengthBytes(),
                zarr_format=3,
            )
            v[:] = np.array([b"x", b"yy", b""], dtype=object)
    hidden_zarr(
        "bad/must_understand",
        small,
        lambda d: d.update({"future_thing": {"name": "x", "configuration": {}}}),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/must_understand_true",
        small,
        lambda d: d.update({"future_thing": {"must_understand": True}}),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/must_understand_plain_value",
        small,
        lambda d: d.update({"future_number": 3}),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/storage_transformers",
        small,
        lambda d: d.update(
            {
                "storage_transformers": [
                    {"name": "chunk-manifest-json", "configuration": {"manifest": "m.json"}}
                ]
            }
        ),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/unknown_data_type",
        small,
        lambda d: d.update({"data_type": "float8_e4m3fn"}),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/unknown_chunk_grid",
        small,
        lambda d: d.update(
            {"chunk_grid": {"name": "rectilinear", "configuration": {"chunk_shapes": [[2, 4]]}}}
        ),
        chunks=(3,),
    )
    hidden_zarr(
        "bad/unknown_chunk_key_encoding",
        small,
        lambda d: d.update({"chunk_key_encoding": {"name": "morton"}}),
        chunks=(3,),
    )
    h.hidden["bad/malformed_json"] = "unknown"
    h.hidden["bad/not_an_object"] = "unknown"
    if not b.dry:
        d = rootp / "bad" / "malformed_json"
        d.mkdir(parents=True, exist_ok=True)
        (d / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [')
        d = rootp / "bad" / "not_an_object"
        d.mkdir(parents=True, exist_ok=True)
        (d / "zarr.json").write_text("[3, 4]")
    # a group with an unknown must-understand field: hidden with everything below it
    h.hidden["bad/must_understand_group"] = "group"
    if not b.dry:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zarr.open_group(str(rootp), path="bad/must_understand_group", mode="w", zarr_format=3)
            c = zarr.create_array(
                str(rootp),
                name="bad/must_understand_group/child",
                shape=(2,),
                dtype="<u1",
                zarr_format=3,
            )
            c[:] = [1, 2]
        patch_doc(
            rootp, "bad/must_understand_group", lambda d: d.update({"future_group_thing": {"x": 1}})
        )

    # faults: shown, one shard / inner chunk / chunk broken
    def fault(path, data, breaker, bad_key_suffix, good, bad, **kw):
        if b.dry:
            h.faults[path] = Fault(path, "", b"", [], [])
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = zarr.create_array(
                str(rootp), name=path, zarr_format=3, shape=data.shape, dtype=data.dtype, **kw
            )
            arr[...] = data
        expected, *_ = zarr_oracle(rootp, path)
        key_file = rootp / path / bad_key_suffix
        key_file.write_bytes(breaker(key_file.read_bytes()))
        h.faults[path] = Fault(path, f"{path}/{bad_key_suffix}", expected, good, bad)

    # 1-D <f8, shards of 32768 elements (256 KiB) with inner chunks of 4096 (32 KiB)
    n_shard, n_inner = 32768, 4096
    fdata = smooth_data(np.dtype("<f8"), (3 * n_shard,))
    sb = n_shard * 8  # bytes of the file per shard
    ib = n_inner * 8  # bytes of the file per inner chunk

    def flip_index_crc(raw: bytes) -> bytes:  # index at the end: break its checksum
        return raw[:-4] + bytes(x ^ 0xFF for x in raw[-4:])

    fault(
        "faults/corrupt_shard_index",
        fdata,
        flip_index_crc,
        "c/1",
        good=[(0, sb), (2 * sb, 3 * sb)],
        bad=[(sb, sb + 8), (2 * sb - 16, 2 * sb)],
        chunks=(n_inner,),
        shards=(n_shard,),
        compressors=[ZstdCodec(level=1)],
    )

    def corrupt_inner(raw: bytes) -> bytes:
        n = n_shard // n_inner
        index = np.frombuffer(raw[-(16 * n + 4) : -4], dtype="<u8").reshape(n, 2)
        off, ln = (int(v) for v in index[2])
        junk = bytes(np.random.default_rng(1).integers(0, 256, ln, dtype=np.uint8))
        return raw[:off] + junk + raw[off + ln :]

    fault(
        "faults/corrupt_inner_chunk",
        fdata,
        corrupt_inner,
        "c/0",
        good=[(0, 2 * ib), (3 * ib, sb), (sb, 3 * sb)],
        bad=[(2 * ib, 2 * ib + 8), (3 * ib - 8, 3 * ib)],
        chunks=(n_inner,),
        shards=(n_shard,),
        compressors=[ZstdCodec(level=1)],
    )

    def inner_out_of_range(raw: bytes) -> bytes:
        n = n_shard // n_inner
        body, crc_index = raw[: -(16 * n + 4)], raw[-(16 * n + 4) :]
        index = np.frombuffer(crc_index[:-4], dtype="<u8").reshape(n, 2).copy()
        index[5, 0] = len(raw) + 1000
        enc = index.astype("<u8").tobytes()
        return body + enc + _crc32c(enc)

    fault(
        "faults/inner_out_of_range",
        fdata,
        inner_out_of_range,
        "c/2",
        good=[(0, 2 * sb), (2 * sb, 2 * sb + 5 * ib), (2 * sb + 6 * ib, 3 * sb)],
        bad=[(2 * sb + 5 * ib, 2 * sb + 5 * ib + 8)],
        chunks=(n_inner,),
        shards=(n_shard,),
        compressors=[ZstdCodec(level=1)],
    )

    fault(
        "faults/truncated_shard",
        fdata,
        lambda raw: raw[:100],
        "c/1",
        good=[(0, sb), (2 * sb, 3 * sb)],
        bad=[(sb + 3 * ib, sb + 3 * ib + 8)],
        chunks=(n_inner,),
        shards=(n_shard,),
        compressors=[ZstdCodec(level=1)],
    )

    def flip_byte(raw: bytes) -> bytes:
        i = len(raw) // 2
        return raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1 :]

    fault(
        "faults/corrupt_crc32c_chunk",
        fdata,
        flip_byte,
        "c/1",
        good=[(0, sb), (2 * sb, 3 * sb)],
        bad=[(sb + 100, sb + 108)],
        chunks=(n_shard,),
        compressors=[Crc32cCodec()],
    )
    fault(
        "faults/corrupt_gzip_chunk",
        fdata,
        lambda raw: raw[:10] + bytes(len(raw) - 10),
        "c/1",
        good=[(0, sb), (2 * sb, 3 * sb)],
        bad=[(sb, sb + 8)],
        chunks=(n_shard,),
        compressors=[GzipCodec(level=1)],
    )
    return h


# --------------------------------------------------------------------------- the May 2022 draft

DRAFT_PROTOCOL = "https://purl.org/zarr/spec/protocol/core/3.0"
DRAFT_SPEC_URI = "https://purl.org/zarr/spec/core/3.0"
GZIP_URI = "https://purl.org/zarr/spec/codecs/gzip/1.0"
BLOSC_URI = "https://purl.org/zarr/spec/codecs/blosc/1.0"
ENDIAN_URI = "https://purl.org/zarr/spec/codecs/endian/1.0"


@dataclass
class DraftArraySpec:
    path: str
    data: np.ndarray  # NumPy source (native little endian)
    chunks: tuple[int, ...]
    data_type: str
    fill_json: Any
    fill: Any  # the value a missing chunk reads as (NumPy scalar of data's dtype)
    layout: str = "C"
    big: bool = False
    compressor: str | None = None  # "gzip", "blosc" or None
    separator: str = "/"
    present: Callable[[tuple], bool] = lambda idx: True
    attrs: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # more fields of the array document


def _draft_specs(rng) -> list[DraftArraySpec]:
    i2 = make_data(np.dtype("<i2"), (10, 7), rng)
    f4 = make_data(np.dtype("<f4"), (9, 11), rng)
    f4b = make_data(np.dtype("<f4"), (5, 6, 7), rng)
    u4 = make_data(np.dtype("<u4"), (13, 5), rng)
    f8 = make_data(np.dtype("<f8"), (9, 8), rng)
    return [
        DraftArraySpec(
            "a_gzip", i2, (4, 3), "int16", -1, np.int16(-1), compressor="gzip", attrs={"k": "v"}
        ),
        DraftArraySpec(
            "b_blosc_F",
            f4,
            (4, 5),
            "float32",
            "NaN",
            np.float32("nan"),
            layout="F",
            compressor="blosc",
        ),
        DraftArraySpec(
            "c_big_gzip", u4, (5, 2), "uint32", 7, np.uint32(7), big=True, compressor="gzip"
        ),
        DraftArraySpec(
            "d_big_F_3d",
            f4b,
            (2, 4, 3),
            "float32",
            "0x7fc00001",
            np.frombuffer(bytes.fromhex("7fc00001")[::-1], "<f4")[0],
            layout="F",
            big=True,
            compressor="blosc",
            present=lambda idx: sum(idx) % 4 != 1,
        ),
        DraftArraySpec(
            "e_missing_hex_fill",
            f4,
            (4, 4),
            "float32",
            "0x3fc00000",
            np.float32(1.5),
            present=lambda idx: (idx[0] * 3 + idx[1]) % 2 == 0,
        ),
        DraftArraySpec(
            "f_null_fill",
            i2,
            (3, 3),
            "int16",
            None,
            np.int16(0),
            compressor="gzip",
            present=lambda idx: idx[0] != 1,
        ),
        DraftArraySpec(
            "g_dot_separator",
            u4,
            (4, 2),
            "uint32",
            0,
            np.uint32(0),
            separator=".",
            compressor="blosc",
        ),
        DraftArraySpec(
            "h_uint16_hex",
            make_data(np.dtype("<u2"), (11,), rng),
            (4,),
            "uint16",
            "0xfffe",
            np.uint16(0xFFFE),
            present=lambda idx: idx[0] != 1,
        ),
        DraftArraySpec(
            "i_int8_binary",
            make_data(np.dtype("|i1"), (3, 5), rng),
            (2, 2),
            "int8",
            "0b11111110",
            np.int8(-2),
            present=lambda idx: idx != (1, 1),
        ),
        DraftArraySpec(
            "j_bool",
            make_data(np.dtype("|b1"), (6, 6), rng),
            (4, 4),
            "bool",
            False,
            np.False_,
            layout="F",
            compressor="gzip",
        ),
        DraftArraySpec(
            "k_float64_neg_inf",
            f8,
            (4, 3),
            "float64",
            "-Infinity",
            np.float64("-inf"),
            big=True,
            present=lambda idx: idx[1] != 1,
            layout="F",
        ),
        DraftArraySpec(
            "l_float64_plus_inf",
            f8,
            (5, 5),
            "float64",
            "+Infinity",
            np.float64("inf"),
            present=lambda idx: False,
        ),
        DraftArraySpec(
            "m_complex64",
            make_data(np.dtype("<c8"), (4, 5), rng),
            (3, 3),
            "complex64",
            None,
            np.complex64(0),
            compressor="gzip",
        ),
        DraftArraySpec(
            "implicit/deeper/arr",
            make_data(np.dtype("<i8"), (5, 4), rng),
            (2, 3),
            "int64",
            3,
            np.int64(3),
            compressor="gzip",
            present=lambda idx: idx != (0, 1),
        ),
        DraftArraySpec(
            "explicit/child",
            make_data(np.dtype("<u1"), (7,), rng),
            (3,),
            "uint8",
            255,
            np.uint8(255),
            compressor="blosc",
        ),
        DraftArraySpec(
            "zerod", np.array(-4.25, dtype="<f8"), (), "float64", 0, np.float64(0), big=True
        ),
        DraftArraySpec(
            "zerod_missing",
            np.array(0, dtype="<i4"),
            (),
            "int32",
            77,
            np.int32(77),
            present=lambda idx: False,
        ),
        DraftArraySpec(
            "n_raw_r24",
            rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8).view("V3")[..., 0],
            (2, 3),
            "r24",
            None,
            np.zeros((), "V3")[()],
            compressor="gzip",
            present=lambda idx: idx != (1, 0),
        ),
        DraftArraySpec(
            "o_ignorable_extension",
            make_data(np.dtype("<u2"), (6,), rng),
            (4,),
            "uint16",
            1,
            np.uint16(1),
            extra={
                "extensions": [
                    {
                        "extension": "https://example.org/zarr/ext/ignore-me",
                        "must_understand": False,
                        "configuration": {"a": 1},
                    }
                ]
            },
        ),
    ]


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


def _draft_encode(spec: DraftArraySpec, chunk: np.ndarray) -> bytes:
    arr = chunk.T if spec.layout == "F" else chunk  # F: dimension order reversed
    dt = arr.dtype.newbyteorder(">") if spec.big else arr.dtype.newbyteorder("<")
    raw = np.ascontiguousarray(arr.astype(dt)).tobytes()
    if spec.compressor == "gzip":
        return gzip_module.compress(raw, compresslevel=1)
    if spec.compressor == "blosc":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1).encode(raw)
    return raw


def _draft_doc(spec: DraftArraySpec) -> dict:
    codecs = []
    if spec.big:
        codecs.append({"type": ENDIAN_URI, "configuration": {"endian": "big"}})
    if spec.compressor == "gzip":
        codecs.append({"type": GZIP_URI, "configuration": {"level": 1}})
    elif spec.compressor == "blosc":
        codecs.append(
            {
                "type": BLOSC_URI,
                "configuration": {"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
            }
        )
    return {
        "shape": list(spec.data.shape),
        "data_type": spec.data_type,
        "chunk_grid": {
            "type": "regular",
            "chunk_shape": list(spec.chunks),
            "separator": spec.separator,
        },
        "chunk_memory_layout": spec.layout,
        "fill_value": spec.fill_json,
        "extensions": [],
        "attributes": spec.attrs,
        "codecs": codecs,
        **spec.extra,
    }


def write_draft_array(root: Path, path: str, spec: DraftArraySpec) -> V3Array:
    """One array in the May 2022 layout: meta/<path>.array.json, data/<path>/c<i>/<j>."""
    meta = root / "meta" / (f"{path}.array.json" if path else "array.json")
    meta.parent.mkdir(parents=True, exist_ok=True)
    doc = _draft_doc(spec)
    meta.write_text(json.dumps(doc, indent=2))
    data = spec.data
    expected = np.full(data.shape, spec.fill, dtype=data.dtype)
    data_dir = root / "data" / path if path else root / "data"
    for idx, region in chunk_regions(data.shape, spec.chunks):
        if not spec.present(idx):
            continue
        key = "c" + spec.separator.join(map(str, idx))
        f = data_dir / key
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(_draft_encode(spec, padded_chunk(data, idx, spec.chunks, spec.fill)))
        expected[region] = data[region]
    out_dtype = data.dtype.newbyteorder(">") if spec.big and data.dtype.itemsize > 1 else data.dtype
    case = V3Array(path, "manual", {"draft"})
    case.expected = np.ascontiguousarray(expected.astype(out_dtype)).tobytes()
    case.dtype = out_dtype
    case.shape = data.shape
    case.chunks = tuple(spec.chunks)
    case.doc = doc
    case.fmt = "3-draft"
    return case


def write_draft_entry_point(root: Path, spec_form: bool = False) -> None:
    root.mkdir(parents=True, exist_ok=True)
    if spec_form:  # exactly as the May 2022 text words it
        entry = {
            "zarr_format": DRAFT_SPEC_URI,
            "metadata_encoding": {"type": "json", "metadata_key_suffix": ".json"},
            "extensions": [],
        }
    else:
        entry = {
            "zarr_format": DRAFT_PROTOCOL,
            "metadata_encoding": DRAFT_PROTOCOL,
            "metadata_key_suffix": ".json",
            "extensions": [],
        }
    (root / "zarr.json").write_text(json.dumps(entry, indent=2))


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
    rng = np.random.default_rng(2022)
    specs = _draft_specs(rng)
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
    rootp = Path(root)
    write_draft_entry_point(rootp, spec_form)
    (rootp / "meta").mkdir(parents=True, exist_ok=True)
    if root_doc:
        (rootp / "meta" / "group.json").write_text(json.dumps({"attributes": DRAFT_ROOT_ATTRS}))
    else:
        h.groups[""] = {}
    (rootp / "meta" / "explicit.group.json").write_text(
        json.dumps({"attributes": DRAFT_GROUP_ATTRS, "extensions": []})
    )
    for s in specs:
        h.arrays[s.path] = write_draft_array(rootp, s.path, s)
    for name, extra in DRAFT_HIDDEN.items():
        spec = DraftArraySpec(
            name, np.arange(4, dtype="<i2"), (2,), "int16", 0, np.int16(0), extra=extra
        )
        write_draft_array(rootp, name, spec)
        h.hidden[name] = "array"
    return h


def build_draft_root_array(root: str | os.PathLike) -> V3Array:
    """A May 2022 draft store whose root is an array: meta/array.json, data/c0/0."""
    rootp = Path(root)
    write_draft_entry_point(rootp)
    data = make_data(np.dtype("<i4"), (7, 6), np.random.default_rng(9))
    spec = DraftArraySpec(
        "",
        data,
        (3, 4),
        "int32",
        0,
        np.int32(0),
        big=True,
        compressor="gzip",
        present=lambda idx: idx != (2, 1),
    )
    return write_draft_array(rootp, "", spec)


# --------------------------------------------------------------------------- assertions


def getxattr_json(path: str | os.PathLike, name: str) -> Any:
    return json.loads(os.getxattr(path, name).decode("utf-8"))


def has_xattr(path: str | os.PathLike, name: str) -> bool:
    try:
        os.getxattr(path, name)
    except OSError as e:
        import errno

        if e.errno == errno.ENODATA:
            return False
        raise
    return True


def v3_xattr_problems(path: str | os.PathLike, case: V3Array) -> list[str]:
    """Every documented ``user.zarr.*`` attribute of an array file against ``case``."""
    errors: list[str] = []

    def get(name):
        try:
            return os.getxattr(path, name).decode("utf-8")
        except OSError as e:
            errors.append(f"{name}: {e}")
            return None

    def get_json(name):
        value = json_xattr(get, name, errors)
        return None if value is MISSING else value

    label = get("user.zarr.dtype")
    if label is not None:
        why = dtype_label_matches(label, case.dtype)
        if why:
            errors.append(why)
    for name, want in (
        ("user.zarr.shape", list(case.shape)),
        ("user.zarr.chunks", list(case.chunks)),
        ("user.zarr.attributes", case.attributes),
    ):
        value = get_json(name)
        if value is not None and value != want:
            errors.append(f"{name} {value!r} != {want!r}")
    if case.shards is not None:
        value = get_json("user.zarr.shards")
        if value is not None and value != list(case.shards):
            errors.append(f"user.zarr.shards {value!r} != {list(case.shards)!r}")
    elif has_xattr(path, "user.zarr.shards"):
        errors.append("user.zarr.shards present on an array that is not sharded")
    if case.dimension_names is not None:
        value = get_json("user.zarr.dimension_names")
        if value is not None and value != case.dimension_names:
            errors.append(f"user.zarr.dimension_names {value!r} != {case.dimension_names!r}")
    elif has_xattr(path, "user.zarr.dimension_names"):
        errors.append("user.zarr.dimension_names present although none are set")
    value = json_xattr(get, "user.zarr.fill_value", errors)
    if value is not MISSING:
        want = case.fill_json
        same = value == want and (
            type(value) is type(want)
            or (
                isinstance(want, int | float)
                and isinstance(value, int | float)
                and not isinstance(value, bool)
                and not isinstance(want, bool)
            )
        )
        if not same:
            errors.append(f"user.zarr.fill_value {value!r} != stored {want!r}")
    fmt = get("user.zarr.format")
    if fmt is not None and fmt.strip() != case.fmt:
        errors.append(f"user.zarr.format {fmt!r} != {case.fmt!r}")
    value = get_json("user.zarr.codecs")
    if value is not None and case.fmt == "3":
        if not isinstance(value, dict) or not isinstance(value.get("codecs"), list):
            errors.append(f"user.zarr.codecs {value!r} is not {{'codecs': [...]}}")
        else:
            top = value["codecs"]
            if not all(isinstance(c, dict) and set(c) == {"name", "configuration"} for c in top):
                errors.append(f"user.zarr.codecs {top!r}: not name/configuration objects")
            elif normalize_codecs(top) != normalize_codecs(case.doc["codecs"]):
                errors.append(f"user.zarr.codecs {top!r} != stored {case.doc['codecs']!r}")
    elif value is not None and not isinstance(value, dict):
        errors.append(f"user.zarr.codecs {value!r} is not a JSON object")
    if case.conventions is not None:
        value = get_json("user.zarr.conventions")
        if value is not None and sorted(value, key=lambda c: c.get("uuid", "")) != sorted(
            case.conventions, key=lambda c: c["uuid"]
        ):
            errors.append(f"user.zarr.conventions {value!r} != {case.conventions!r}")
    return errors
