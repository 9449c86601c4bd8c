"""Write Zarr v2 test hierarchies and compute the bytes a mount must show.

The oracle is never zarrmount: arrays written by zarr-python are read back with
zarr-python (``np.ascontiguousarray(zarr.open_array(...)[...]).tobytes()``). Cases that
zarr-python 3.1 cannot write (structured dtypes with subarray or nested fields) are written
here by hand with numcodecs and json, and their oracle is NumPy on the source data.

How a store is written lives in ``helpers.stores``; this module holds the cases: which
arrays and groups each hierarchy has, section by section.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numcodecs
import numpy as np

from helpers.stores.core import DEFAULT, node_dir, read_json, write_file, zarr_write
from helpers.stores.data import make_data, smooth_data
from helpers.stores.v2 import (
    dtype_from_json,
    open_v2_group,
    read_v2_meta,
    v2_oracle,
    write_raw_array,
    write_v2_array,
    write_zgroup,
    zarr_v2_array,
)


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

    def read_back(self, manual: np.ndarray | None = None) -> None:
        """Metadata from the store; expected bytes from zarr-python, or from ``manual``
        (the NumPy oracle of an array written by hand)."""
        self.zarray, self.zattrs = read_v2_meta(self.root, self.path)
        stored = dtype_from_json(self.zarray["dtype"])
        self.dtype = stored
        self.shape = tuple(self.zarray["shape"])
        self.chunks = tuple(self.zarray["chunks"])
        if manual is None:
            self.expected = v2_oracle(self.root, self.path, stored)
        else:
            self.expected = np.ascontiguousarray(manual).tobytes()
        assert len(self.expected) == math.prod(self.shape) * stored.itemsize, self.path


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
    """Collects arrays and groups for one store directory, then computes the oracles.

    ``root=None``: a dry run that only records the node paths and tags (for parametrizing
    tests at collection time without writing anything)."""

    def __init__(self, root: str | os.PathLike | None, root_attrs: dict | None = None):
        self.dry = root is None
        self.root = Path(root) if root is not None else Path("/nonexistent-dry-run")
        self.h = Hierarchy(self.root)
        self.rng = np.random.default_rng(20240611)
        if not self.dry:
            open_v2_group(self.root, attrs=root_attrs, mode="w")
        self.h.groups[""] = GroupCase("", {})
        self._manual: dict[str, np.ndarray] = {}

    def group(self, path: str, attrs: dict | None = None) -> None:
        if not self.dry:
            open_v2_group(self.root, path, attrs)
        self._register_parents(path)

    def bare_group(self, path: str) -> None:
        """A group with only ``.zgroup`` (no .zattrs at all)."""
        if not self.dry:
            write_zgroup(self.root / path)
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

    def _add(self, path: str, origin: str, tags) -> ArrayCase:
        case = ArrayCase(path, self.root, origin, set(tags))
        self.h.arrays[path] = case
        return case

    def zarr_array(self, path: str, data: np.ndarray, *, tags=frozenset(), **kw) -> ArrayCase:
        """Create ``path`` with zarr-python and write ``data[region]`` (keywords: those of
        ``helpers.stores.v2.zarr_v2_array``)."""
        self._parent_groups(path)
        if not self.dry:
            zarr_v2_array(self.root, path, data, **kw)
        return self._add(path, "zarr", tags)

    def manual_array(self, path: str, data: np.ndarray, *, tags=frozenset(), **kw) -> ArrayCase:
        """Write .zarray and chunk files directly (keywords: those of
        ``helpers.stores.v2.write_v2_array``); the oracle is ``data`` with fill where a chunk
        is absent."""
        if path:
            self._parent_groups(path)
        if not self.dry:
            self._manual[path] = write_v2_array(node_dir(self.root, path), data, **kw)
        return self._add(path, "manual", tags)

    def under(self, prefix: str, **common) -> Callable[..., ArrayCase]:
        """``add(name, data, **kw)``: a zarr-python array ``prefix/name``, ``common``
        keywords first."""

        def add(name: str, data: np.ndarray, **kw) -> ArrayCase:
            return self.zarr_array(f"{prefix}/{name}", data, **{**common, **kw})

        return add

    def finish(self) -> Hierarchy:
        if self.dry:
            return self.h
        for path, group in self.h.groups.items():
            group.zattrs = read_json(self.root / path / ".zattrs", {})
        for path, case in self.h.arrays.items():
            case.read_back(self._manual.get(path) if case.origin == "manual" else None)
        return self.h


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
STRUCT_FLAT = np.dtype(SIMPLE_DTYPES["struct_flat"])

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

# fill/: missing chunks with every fill-value form. name -> (dtype, fill_value)
FILL_VALUES = {
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

# Arrays with small odd chunks, edges and missing chunks: the random-read property test uses
# them.
MANY = 200
MULTI = ("multi/m1", "multi/m2", "multi/m3", "multi/m4", "multi/m5")

LZ4_SHUFFLE = dict(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE)


def _main_dtypes(b: Builder, rng: np.random.Generator) -> None:
    """dtypes/: every dtype, full write, edge chunks, default compressor (zstd); the
    structured dtypes zarr-python 3.1 cannot write correctly are written by hand."""
    b.group("dtypes", {"what": "every dtype"})
    for name, dt in SIMPLE_DTYPES.items():
        b.zarr_array(f"dtypes/{name}", make_data(dt, (7, 5), rng), chunks=(3, 2), tags={"dtype"})
    tags = {"dtype", "manual"}
    b.manual_array(
        "dtypes/struct_sub",
        make_data(STRUCT_SUB, (7, 5), rng),
        chunks=(3, 2),
        compressor=numcodecs.Zlib(level=1),
        fill_value=np.zeros((), STRUCT_SUB)[()],
        attrs={"written_by": "hand"},
        tags=tags,
    )
    nested = make_data(STRUCT_NESTED, (9,), rng)
    b.manual_array(
        "dtypes/struct_nested",
        nested,
        chunks=(4,),
        compressor=numcodecs.Blosc(**LZ4_SHUFFLE),
        tags=tags,
    )
    b.manual_array(
        "dtypes/struct_deep_F",
        make_data(STRUCT_DEEP, (5, 4), rng),
        chunks=(2, 3),
        order="F",
        sep="/",
        compressor=numcodecs.Zstd(level=1),
        tags={*tags, "order_F"},
        fill_value=np.array((((1, 2), (3, 4)), (7, (1.5, -2.0, 3.0), (-9,))), STRUCT_DEEP)[()],
        present=lambda idx: idx != (1, 1),
    )


def _main_fills(b: Builder, rng: np.random.Generator) -> None:
    """fill/: missing chunks with every fill-value form. Only the chunk (0, 0) region is
    written; fill_value null arrays are written fully (missing chunks would be undefined),
    plus one partial one."""
    b.group("fill")
    add = b.under("fill", chunks=(3, 2), tags={"fill"})
    first = np.s_[0:3, 0:2]
    for name, (dt, fv) in FILL_VALUES.items():
        add(name, make_data(dt, (7, 5), rng), region=first, fill_value=fv)
    fill = np.array((-1, 2.5, b"zz", True), STRUCT_FLAT)[()]
    add("struct_b64", make_data(STRUCT_FLAT, (7, 5), rng), region=first, fill_value=fill)
    unwritten = make_data("<f8", (4, 3), rng)
    add("nothing_written_f8", unwritten, chunks=(2, 2), region=None, fill_value=-3.25)
    add("null_i4_full", make_data("<i4", (7, 5), rng), fill_value=None)
    add("null_f8_full", make_data(">f8", (7, 5), rng), fill_value=None)
    partial = make_data("<f8", (4, 6), rng)
    null_partial = add(
        "null_f8_partial",
        partial,
        chunks=(2, 6),
        region=np.s_[0:2, :],
        fill_value=None,
        tags={"fill", "null_partial"},
    )
    null_partial.defined_ranges = [(0, 2 * 6 * 8)]  # rows 0-1; rows 2-3 are undefined


def _main_order_sep(b: Builder, rng: np.random.Generator) -> None:
    """order/: Fortran-order chunks; sep/: dimension_separator "/"."""
    b.group("order")
    fortran = b.under("order", order="F", tags={"order_F"})
    fortran("F_f8_3d", make_data("<f8", (5, 6, 7), rng), chunks=(2, 4, 3))
    i2 = make_data(">i2", (9, 7), rng)
    fortran("F_be_i2_partial", i2, chunks=(4, 3), region=np.s_[0:5, 2:7], fill_value=9)
    u1 = make_data("|u1", (6, 5, 4), rng)
    zlib = numcodecs.Zlib(1)
    fortran("F_u1_slash", u1, chunks=(4, 2, 3), sep="/", compressor=zlib, tags={"order_F", "slash"})
    fortran("F_struct", make_data(STRUCT_FLAT, (5, 3), rng), chunks=(2, 2))
    fortran("F_c16_1d", make_data(">c16", (11,), rng), chunks=(4,))
    fortran("C_ref_3d", make_data("<f8", (5, 6, 7), rng), chunks=(2, 4, 3), order="C", tags=())

    b.group("sep")
    slash = b.under("sep", sep="/", tags={"slash"})
    slash("slash_2d", make_data("<i8", (10, 9), rng), chunks=(3, 4))
    f4 = make_data(">f4", (6, 7, 8), rng)
    slash("slash_3d_partial", f4, chunks=(4, 3, 5), region=np.s_[0:4, 0:3, 0:5], fill_value=np.nan)
    slash("slash_1d", make_data("<u2", (17,), rng), chunks=(5,))
    slash("dot_2d", make_data("<i8", (10, 9), rng), chunks=(3, 4), sep=".", tags=())


def _main_edge_special(b: Builder, rng: np.random.Generator) -> None:
    """edge/: shapes that are not multiples of the chunks; special/: 0-d and zero-length."""
    b.group("edge")
    edge = b.under("edge")
    edge("1d", make_data("<i4", (10,), rng), chunks=(3,))
    edge("chunk_bigger", make_data("<f8", (2, 3), rng), chunks=(5, 5))
    edge("3d", make_data(">u4", (9, 8, 7), rng), chunks=(4, 3, 5))
    i2 = make_data("<i2", (5, 4, 3, 6), rng)
    edge("4d_partial", i2, chunks=(2, 3, 2, 4), region=np.s_[1:4, :, 0:1, 2:6], fill_value=-1)
    edge("unit_chunks", make_data("<f4", (3, 4), rng), chunks=(1, 1))

    b.group("special")
    zerod = b.under("special", chunks=(), tags={"zerod"})
    zerod("zerod", np.array(123456789, dtype="<i8"))
    zerod("zerod_be_f8", np.array(-2.5, dtype=">f8"))
    zerod("zerod_missing", np.array(0, dtype="<f4"), region=None, fill_value=7.5)
    empty = b.under("special", tags={"empty"})
    empty("zerolen", np.zeros((0, 5), dtype="<i4"), chunks=(3, 2))
    empty("zerolen_mid", np.zeros((4, 0, 3), dtype=">f8"), chunks=(2, 2, 2))
    empty("zerolen_1d", np.zeros((0,), dtype="|S3"), chunks=(4,))


def _floats() -> np.ndarray:
    return smooth_data(np.dtype("<f8"), (20, 13)) / 7.0


def _main_filters(b: Builder, rng: np.random.Generator) -> None:
    """filters/: numcodecs filters under compressors."""
    b.group("filters")
    ints = np.cumsum(rng.integers(-5, 6, size=(20, 13)), axis=1).astype("<i4")
    floats = _floats()
    add = b.under("filters", chunks=(6, 5), tags={"filter"})
    nc = numcodecs
    delta = [nc.Delta(dtype="<i4")]
    add("delta_i4", ints, filters=delta, compressor=nc.Zlib(1))
    delta8 = [nc.Delta(dtype=">i8", astype=">i2")]
    add("delta_be_i8_astype", ints.astype(">i8"), filters=delta8, compressor=None)
    scale = [nc.FixedScaleOffset(offset=10, scale=100, dtype="<f8", astype="<i4")]
    add("fixedscaleoffset", floats, filters=scale, compressor=nc.Blosc(**LZ4_SHUFFLE))
    add("quantize", floats, filters=[nc.Quantize(digits=3, dtype="<f8")], compressor=nc.Zstd(3))
    add("shuffle", floats, filters=[nc.Shuffle(elementsize=8)], compressor=nc.Zlib(5))
    add(
        "chain_partial",
        ints,
        filters=[nc.Delta(dtype="<i4"), nc.Shuffle(elementsize=4)],
        compressor=nc.Blosc(cname="zstd", shuffle=nc.Blosc.BITSHUFFLE),
        region=np.s_[0:12, 0:10],
        fill_value=5,
    )


def _smooth_lz4_shuffled(b: Builder, path: str, dtype: str, shape, chunks, tag: str) -> None:
    """Smooth data under blosc lz4 with byte shuffle: a compressor that really shrinks it,
    as it does real data."""
    data = smooth_data(np.dtype(dtype), shape)
    b.zarr_array(path, data, chunks=chunks, compressor=numcodecs.Blosc(**LZ4_SHUFFLE), tags={tag})


def _main_compressors(b: Builder, rng: np.random.Generator) -> None:
    """compressors/: one array per compressor; then more filters numcodecs knows (lossy
    ones: the oracle is zarr-python's decoded values)."""
    b.group("compressors", {"note": "one array per compressor"})
    cdata = smooth_data(np.dtype("<f8"), (30, 20))
    cdata[::5, ::3] = make_data(np.dtype("<f8"), cdata[::5, ::3].shape, rng)
    for name, comp in COMPRESSORS.items():
        b.zarr_array(
            f"compressors/{name}", cdata, chunks=(7, 6), compressor=comp, tags={"compressor"}
        )
    _smooth_lz4_shuffled(b, "compressors/blosc_shuffle_be_i2", ">i2", (25, 9), (8, 4), "compressor")
    add = b.under("filters", chunks=(6, 5), tags={"filter"})
    astype = numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")
    add("astype", _floats(), filters=[astype])
    add("packbits", make_data("|b1", (20, 13), rng), filters=[numcodecs.PackBits()])
    add("bitround", _floats().astype("<f4"), filters=[numcodecs.BitRound(keepbits=6)])


def _main_legacy(b: Builder, rng: np.random.Generator) -> None:
    """legacy/: spellings older writers (zarr-python 2) produced, written by hand."""
    b.group("legacy")
    zlib = numcodecs.Zlib(1)

    def legacy(name: str, dtype: str, **kw) -> None:
        data = make_data(dtype, (7, 5), rng)
        b.manual_array(f"legacy/{name}", data, chunks=(3, 2), tags={"manual", "legacy"}, **kw)

    no_sep = ("dimension_separator",)
    legacy("no_dimension_separator", "<i4", fill_value=0, compressor=zlib, omit_keys=no_sep)
    int_fill = dict(fill_value=3.0, fill_json=3, compressor=zlib)
    legacy("int_fill_for_float", "<f4", **int_fill, present=lambda idx: idx == (0, 0))
    legacy("filters_empty_list", ">u2", fill_value=0, zarray_overrides={"filters": []})
    sudt = np.dtype([("name", "<U4"), ("v", ">f4")])
    b.zarr_array(
        "dtypes/struct_unicode",
        make_data(sudt, (6,), rng),
        chunks=(4,),
        region=(slice(0, 3),),
        fill_value=np.array(("ab", 1.5), sudt)[()],
        tags={"dtype"},
    )


def _main_many_groups(b: Builder, rng: np.random.Generator) -> None:
    """many/: a directory with more entries than one readdir reply holds; g1/g2/g3: nested
    groups with attributes; bare_group has no .zattrs at all."""
    b.group("many")
    many = b.under("many", chunks=(2,), region=None, tags={"many"})
    for i in range(MANY):
        many(f"a{i:03d}", np.zeros(3, "<i2"), fill_value=i)
    b.zarr_array("names/" + "L" * 255, np.arange(3, dtype="<i2"), chunks=(2,), tags={"name"})

    b.group("g1", {"level": 1, "name": "first"})
    b.group("g1/g2")
    b.group("g1/g2/g3", {"level": 3, "nested": {"list": [1, 2.5, None, "x"], "uni": "漢字"}})
    leaf_attrs = {"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}
    b.zarr_array("g1/g2/g3/leaf", make_data("<i2", (4, 4), rng), chunks=(3, 3), attrs=leaf_attrs)
    b.zarr_array("g1/sibling", make_data("<u8", (6,), rng), chunks=(4,))
    b.bare_group("g1/bare")
    noattrs = make_data("<i4", (5,), rng)
    b.manual_array("g1/bare/noattrs", noattrs, chunks=(2,), fill_value=0, tags={"manual"})


def _main_multi(b: Builder, rng: np.random.Generator) -> None:
    """multi/: random-read targets (small odd chunks, edges, missing chunks, F order, "/")."""
    b.group("multi")
    multi = b.under("multi", tags={"multi"})
    multi("m1", make_data(">i2", (13, 17, 3), rng), chunks=(4, 5, 2))
    multi(
        "m2",
        make_data("<f8", (11, 7, 5), rng),
        chunks=(3, 3, 2),
        order="F",
        sep="/",
        region=np.s_[2:9, 0:5, :],
        fill_value=np.nan,
    )
    multi(
        "m3",
        make_data("<u4", (37, 29), rng),
        chunks=(5, 7),
        region=np.s_[0:20, 10:29],
        fill_value=0xDEADBEEF,
        compressor=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.BITSHUFFLE),
    )
    multi(
        "m4", make_data("<c8", (6, 5, 4, 3), rng), chunks=(4, 2, 3, 2), compressor=numcodecs.GZip(1)
    )
    fill = np.array((7, -0.5, b"ab", False), STRUCT_FLAT)[()]
    m5 = make_data(STRUCT_FLAT, (19, 11), rng)
    multi("m5", m5, chunks=(6, 4), region=np.s_[3:19, 0:7], fill_value=fill)


def _main_cache_big_names(b: Builder, rng: np.random.Generator) -> None:
    """cache/: a multi-chunk array for the chunk-cache test; big/: larger than 1 MiB
    (cache_size=1M test), one of them a single 2 MiB chunk; names/: unusual but safe path
    components, which must show up."""
    b.group("cache")
    probe = smooth_data(np.dtype("<f8"), (64, 1000))
    b.zarr_array(
        "cache/probe", probe, chunks=(16, 300), compressor=numcodecs.Zlib(1), tags={"cache"}
    )
    b.group("big")
    _smooth_lz4_shuffled(b, "big/many_chunks", "<f8", (512, 1024), (64, 128), "big")
    one = make_data(">i4", (1024, 512), rng)
    b.zarr_array(
        "big/one_chunk", one, chunks=(1024, 512), compressor=numcodecs.Zstd(1), tags={"big"}
    )
    b.group("names")
    names = b.under("names", tags={"name"})
    names("with space", np.arange(3, dtype="<i2"), chunks=(2,))
    names("ünïcødé", np.arange(4, dtype="<i2"), chunks=(3,))
    names("dot.in.name", np.arange(5, dtype="<i2"), chunks=(2,))


MAIN_SECTIONS = (
    _main_dtypes,
    _main_fills,
    _main_order_sep,
    _main_edge_special,
    _main_filters,
    _main_compressors,
    _main_legacy,
    _main_many_groups,
    _main_multi,
    _main_cache_big_names,
)


def build_main(root: str | os.PathLike | None) -> Hierarchy:
    b = Builder(root, {"title": "zarrmount integration hierarchy", "n": 1, "nested": {"k": [1]}})
    for section in MAIN_SECTIONS:
        section(b, b.rng)
    return b.finish()


def build_root_array(root: str | os.PathLike) -> ArrayCase:
    """A store whose root is an array (mounted as a single file named ``array``)."""
    data = make_data(np.dtype(">f4"), (9, 10), np.random.default_rng(7))
    attrs = {"root": True}
    zarr_write(
        root, data, np.s_[:6], chunks=(4, 4), zarr_format=2, fill_value=np.nan, attributes=attrs
    )
    case = ArrayCase("", Path(root), "zarr")
    case.read_back()
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

# The .zarray of a valid 4-element <i4 array; the hidden ones are spoilt copies of it.
GOOD_META = {
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
TWO_INTS = np.array([1, 2], "<i4").tobytes()


def _meta(**override) -> str:
    return json.dumps({**GOOD_META, **override})


def _bad_good(b: Builder, rng: np.random.Generator) -> None:
    """The good siblings of the broken nodes."""
    ok = make_data("<f8", (6, 7), rng)
    b.zarr_array("ok", ok, chunks=(4, 4), fill_value=np.nan, region=np.s_[0:4, :])
    zlib = numcodecs.Zlib(1)
    b.zarr_array("good/a", make_data(">i4", (10, 3), rng), chunks=(3, 3), compressor=zlib)
    sibling = make_data("<u2", (9,), rng)
    b.zarr_array("bad/good_sibling", sibling, chunks=(4,), compressor=zlib)


def _bad_chunk_faults(b: Builder, rng: np.random.Generator) -> dict[str, ChunkFault]:
    """Valid arrays, shown, with chunk 0.1 broken (the oracle is read before breaking it)."""
    data = smooth_data(np.dtype("<f8"), (1, 3 * FAULT_N))
    size = FAULT_N * 8
    zlib = numcodecs.Zlib(1)
    blosc = numcodecs.Blosc(**LZ4_SHUFFLE)
    faults: dict[str, ChunkFault] = {}
    for name, compressor, breaker in (
        ("corrupt", zlib, lambda raw: bytes(rng.integers(0, 256, len(raw), np.uint8))),
        ("truncated", zlib, lambda raw: raw[: len(raw) // 2]),
        ("wrongsize", zlib, lambda raw: zlib.encode(np.zeros(FAULT_N // 2, "<f8").tobytes())),
        ("raw_wrongsize", None, lambda raw: raw[:-100]),
        ("raw_toolong", None, lambda raw: raw + b"\0" * 64),
        ("corrupt_blosc", blosc, lambda raw: raw[:16] + bytes(len(raw) - 16)),
        ("empty_chunk_file", zlib, lambda raw: b""),
    ):
        path = f"bad/{name}"
        b.zarr_array(path, data, chunks=(1, FAULT_N), compressor=compressor)
        del b.h.arrays[path]  # its oracle is taken now, before the chunk is broken
        expected = v2_oracle(b.root, path)
        key_file = b.root / path / "0.1"
        key_file.write_bytes(breaker(key_file.read_bytes()))
        good = [(0, size), (2 * size, 3 * size)]
        bad = (size + 4096, size + 8192)
        faults[path] = ChunkFault(path, f"{path}/0.1", good, bad, expected=expected)
    return faults


def _bad_metadata(root: Path, hidden: dict[str, str]) -> None:
    """Arrays whose metadata must hide them (``hidden`` collects their paths)."""
    for name, text, chunk in (
        ("malformed_json", json.dumps(GOOD_META)[:-7], TWO_INTS),
        ("not_an_object", "[1, 2, 3]", TWO_INTS),
        ("unknown_codec", _meta(compressor={"id": "no_such_codec_xyz", "level": 1}), TWO_INTS),
        ("unknown_filter", _meta(filters=[{"id": "not_a_filter_abc"}]), TWO_INTS),
        (
            "missing_shape",
            json.dumps({k: v for k, v in GOOD_META.items() if k != "shape"}),
            TWO_INTS,
        ),
        ("rank_mismatch", _meta(shape=[4, 4]), TWO_INTS),
        ("bad_dtype", _meta(dtype="<x9"), TWO_INTS),
    ):
        write_raw_array(root / "bad" / name, text, chunk)
        hidden[f"bad/{name}"] = "array"
    for name, override in {
        "zero_chunk": {"chunks": [0]},
        "negative_shape": {"shape": [-4]},
        "format_3": {"zarr_format": 3},
        "bad_order": {"order": "X"},
        "fill_not_a_number": {"fill_value": "abc"},
        "compressor_not_object": {"compressor": "zlib"},
        "filters_not_list": {"filters": {"id": "delta", "dtype": "<i4"}},
        "object_no_codec": {"dtype": "|O"},
    }.items():
        write_raw_array(root / "bad" / name, _meta(**override), TWO_INTS)
        hidden[f"bad/{name}"] = "array"
    write_raw_array(root / "bad" / "malformed_zattrs", _meta(), TWO_INTS)
    (root / "bad" / "malformed_zattrs" / ".zattrs").write_text('{"units": ')
    hidden["bad/malformed_zattrs"] = "array"
    # a group with malformed .zgroup, and a (valid) array inside it
    write_file(root / "bad_group" / ".zgroup", '{"zarr_format": 2')
    write_raw_array(root / "bad_group" / "child", _meta(), TWO_INTS)
    hidden["bad_group"] = "group"


def _bad_names(root: Path, hidden: dict[str, str]) -> list[str]:
    """Unsafe names (if this filesystem allows creating them); returns those created."""
    created = []
    for name in ("new\nline", "ctrl\x01char", "tab\there", "del\x7fchar"):
        try:
            write_raw_array(root / "bad" / name, _meta(), TWO_INTS)
        except OSError:
            continue
        created.append(name)
        hidden[f"bad/{name}"] = "array"
    try:
        write_zgroup(root / "bad" / "grp\nline")
        write_raw_array(root / "bad" / "grp\nline" / "inner", _meta(), TWO_INTS)
        created.append("grp\nline")
        hidden["bad/grp\nline"] = "group"
    except OSError:
        pass
    return created


def build_bad(root: str | os.PathLike) -> BadHierarchy:
    b = Builder(root, {"what": "bad input"})
    _bad_good(b, b.rng)
    faults = _bad_chunk_faults(b, b.rng)
    hidden: dict[str, str] = {}
    _bad_metadata(b.root, hidden)
    created = _bad_names(b.root, hidden)
    good = b.finish()
    hidden_names: dict[str, list[str]] = {}
    for p in hidden:
        parent, _, name = p.rpartition("/")
        hidden_names.setdefault(parent, []).append(name)
    return BadHierarchy(b.root, good, faults, hidden, hidden_names, created)
