"""Write Zarr v2 test hierarchies and compute the bytes a mount must show.

The oracle is never zarrmount: arrays written by zarr-python are read back with
zarr-python (``np.ascontiguousarray(zarr.open_array(...)[...]).tobytes()``). Cases that
zarr-python 3.1 cannot write (structured dtypes with subarray or nested fields) are written
here by hand with numcodecs and json, and their oracle is NumPy on the source data.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numcodecs
import numpy as np
import zarr

DEFAULT = object()  # "let zarr-python choose" (its default compressor is zstd)


# --------------------------------------------------------------------------- data makers


_UNICODE_POOL = np.array(
    [ord(c) for c in "abcXYZ019 _-é漢字ßΩж"] + [0x1F600, 0x10348, 0xFFFD, 0x7F, 0x1],
    dtype=np.uint32,
)


def make_data(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Deterministic, varied values of ``dtype`` (with NaN/Inf/NaT sprinkled in)."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype.fields is not None:
        out = np.zeros(shape, dtype=dtype)
        for name in dtype.names:
            fdt = dtype.fields[name][0]
            sub = make_data(fdt.base, shape + fdt.shape, rng)
            out[name] = sub
        return out
    kind = dtype.kind
    if kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if kind in "iu":
        info = np.iinfo(dtype)
        vals = rng.integers(
            info.min, info.max, size=shape, endpoint=True, dtype=dtype.newbyteorder("=")
        )
        return vals.astype(dtype)
    if kind == "f":
        vals = (rng.standard_normal(shape) * 1000).astype(dtype)
        flat = vals.reshape(-1)
        specials = [np.nan, np.inf, -np.inf, -0.0]
        for i, s in enumerate(specials):
            if i * 7 + 3 < n:
                flat[i * 7 + 3] = s
        return vals
    if kind == "c":
        re = rng.standard_normal(shape) * 100
        im = rng.standard_normal(shape) * 100
        vals = (re + 1j * im).astype(dtype)
        if n > 5:
            vals.reshape(-1)[5] = complex(np.nan, np.inf)
        return vals
    if kind in "mM":
        ints = rng.integers(-(2**40), 2**40, size=shape, dtype=np.int64)
        if n > 4:
            ints.reshape(-1)[4] = np.iinfo(np.int64).min  # NaT
        return ints.view(dtype.newbyteorder("=")).astype(dtype)
    if kind == "S":
        raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype=np.uint8)
        # some shorter strings (trailing NULs) and one empty
        for i in range(0, n, 3):
            raw[i, rng.integers(0, dtype.itemsize + 1) :] = 0
        if n:
            raw[0, :] = 0
        return raw.view(dtype).reshape(shape)
    if kind == "U":
        width = dtype.itemsize // 4
        cps = rng.choice(_UNICODE_POOL, size=(n, width))
        for i in range(0, n, 4):
            cps[i, rng.integers(0, width + 1) :] = 0
        return cps.astype("<u4").view(f"<U{width}").astype(dtype).reshape(shape)
    if kind == "V":
        raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype=np.uint8)
        return raw.view(dtype).reshape(shape)
    raise ValueError(f"no data maker for {dtype}")


def smooth_data(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Compressible values (so codecs actually do something)."""
    idx = np.indices(shape).sum(axis=0) if shape else np.array(0)
    return (np.sin(idx / 7.0) * 1000 + idx).astype(dtype)


# --------------------------------------------------------------------------- metadata


def dtype_to_json(dtype: np.dtype):
    """The .zarray ``dtype`` value of a NumPy dtype (descr lists for structured)."""
    dtype = np.dtype(dtype)
    if dtype.fields is None:
        return dtype.str

    def conv(descr):
        out = []
        for item in descr:
            name, inner, *rest = item
            entry = [name, conv(inner) if isinstance(inner, list) else inner]
            if rest:
                entry.append(list(rest[0]))
            out.append(entry)
        return out

    return conv(dtype.descr)


def dtype_from_json(value) -> np.dtype:
    """The inverse, as the contract says: inner lists become tuples, then ``np.dtype``."""
    if isinstance(value, str):
        return np.dtype(value)

    def conv(descr):
        fields = []
        for item in descr:
            name, inner, *rest = item
            inner = conv(inner) if isinstance(inner, list) else inner
            fields.append((name, inner, tuple(rest[0])) if rest else (name, inner))
        return fields

    return np.dtype(conv(value))


def chunk_grid(shape, chunks):
    return [range(math.ceil(s / c)) if c else range(0) for s, c in zip(shape, chunks, strict=True)]


def chunk_key(idx: tuple[int, ...], sep: str) -> str:
    return sep.join(map(str, idx)) if idx else "0"


def normalize_codec(cfg):
    """A codec config as numcodecs itself writes it (to compare configs semantically)."""
    if cfg is None:
        return None
    return numcodecs.get_codec(dict(cfg)).get_config()


# --------------------------------------------------------------------------- cases


@dataclass
class ArrayCase:
    path: str  # node path inside the hierarchy ("" for a root array)
    root: Path  # the store directory
    origin: str  # "zarr" or "manual"
    tags: set[str] = field(default_factory=set)
    expected: bytes = b""
    dtype: np.dtype | None = None
    shape: tuple[int, ...] = ()
    chunks: tuple[int, ...] = ()
    zarray: dict = field(default_factory=dict)
    zattrs: dict = field(default_factory=dict)
    # For fill_value null with missing chunks the contents there are undefined: only these
    # (start, stop) byte ranges of the file are checked.
    defined_ranges: list[tuple[int, int]] | None = None

    @property
    def nbytes(self) -> int:
        return len(self.expected)

    @property
    def id(self) -> str:
        return self.path or "<root>"


@dataclass
class GroupCase:
    path: str
    zattrs: dict


@dataclass
class Hierarchy:
    root: Path
    arrays: dict[str, ArrayCase] = field(default_factory=dict)
    groups: dict[str, GroupCase] = field(default_factory=dict)

    def by_tag(self, tag: str) -> list[ArrayCase]:
        return [a for a in self.arrays.values() if tag in a.tags]


class Builder:
    """Collects arrays and groups for one store directory, then computes the oracles."""

    def __init__(self, root: str | os.PathLike | None, root_attrs: dict | None = None):
        # root=None: a dry run that only records the node paths and tags (for parametrizing
        # tests at collection time without writing anything).
        self.dry = root is None
        self.root = Path(root) if root is not None else Path("/nonexistent-dry-run")
        self.h = Hierarchy(self.root)
        self.rng = np.random.default_rng(20240611)
        if not self.dry:
            g = zarr.open_group(str(self.root), mode="w", zarr_format=2)
            if root_attrs:
                g.attrs.update(root_attrs)
        self.h.groups[""] = GroupCase("", {})
        self._manual: dict[str, np.ndarray] = {}

    # -- groups --------------------------------------------------------------------------

    def group(self, path: str, attrs: dict | None = None) -> None:
        if self.dry:
            self._register_parents(path)
            return
        g = zarr.open_group(str(self.root), path=path, mode="a", zarr_format=2)
        if attrs:
            g.attrs.update(attrs)
        self._register_parents(path)

    def bare_group(self, path: str) -> None:
        """A group with only ``.zgroup`` (no .zattrs at all)."""
        if self.dry:
            self._register_parents(path)
            return
        d = self.root / path
        d.mkdir(parents=True, exist_ok=True)
        (d / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
        self._register_parents(path)

    def _register_parents(self, path: str) -> None:
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            self.h.groups.setdefault(p, GroupCase(p, {}))

    def _parent_groups(self, path: str) -> None:
        parent = path.rpartition("/")[0]
        if parent and parent not in self.h.groups:
            self.group(parent)

    # -- arrays written by zarr-python ---------------------------------------------------

    def zarr_array(
        self,
        path: str,
        data: np.ndarray,
        *,
        chunks: tuple[int, ...],
        region: tuple | None | str = "all",
        fill_value=DEFAULT,
        order: str = "C",
        sep: str = ".",
        filters: list | None = None,
        compressor=DEFAULT,
        attrs: dict | None = None,
        tags: set[str] | frozenset = frozenset(),
    ) -> ArrayCase:
        """Create ``path`` with zarr-python and write ``data[region]`` (``None``: nothing)."""
        self._parent_groups(path)
        if self.dry:
            case = ArrayCase(path, self.root, "zarr", set(tags))
            self.h.arrays[path] = case
            return case
        kw: dict = dict(
            name=path,
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            zarr_format=2,
            order=order,
            chunk_key_encoding={"name": "v2", "separator": sep},
        )
        if fill_value is not DEFAULT:
            kw["fill_value"] = fill_value
        if filters is not None:
            kw["filters"] = filters
        if compressor is not DEFAULT:
            kw["compressors"] = compressor
        if attrs:
            kw["attributes"] = attrs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = zarr.create_array(str(self.root), **kw)
            if region == "all":
                arr[...] = data
            elif region is not None:
                arr[region] = data[region]
        case = ArrayCase(path, self.root, "zarr", set(tags))
        self.h.arrays[path] = case
        return case

    # -- arrays written by hand ----------------------------------------------------------

    def manual_array(
        self,
        path: str,
        data: np.ndarray,
        *,
        chunks: tuple[int, ...],
        fill_value=None,
        order: str = "C",
        sep: str = ".",
        filters: list | None = None,
        compressor: numcodecs.abc.Codec | None = None,
        present: Callable[[tuple[int, ...]], bool] | None = None,
        attrs: dict | None = None,
        tags: set[str] | frozenset = frozenset(),
        fill_json=DEFAULT,
        zarray_overrides: dict | None = None,
        omit_keys: tuple[str, ...] = (),
    ) -> ArrayCase:
        """Write .zarray and chunk files directly; the oracle is ``data`` with fill where
        a chunk is absent (``present(idx)`` false). ``zarray_overrides``/``omit_keys`` write
        legacy spellings of the metadata (the chunks are still written as described)."""
        if path:
            self._parent_groups(path)
        if self.dry:
            case = ArrayCase(path, self.root, "manual", set(tags))
            self.h.arrays[path] = case
            return case
        d = self.root / path if path else self.root
        d.mkdir(parents=True, exist_ok=True)
        dtype = data.dtype
        shape = data.shape
        if fill_json is DEFAULT:
            fill_json = _fill_to_json(fill_value, dtype)
        zarray = {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": list(chunks),
            "dtype": dtype_to_json(dtype),
            "compressor": compressor.get_config() if compressor is not None else None,
            "fill_value": fill_json,
            "order": order,
            "filters": [f.get_config() for f in filters] if filters else None,
            "dimension_separator": sep,
        }
        zarray.update(zarray_overrides or {})
        for k in omit_keys:
            zarray.pop(k, None)
        (d / ".zarray").write_text(json.dumps(zarray, indent=2))
        if attrs is not None:
            (d / ".zattrs").write_text(json.dumps(attrs))
        expected = np.empty(shape, dtype=dtype)
        if fill_value is None:
            expected[...] = np.zeros((), dtype=dtype)
        else:
            expected[...] = fill_value
        for idx in itertools.product(*chunk_grid(shape, chunks)):
            if present is not None and not present(idx):
                continue
            sl = tuple(
                slice(i * c, min((i + 1) * c, s))
                for i, c, s in zip(idx, chunks, shape, strict=True)
            )
            block = data[sl]
            expected[sl] = block
            chunk = np.empty(chunks, dtype=dtype)
            chunk[...] = np.zeros((), dtype=dtype) if fill_value is None else fill_value
            chunk[tuple(slice(0, n) for n in block.shape)] = block
            raw = chunk.tobytes(order=order)
            for f in filters or []:
                raw = f.encode(raw)
            if compressor is not None:
                raw = compressor.encode(raw)
            key = d / chunk_key(idx, sep)
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(bytes(raw))
        case = ArrayCase(path, self.root, "manual", set(tags))
        self._manual[path] = expected
        self.h.arrays[path] = case
        return case

    # -- finish: read metadata and compute oracles ---------------------------------------

    def finish(self) -> Hierarchy:
        if self.dry:
            return self.h
        for path, group in self.h.groups.items():
            group.zattrs = _read_json(self.root / path / ".zattrs", {})
        for path, case in self.h.arrays.items():
            d = self.root / path if path else self.root
            case.zarray = _read_json(d / ".zarray", None)
            case.zattrs = _read_json(d / ".zattrs", {})
            stored = dtype_from_json(case.zarray["dtype"])
            case.dtype = stored
            case.shape = tuple(case.zarray["shape"])
            case.chunks = tuple(case.zarray["chunks"])
            if case.origin == "zarr":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    za = zarr.open_array(str(self.root), path=path, mode="r", zarr_format=2)
                    values = np.asarray(za[...])
                if values.dtype != stored:
                    # zarr-python may hand back native byte order: the file keeps the stored one
                    values = values.astype(stored)
                case.expected = np.ascontiguousarray(values).tobytes()
            else:
                case.expected = np.ascontiguousarray(self._manual[path]).tobytes()
            assert len(case.expected) == math.prod(case.shape) * stored.itemsize, path
        return self.h


def _read_json(p: Path, default):
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        return default


def _fill_to_json(fill, dtype: np.dtype):
    if fill is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind in "SV" or dtype.fields is not None:
        return base64.standard_b64encode(np.array(fill, dtype=dtype).tobytes()).decode()
    if dtype.kind == "f":
        f = float(fill)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if dtype.kind in "iu":
        return int(fill)
    if dtype.kind == "b":
        return bool(fill)
    raise ValueError(f"no manual fill encoding for {dtype}")


# --------------------------------------------------------------------------- main hierarchy

# Every simple dtype the contract names. Keys become array names under dtypes/.
SIMPLE_DTYPES = {
    "b1": "|b1",
    "i1": "|i1",
    "u1": "|u1",
    **{
        f"{bo_name}_{k}{n}": f"{bo}{k}{n}"
        for bo, bo_name in (("<", "le"), (">", "be"))
        for k, sizes in (("i", (2, 4, 8)), ("u", (2, 4, 8)), ("f", (2, 4, 8)), ("c", (8, 16)))
        for n in sizes
    },
    "le_M8ns": "<M8[ns]",
    "be_M8ns": ">M8[ns]",
    "le_M8D": "<M8[D]",
    "be_M8D": ">M8[D]",
    "le_m8s": "<m8[s]",
    "be_m8s": ">m8[s]",
    "S1": "|S1",
    "S5": "|S5",
    "le_U1": "<U1",
    "le_U3": "<U3",
    "be_U3": ">U3",
    "V1": "|V1",
    "V7": "|V7",
    "struct_flat": [("a", "<i4"), ("b", ">f8"), ("c", "|S3"), ("d", "|b1")],
}

STRUCT_SUB = np.dtype([("a", "<i4"), ("b", ">f8", (2,)), ("c", "|u1", (2, 3))])
STRUCT_NESTED = np.dtype([("foo", "<f4"), ("bar", [("baz", "<f4"), ("qux", ">i4")])])
STRUCT_DEEP = np.dtype(
    [("p", "<u2", (2, 2)), ("q", [("r", "|u1"), ("s", ">f4", (3,)), ("t", [("u", "<i8")])])]
)

COMPRESSORS = {
    "none": None,
    "blosc_lz4_noshuffle": numcodecs.Blosc(
        cname="lz4", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE
    ),
    "blosc_lz4_shuffle": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc_lz4_bitshuffle": numcodecs.Blosc(
        cname="lz4", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE
    ),
    "blosc_zstd_shuffle": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc_blosclz_bitshuffle": numcodecs.Blosc(
        cname="blosclz", clevel=9, shuffle=numcodecs.Blosc.BITSHUFFLE
    ),
    "blosc_zlib_noshuffle": numcodecs.Blosc(
        cname="zlib", clevel=1, shuffle=numcodecs.Blosc.NOSHUFFLE
    ),
    "zstd": numcodecs.Zstd(level=5),
    "zlib": numcodecs.Zlib(level=6),
    "gzip": numcodecs.GZip(level=5),
    "bz2": numcodecs.BZ2(level=9),
    "lzma": numcodecs.LZMA(),
    "lz4": numcodecs.LZ4(acceleration=1),
}

# Arrays with small odd chunks, edges and missing chunks: the random-read property test uses
# them. name -> kwargs
MANY = 200
MULTI = ("multi/m1", "multi/m2", "multi/m3", "multi/m4", "multi/m5")


def build_main(root: str | os.PathLike) -> Hierarchy:
    b = Builder(root, {"title": "zarrmount integration hierarchy", "n": 1, "nested": {"k": [1]}})
    rng = b.rng

    # dtypes/: every dtype, full write, edge chunks, default compressor (zstd)
    b.group("dtypes", {"what": "every dtype"})
    for name, dt in SIMPLE_DTYPES.items():
        dt = np.dtype(dt)
        b.zarr_array(f"dtypes/{name}", make_data(dt, (7, 5), rng), chunks=(3, 2), tags={"dtype"})
    # structured dtypes zarr-python 3.1 cannot write correctly: by hand
    b.manual_array(
        "dtypes/struct_sub",
        make_data(STRUCT_SUB, (7, 5), rng),
        chunks=(3, 2),
        compressor=numcodecs.Zlib(level=1),
        fill_value=np.zeros((), STRUCT_SUB)[()],
        attrs={"written_by": "hand"},
        tags={"dtype", "manual"},
    )
    b.manual_array(
        "dtypes/struct_nested",
        make_data(STRUCT_NESTED, (9,), rng),
        chunks=(4,),
        compressor=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
        fill_value=None,
        tags={"dtype", "manual"},
    )
    b.manual_array(
        "dtypes/struct_deep_F",
        make_data(STRUCT_DEEP, (5, 4), rng),
        chunks=(2, 3),
        order="F",
        sep="/",
        compressor=numcodecs.Zstd(level=1),
        tags={"dtype", "manual", "order_F"},
        fill_value=np.array((((1, 2), (3, 4)), (7, (1.5, -2.0, 3.0), (-9,))), STRUCT_DEEP)[()],
        present=lambda idx: idx != (1, 1),
    )

    # fill/: missing chunks with every fill-value form. Only the chunk (0, 0) region is written.
    b.group("fill")
    fills = {
        "i4_42": ("<i4", 42),
        "be_i2_neg7": (">i2", -7),
        "be_u8_big": (">u8", 2**64 - 5),
        "u1_255": ("|u1", 255),
        "f8_1p5": ("<f8", 1.5),
        "f8_nan": ("<f8", np.nan),
        "be_f8_nan": (">f8", np.nan),
        "be_f4_inf": (">f4", np.inf),
        "f2_neginf": ("<f2", -np.inf),
        "be_f2_neg0": (">f2", -0.0),
        "b1_true": ("|b1", True),
        "c16_fill": ("<c16", complex(1.5, -2.0)),
        "be_c8_nan": (">c8", complex(np.nan, 0)),
        "M8ns_nat": ("<M8[ns]", DEFAULT),
        "M8D_date": ("<M8[D]", np.datetime64("2001-02-03", "D")),
        "be_m8s_hour": (">m8[s]", np.timedelta64(3600, "s")),
        "S4_b64": ("|S4", b"ab\x00z"),
        "U3_xy": ("<U3", "xy"),
        "be_U2_e": (">U2", "é"),
        "V3_b64": ("|V3", b"\x01\x02\x03"),
    }
    for name, (dt, fv) in fills.items():
        dt = np.dtype(dt)
        data = make_data(dt, (7, 5), rng)
        b.zarr_array(
            f"fill/{name}",
            data,
            chunks=(3, 2),
            region=(slice(0, 3), slice(0, 2)),
            fill_value=fv,
            tags={"fill"},
        )
    sdt = np.dtype(SIMPLE_DTYPES["struct_flat"])
    b.zarr_array(
        "fill/struct_b64",
        make_data(sdt, (7, 5), rng),
        chunks=(3, 2),
        region=(slice(0, 3), slice(0, 2)),
        fill_value=np.array((-1, 2.5, b"zz", True), sdt)[()],
        tags={"fill"},
    )
    b.zarr_array(
        "fill/nothing_written_f8",
        make_data(np.dtype("<f8"), (4, 3), rng),
        chunks=(2, 2),
        region=None,
        fill_value=-3.25,
        tags={"fill"},
    )
    # fill_value null: fully written (missing chunks would be undefined), plus one partial
    b.zarr_array(
        "fill/null_i4_full",
        make_data(np.dtype("<i4"), (7, 5), rng),
        chunks=(3, 2),
        fill_value=None,
        tags={"fill"},
    )
    b.zarr_array(
        "fill/null_f8_full",
        make_data(np.dtype(">f8"), (7, 5), rng),
        chunks=(3, 2),
        fill_value=None,
        tags={"fill"},
    )
    null_partial = b.zarr_array(
        "fill/null_f8_partial",
        make_data(np.dtype("<f8"), (4, 6), rng),
        chunks=(2, 6),
        region=(slice(0, 2), slice(None)),
        fill_value=None,
        tags={"fill", "null_partial"},
    )
    null_partial.defined_ranges = [(0, 2 * 6 * 8)]  # rows 0-1; rows 2-3 are undefined

    # order/: Fortran-order chunks
    b.group("order")
    b.zarr_array(
        "order/F_f8_3d",
        make_data(np.dtype("<f8"), (5, 6, 7), rng),
        chunks=(2, 4, 3),
        order="F",
        tags={"order_F"},
    )
    b.zarr_array(
        "order/F_be_i2_partial",
        make_data(np.dtype(">i2"), (9, 7), rng),
        chunks=(4, 3),
        order="F",
        region=(slice(0, 5), slice(2, 7)),
        fill_value=9,
        tags={"order_F"},
    )
    b.zarr_array(
        "order/F_u1_slash",
        make_data(np.dtype("|u1"), (6, 5, 4), rng),
        chunks=(4, 2, 3),
        order="F",
        sep="/",
        compressor=numcodecs.Zlib(1),
        tags={"order_F", "slash"},
    )
    b.zarr_array(
        "order/F_struct", make_data(sdt, (5, 3), rng), chunks=(2, 2), order="F", tags={"order_F"}
    )
    b.zarr_array(
        "order/F_c16_1d",
        make_data(np.dtype(">c16"), (11,), rng),
        chunks=(4,),
        order="F",
        tags={"order_F"},
    )
    b.zarr_array(
        "order/C_ref_3d", make_data(np.dtype("<f8"), (5, 6, 7), rng), chunks=(2, 4, 3), order="C"
    )

    # sep/: dimension_separator "/"
    b.group("sep")
    b.zarr_array(
        "sep/slash_2d",
        make_data(np.dtype("<i8"), (10, 9), rng),
        chunks=(3, 4),
        sep="/",
        tags={"slash"},
    )
    b.zarr_array(
        "sep/slash_3d_partial",
        make_data(np.dtype(">f4"), (6, 7, 8), rng),
        chunks=(4, 3, 5),
        sep="/",
        region=(slice(0, 4), slice(0, 3), slice(0, 5)),
        fill_value=np.nan,
        tags={"slash"},
    )
    b.zarr_array(
        "sep/slash_1d", make_data(np.dtype("<u2"), (17,), rng), chunks=(5,), sep="/", tags={"slash"}
    )
    b.zarr_array("sep/dot_2d", make_data(np.dtype("<i8"), (10, 9), rng), chunks=(3, 4), sep=".")

    # edge/: shapes that are not multiples of the chunks
    b.group("edge")
    b.zarr_array("edge/1d", make_data(np.dtype("<i4"), (10,), rng), chunks=(3,))
    b.zarr_array("edge/chunk_bigger", make_data(np.dtype("<f8"), (2, 3), rng), chunks=(5, 5))
    b.zarr_array("edge/3d", make_data(np.dtype(">u4"), (9, 8, 7), rng), chunks=(4, 3, 5))
    b.zarr_array(
        "edge/4d_partial",
        make_data(np.dtype("<i2"), (5, 4, 3, 6), rng),
        chunks=(2, 3, 2, 4),
        region=(slice(1, 4), slice(None), slice(0, 1), slice(2, 6)),
        fill_value=-1,
    )
    b.zarr_array("edge/unit_chunks", make_data(np.dtype("<f4"), (3, 4), rng), chunks=(1, 1))

    # special/: 0-d and zero-length
    b.group("special")
    b.zarr_array("special/zerod", np.array(123456789, dtype="<i8"), chunks=(), tags={"zerod"})
    b.zarr_array("special/zerod_be_f8", np.array(-2.5, dtype=">f8"), chunks=(), tags={"zerod"})
    b.zarr_array(
        "special/zerod_missing",
        np.array(0, dtype="<f4"),
        chunks=(),
        region=None,
        fill_value=7.5,
        tags={"zerod"},
    )
    b.zarr_array("special/zerolen", np.zeros((0, 5), dtype="<i4"), chunks=(3, 2), tags={"empty"})
    b.zarr_array(
        "special/zerolen_mid", np.zeros((4, 0, 3), dtype=">f8"), chunks=(2, 2, 2), tags={"empty"}
    )
    b.zarr_array("special/zerolen_1d", np.zeros((0,), dtype="|S3"), chunks=(4,), tags={"empty"})

    # filters/
    b.group("filters")
    ints = np.cumsum(rng.integers(-5, 6, size=(20, 13)), axis=1).astype("<i4")
    floats = smooth_data(np.dtype("<f8"), (20, 13)) / 7.0
    b.zarr_array(
        "filters/delta_i4",
        ints,
        chunks=(6, 5),
        filters=[numcodecs.Delta(dtype="<i4")],
        compressor=numcodecs.Zlib(1),
        tags={"filter"},
    )
    b.zarr_array(
        "filters/delta_be_i8_astype",
        ints.astype(">i8"),
        chunks=(6, 5),
        filters=[numcodecs.Delta(dtype=">i8", astype=">i2")],
        compressor=None,
        tags={"filter"},
    )
    b.zarr_array(
        "filters/fixedscaleoffset",
        floats,
        chunks=(6, 5),
        filters=[numcodecs.FixedScaleOffset(offset=10, scale=100, dtype="<f8", astype="<i4")],
        compressor=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
        tags={"filter"},
    )
    b.zarr_array(
        "filters/quantize",
        floats,
        chunks=(6, 5),
        filters=[numcodecs.Quantize(digits=3, dtype="<f8")],
        compressor=numcodecs.Zstd(3),
        tags={"filter"},
    )
    b.zarr_array(
        "filters/shuffle",
        floats,
        chunks=(6, 5),
        filters=[numcodecs.Shuffle(elementsize=8)],
        compressor=numcodecs.Zlib(5),
        tags={"filter"},
    )
    b.zarr_array(
        "filters/chain_partial",
        ints,
        chunks=(6, 5),
        filters=[numcodecs.Delta(dtype="<i4"), numcodecs.Shuffle(elementsize=4)],
        compressor=numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
        region=(slice(0, 12), slice(0, 10)),
        fill_value=5,
        tags={"filter"},
    )

    # compressors/
    b.group("compressors", {"note": "one array per compressor"})
    cdata = smooth_data(np.dtype("<f8"), (30, 20))
    cdata[::5, ::3] = make_data(np.dtype("<f8"), cdata[::5, ::3].shape, rng)
    for name, comp in COMPRESSORS.items():
        b.zarr_array(
            f"compressors/{name}", cdata, chunks=(7, 6), compressor=comp, tags={"compressor"}
        )

    def smooth_lz4_shuffled(path, dtype, shape, chunks, tag):
        """Smooth data under blosc lz4 with byte shuffle: a compressor that really shrinks
        it, as it does real data."""
        b.zarr_array(
            path,
            smooth_data(np.dtype(dtype), shape),
            chunks=chunks,
            compressor=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
            tags={tag},
        )

    smooth_lz4_shuffled("compressors/blosc_shuffle_be_i2", ">i2", (25, 9), (8, 4), "compressor")

    # more filters numcodecs knows (lossy ones: the oracle is zarr-python's decoded values)
    b.zarr_array(
        "filters/astype",
        floats,
        chunks=(6, 5),
        filters=[numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")],
        tags={"filter"},
    )
    b.zarr_array(
        "filters/packbits",
        make_data(np.dtype("|b1"), (20, 13), rng),
        chunks=(6, 5),
        filters=[numcodecs.PackBits()],
        tags={"filter"},
    )
    b.zarr_array(
        "filters/bitround",
        floats.astype("<f4"),
        chunks=(6, 5),
        filters=[numcodecs.BitRound(keepbits=6)],
        tags={"filter"},
    )

    # legacy/: spellings older writers (zarr-python 2) produced, written by hand
    b.group("legacy")
    b.manual_array(
        "legacy/no_dimension_separator",
        make_data(np.dtype("<i4"), (7, 5), rng),
        chunks=(3, 2),
        fill_value=0,
        compressor=numcodecs.Zlib(1),
        omit_keys=("dimension_separator",),
        tags={"manual", "legacy"},
    )
    b.manual_array(
        "legacy/int_fill_for_float",
        make_data(np.dtype("<f4"), (7, 5), rng),
        chunks=(3, 2),
        fill_value=3.0,
        fill_json=3,
        compressor=numcodecs.Zlib(1),
        present=lambda idx: idx == (0, 0),
        tags={"manual", "legacy"},
    )
    b.manual_array(
        "legacy/filters_empty_list",
        make_data(np.dtype(">u2"), (7, 5), rng),
        chunks=(3, 2),
        fill_value=0,
        compressor=None,
        zarray_overrides={"filters": []},
        tags={"manual", "legacy"},
    )
    sudt = np.dtype([("name", "<U4"), ("v", ">f4")])
    b.zarr_array(
        "dtypes/struct_unicode",
        make_data(sudt, (6,), rng),
        chunks=(4,),
        region=(slice(0, 3),),
        fill_value=np.array(("ab", 1.5), sudt)[()],
        tags={"dtype"},
    )

    # many/: a directory with more entries than one readdir reply holds
    b.group("many")
    for i in range(MANY):
        b.zarr_array(
            f"many/a{i:03d}",
            np.zeros(3, "<i2"),
            chunks=(2,),
            region=None,
            fill_value=i,
            tags={"many"},
        )
    b.zarr_array("names/" + "L" * 255, np.arange(3, dtype="<i2"), chunks=(2,), tags={"name"})

    # g1/g2/g3: nested groups with attributes; bare_group has no .zattrs at all
    b.group("g1", {"level": 1, "name": "first"})
    b.group("g1/g2")
    b.group("g1/g2/g3", {"level": 3, "nested": {"list": [1, 2.5, None, "x"], "uni": "漢字"}})
    b.zarr_array(
        "g1/g2/g3/leaf",
        make_data(np.dtype("<i2"), (4, 4), rng),
        chunks=(3, 3),
        attrs={"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]},
    )
    b.zarr_array("g1/sibling", make_data(np.dtype("<u8"), (6,), rng), chunks=(4,))
    b.bare_group("g1/bare")
    b.manual_array(
        "g1/bare/noattrs",
        make_data(np.dtype("<i4"), (5,), rng),
        chunks=(2,),
        compressor=None,
        fill_value=0,
        tags={"manual"},
    )

    # multi/: random-read targets (small odd chunks, edges, missing chunks, F order, "/")
    b.group("multi")
    b.zarr_array(
        "multi/m1", make_data(np.dtype(">i2"), (13, 17, 3), rng), chunks=(4, 5, 2), tags={"multi"}
    )
    b.zarr_array(
        "multi/m2",
        make_data(np.dtype("<f8"), (11, 7, 5), rng),
        chunks=(3, 3, 2),
        order="F",
        sep="/",
        region=(slice(2, 9), slice(0, 5), slice(None)),
        fill_value=np.nan,
        tags={"multi"},
    )
    b.zarr_array(
        "multi/m3",
        make_data(np.dtype("<u4"), (37, 29), rng),
        chunks=(5, 7),
        region=(slice(0, 20), slice(10, 29)),
        fill_value=0xDEADBEEF,
        compressor=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.BITSHUFFLE),
        tags={"multi"},
    )
    b.zarr_array(
        "multi/m4",
        make_data(np.dtype("<c8"), (6, 5, 4, 3), rng),
        chunks=(4, 2, 3, 2),
        compressor=numcodecs.GZip(1),
        tags={"multi"},
    )
    b.zarr_array(
        "multi/m5",
        make_data(sdt, (19, 11), rng),
        chunks=(6, 4),
        region=(slice(3, 19), slice(0, 7)),
        fill_value=np.array((7, -0.5, b"ab", False), sdt)[()],
        tags={"multi"},
    )

    # cache/: a multi-chunk array for the chunk-cache test
    b.group("cache")
    b.zarr_array(
        "cache/probe",
        smooth_data(np.dtype("<f8"), (64, 1000)),
        chunks=(16, 300),
        compressor=numcodecs.Zlib(1),
        tags={"cache"},
    )

    # big/: larger than 1 MiB (cache_size=1M test); one of them is a single 2 MiB chunk
    b.group("big")
    smooth_lz4_shuffled("big/many_chunks", "<f8", (512, 1024), (64, 128), "big")
    b.zarr_array(
        "big/one_chunk",
        make_data(np.dtype(">i4"), (1024, 512), rng),
        chunks=(1024, 512),
        compressor=numcodecs.Zstd(1),
        tags={"big"},
    )

    # names that are unusual but safe as path components must show up
    b.group("names")
    b.zarr_array("names/with space", np.arange(3, dtype="<i2"), chunks=(2,), tags={"name"})
    b.zarr_array("names/ünïcødé", np.arange(4, dtype="<i2"), chunks=(3,), tags={"name"})
    b.zarr_array("names/dot.in.name", np.arange(5, dtype="<i2"), chunks=(2,), tags={"name"})

    return b.finish()


def build_root_array(root: str | os.PathLike) -> ArrayCase:
    """A store whose root is an array (mounted as a single file named ``array``)."""
    rng = np.random.default_rng(7)
    data = make_data(np.dtype(">f4"), (9, 10), rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            str(root),
            shape=data.shape,
            chunks=(4, 4),
            dtype=data.dtype,
            zarr_format=2,
            fill_value=np.nan,
            attributes={"root": True},
        )
        arr[:6] = data[:6]
        values = np.asarray(zarr.open_array(str(root), mode="r", zarr_format=2)[...])
    case = ArrayCase("", Path(root), "zarr")
    case.zarray = json.loads((Path(root) / ".zarray").read_text())
    case.zattrs = _read_json(Path(root) / ".zattrs", {})
    case.dtype = np.dtype(case.zarray["dtype"])
    case.shape = tuple(case.zarray["shape"])
    case.chunks = tuple(case.zarray["chunks"])
    case.expected = np.ascontiguousarray(values.astype(case.dtype)).tobytes()
    return case


# --------------------------------------------------------------------------- bad hierarchy


@dataclass
class ChunkFault:
    path: str  # array path
    bad_key: str  # store key of the broken chunk, e.g. "bad/corrupt/0.1"
    good_ranges: list[tuple[int, int]]  # byte ranges of the file inside good chunks
    bad_range: tuple[int, int]  # a byte range of the file inside the broken chunk only
    expected: bytes = b""  # zarr-python's bytes for the whole array, read before breaking it


@dataclass
class BadHierarchy:
    root: Path
    good: Hierarchy  # the shown, fully readable arrays (oracle from zarr-python)
    faults: dict[str, ChunkFault]  # arrays that show but have one broken chunk
    hidden: dict[str, str]  # node path -> expected "type" ("array"/"group")
    hidden_names: dict[str, list[str]]  # parent dir path -> names that must not be listed
    unsafe_names_created: list[str]


# Chunk-fault arrays: shape (1, 3*N) <f8, chunks (1, N); chunk 0.1 is broken. Each chunk spans
# 256 KiB of the file, so a read of chunk 0.2 never shares a page or a read-ahead window
# with 0.1 (read-ahead goes forward, at most 128 KiB here).
FAULT_N = 32768


def build_bad(root: str | os.PathLike) -> BadHierarchy:
    b = Builder(root, {"what": "bad input"})
    rng = b.rng
    rootp = Path(root)

    # good siblings
    b.zarr_array(
        "ok",
        make_data(np.dtype("<f8"), (6, 7), rng),
        chunks=(4, 4),
        fill_value=np.nan,
        region=(slice(0, 4), slice(None)),
    )
    b.zarr_array(
        "good/a",
        make_data(np.dtype(">i4"), (10, 3), rng),
        chunks=(3, 3),
        compressor=numcodecs.Zlib(1),
    )
    b.zarr_array(
        "bad/good_sibling",
        make_data(np.dtype("<u2"), (9,), rng),
        chunks=(4,),
        compressor=numcodecs.Zlib(1),
    )

    # chunk faults: the arrays are valid and shown; one chunk is broken
    faults: dict[str, ChunkFault] = {}
    fault_data = smooth_data(np.dtype("<f8"), (1, 3 * FAULT_N))
    chunk_bytes = FAULT_N * 8

    def fault_array(name: str, compressor, breaker: Callable[[bytes], bytes]) -> None:
        path = f"bad/{name}"
        b.zarr_array(path, fault_data, chunks=(1, FAULT_N), compressor=compressor)
        del b.h.arrays[path]  # its oracle is taken now, before the chunk is broken
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            za = zarr.open_array(str(rootp), path=path, mode="r", zarr_format=2)
            expected = np.ascontiguousarray(np.asarray(za[...])).tobytes()
        key_file = rootp / path / "0.1"
        key_file.write_bytes(breaker(key_file.read_bytes()))
        faults[path] = ChunkFault(
            path,
            f"{path}/0.1",
            good_ranges=[(0, chunk_bytes), (2 * chunk_bytes, 3 * chunk_bytes)],
            bad_range=(chunk_bytes + 4096, chunk_bytes + 8192),
            expected=expected,
        )

    zlib = numcodecs.Zlib(1)
    fault_array("corrupt", zlib, lambda raw: bytes(rng.integers(0, 256, len(raw), np.uint8)))
    fault_array("truncated", zlib, lambda raw: raw[: len(raw) // 2])
    fault_array(
        "wrongsize",
        zlib,
        lambda raw: zlib.encode(np.zeros(FAULT_N // 2, "<f8").tobytes()),
    )
    fault_array("raw_wrongsize", None, lambda raw: raw[:-100])
    fault_array("raw_toolong", None, lambda raw: raw + b"\0" * 64)
    blosc = numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE)
    fault_array("corrupt_blosc", blosc, lambda raw: raw[:16] + bytes(len(raw) - 16))
    fault_array("empty_chunk_file", zlib, lambda raw: b"")

    # nodes that must be hidden
    hidden: dict[str, str] = {}

    def raw_array(path: str, zarray_text: str, chunk: bytes | None = None) -> None:
        d = rootp / path
        d.mkdir(parents=True, exist_ok=True)
        (d / ".zarray").write_text(zarray_text)
        if chunk is not None:
            (d / "0").write_bytes(chunk)

    good_meta = {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": "<i4",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
        "dimension_separator": ".",
    }
    two_ints = np.array([1, 2], "<i4").tobytes()
    raw_array("bad/malformed_json", json.dumps(good_meta)[:-7], two_ints)
    hidden["bad/malformed_json"] = "array"
    raw_array("bad/not_an_object", "[1, 2, 3]", two_ints)
    hidden["bad/not_an_object"] = "array"
    raw_array(
        "bad/unknown_codec",
        json.dumps({**good_meta, "compressor": {"id": "no_such_codec_xyz", "level": 1}}),
        two_ints,
    )
    hidden["bad/unknown_codec"] = "array"
    raw_array(
        "bad/unknown_filter",
        json.dumps({**good_meta, "filters": [{"id": "not_a_filter_abc"}]}),
        two_ints,
    )
    hidden["bad/unknown_filter"] = "array"
    raw_array(
        "bad/missing_shape",
        json.dumps({k: v for k, v in good_meta.items() if k != "shape"}),
        two_ints,
    )
    hidden["bad/missing_shape"] = "array"
    raw_array("bad/rank_mismatch", json.dumps({**good_meta, "shape": [4, 4]}), two_ints)
    hidden["bad/rank_mismatch"] = "array"
    raw_array("bad/bad_dtype", json.dumps({**good_meta, "dtype": "<x9"}), two_ints)
    hidden["bad/bad_dtype"] = "array"
    raw_array(
        "bad/vlen_bytes",
        json.dumps({**good_meta, "dtype": "|O", "filters": [{"id": "vlen-bytes"}]}),
        numcodecs.VLenBytes().encode(np.array([b"ab", b"c"], dtype=object)),
    )
    hidden["bad/vlen_bytes"] = "array"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vs = zarr.create_array(
            str(rootp), name="bad/vlen_utf8", shape=(3,), chunks=(2,), dtype=str, zarr_format=2
        )
        vs[:] = np.array(["a", "bé", "漢字"], dtype=object)
    hidden["bad/vlen_utf8"] = "array"

    more_malformed = {
        "zero_chunk": {"chunks": [0]},
        "negative_shape": {"shape": [-4]},
        "format_3": {"zarr_format": 3},
        "bad_order": {"order": "X"},
        "fill_not_a_number": {"fill_value": "abc"},
        "compressor_not_object": {"compressor": "zlib"},
        "filters_not_list": {"filters": {"id": "delta", "dtype": "<i4"}},
        "object_no_codec": {"dtype": "|O"},
    }
    for name, override in more_malformed.items():
        raw_array(f"bad/{name}", json.dumps({**good_meta, **override}), two_ints)
        hidden[f"bad/{name}"] = "array"
    raw_array("bad/malformed_zattrs", json.dumps(good_meta), two_ints)
    (rootp / "bad" / "malformed_zattrs" / ".zattrs").write_text('{"units": ')
    hidden["bad/malformed_zattrs"] = "array"

    # a group with malformed .zgroup, and a (valid) array inside it
    (rootp / "bad_group").mkdir()
    (rootp / "bad_group" / ".zgroup").write_text('{"zarr_format": 2')
    raw_array("bad_group/child", json.dumps(good_meta), two_ints)
    hidden["bad_group"] = "group"

    # unsafe names (if this filesystem allows creating them)
    created = []
    for name in ("new\nline", "ctrl\x01char", "tab\there", "del\x7fchar"):
        try:
            raw_array(f"bad/{name}", json.dumps(good_meta), two_ints)
        except OSError:
            continue
        created.append(name)
        hidden[f"bad/{name}"] = "array"
    try:
        d = rootp / "bad" / "grp\nline"
        d.mkdir()
        (d / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
        raw_array("bad/grp\nline/inner", json.dumps(good_meta), two_ints)
        created.append("grp\nline")
        hidden["bad/grp\nline"] = "group"
    except OSError:
        pass

    good = b.finish()
    hidden_names: dict[str, list[str]] = {}
    for p in hidden:
        parent, _, name = p.rpartition("/")
        hidden_names.setdefault(parent, []).append(name)
    return BadHierarchy(rootp, good, faults, hidden, hidden_names, created)
