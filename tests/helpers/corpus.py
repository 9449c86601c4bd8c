"""An interoperability corpus: small stores written by the programs that write most of the
Zarr data people mount (xarray, ome-zarr-py, anndata) and by zarr-python 3 with every codec
of ``numcodecs.zarr3``.

Every store is written by the real writer, never by hand, so the corpus follows what those
writers do in the installed versions. The oracle for what the mount must show is
zarr-python reading the same store (``tests/integration/test_interop_corpus.py``).

``build(root)`` writes the whole corpus under ``root`` (a few seconds) and returns a
:class:`Corpus`; ``STORES`` names every store a full build writes, so tests can be
parametrized before anything is written. Run as a script
(``python tests/helpers/corpus.py DIR``) it builds the corpus in DIR and prints it.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

XARRAY, OME_ZARR, ANNDATA, ZARR_PYTHON = "xarray", "ome-zarr", "anndata", "zarr-python"
WRITERS = (XARRAY, OME_ZARR, ANNDATA, ZARR_PYTHON)

# (writer, store name): every store a complete build writes. Store names are directory names.
STORES: list[tuple[str, str]] = [
    *((XARRAY, f"xarray-v{f}-{c}") for f in (2, 3) for c in ("consolidated", "plain")),
    (XARRAY, "xarray-datatree-v2"),
    (XARRAY, "xarray-datatree-v3"),
    (XARRAY, "xarray-shards-v3"),
    (OME_ZARR, "ome-zarr-0.4"),
    (OME_ZARR, "ome-zarr-0.5"),
    (ANNDATA, "anndata-v2"),
    (ANNDATA, "anndata-v3"),
    (ZARR_PYTHON, "numcodecs-zarr3"),
    (ZARR_PYTHON, "numcodecs-zarr3-sharded"),
    (ZARR_PYTHON, "numcodecs-v2"),
    (ZARR_PYTHON, "root-array-v3"),
]


@dataclass
class Store:
    writer: str
    name: str
    path: Path


@dataclass
class Corpus:
    root: Path
    stores: dict[str, Store] = field(default_factory=dict)
    # "store: what was not written: why" for each case a writer could not write
    skipped: list[str] = field(default_factory=list)
    # store name -> the numcodecs.zarr3 codec (class name) of each array written with one
    codec_arrays: dict[str, dict[str, str]] = field(default_factory=dict)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The writers warn a lot (unstable v3 data types, deprecated modules, consolidated
    metadata not in the spec): none of it is news here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------- xarray


def _xarray_dataset():
    """A small dataset with what xarray users write: CF packing, fill values, datetimes,
    timedeltas, fixed and variable-length string coordinates, bytes, an all-missing chunk."""
    import pandas as pd
    import xarray as xr

    rng = _rng(0)
    nt, ny, nx = 4, 6, 5
    packed = np.linspace(-3.0, 7.0, ny * nx).reshape(ny, nx)
    packed[0, 0] = np.nan  # encoded as the _FillValue
    sparse = np.full((nt, ny), np.nan)
    sparse[:2, :3] = rng.normal(size=(2, 3))  # the other chunks are all fill: not written
    return xr.Dataset(
        {
            "temp": (("time", "y", "x"), rng.normal(280, 5, (nt, ny, nx)).astype("f4")),
            "counts": (("y", "x"), np.arange(ny * nx, dtype="i2").reshape(ny, nx)),
            "flag": (("x",), np.array([True, False, True, True, False])),
            "packed": (("y", "x"), packed),
            "sparse": (("time", "y"), sparse),
            "stamp": (("time",), pd.date_range("2000-01-01", periods=nt, freq="6h").values),
            "lag": (("time",), pd.to_timedelta([1, 2, 3, 90], unit="min").values),
            "code": (("x",), np.array([b"ab", b"c", b"def", b"", b"g"])),
            "cplx": (("x",), np.arange(nx) * (1 - 2j)),
        },
        coords={
            "time": pd.date_range("2020-01-01", periods=nt),
            "y": np.arange(ny, dtype="f8") * 0.5,
            "x": np.array(["a", "bb", "ccc", "d", "e"]),  # fixed-size <U3: a raw form
            "station": (("y",), np.array([f"st-{i}" * (i + 1) for i in range(ny)], dtype=object)),
        },
        attrs={"title": "zarrmount interop corpus", "Conventions": "CF-1.8"},
    )


def _xarray_encoding(zarr_format: int) -> dict[str, dict[str, Any]]:
    encoding = {
        "packed": {"dtype": "i2", "scale_factor": 0.01, "add_offset": 2.0, "_FillValue": -9999},
        "sparse": {"_FillValue": -1.0, "chunks": (2, 3)},
        "lag": {"units": "seconds", "dtype": "i4"},
    }
    if zarr_format == 3:
        encoding["stamp"] = {"units": "hours since 1999-12-31", "dtype": "i8"}
    return encoding


def write_xarray(corpus: Corpus) -> None:
    import xarray as xr

    ds = _xarray_dataset()
    for zarr_format in (2, 3):
        encoding = _xarray_encoding(zarr_format)
        for kind in ("consolidated", "plain"):
            consolidated = kind == "consolidated"
            path = _store(corpus, XARRAY, f"xarray-v{zarr_format}-{kind}")
            chunked = ds.chunk({"time": 2, "y": 3})  # dask arrays: chunks become zarr chunks
            chunked.isel(time=slice(0, 2)).to_zarr(
                path,
                mode="w",
                zarr_format=zarr_format,
                consolidated=consolidated,
                encoding=encoding,
            )
            later = chunked.isel(time=slice(2, None))
            # only what has the appended dimension: the rest is already there
            later = later.drop_vars([k for k, v in later.variables.items() if "time" not in v.dims])
            later.to_zarr(
                path,
                append_dim="time",
                zarr_format=zarr_format,
                consolidated=consolidated,
            )
    for zarr_format in (2, 3):
        path = _store(corpus, XARRAY, f"xarray-datatree-v{zarr_format}")
        tree = xr.DataTree.from_dict(
            {
                "/": ds[["counts"]],
                "/surface": ds[["temp", "flag"]],
                "/surface/derived/daily": ds[["sparse", "lag"]]
                .isel(time=slice(0, 3))
                .rename(time="day"),
                "/empty/leaf": xr.Dataset({"scalar": ((), np.float32(1.5))}),
            }
        )
        tree.to_zarr(path, mode="w", zarr_format=zarr_format, consolidated=zarr_format == 2)
    path = _store(corpus, XARRAY, "xarray-shards-v3")
    ds[["temp", "counts"]].to_zarr(
        path,
        mode="w",
        zarr_format=3,
        encoding={
            "temp": {"chunks": (1, 3, 5), "shards": (2, 6, 5)},
            "counts": {"chunks": (2, 5), "shards": (6, 5)},
        },
    )


# ------------------------------------------------------------------------------ ome-zarr


def write_ome_zarr(corpus: Corpus) -> None:
    import zarr
    from ome_zarr import format as ome_format
    from ome_zarr.writer import write_image, write_labels

    rng = _rng(1)
    image = rng.integers(0, 4000, (2, 4, 32, 24), dtype="u2")  # c z y x
    labels = np.zeros((4, 32, 24), dtype="u4")
    labels[1:3, 4:20, 3:15] = 1
    labels[2:, 18:, 10:] = 7
    for version, class_name in (("0.4", "FormatV04"), ("0.5", "FormatV05")):
        fmt_class = getattr(ome_format, class_name, None)
        if fmt_class is None:
            corpus.skipped.append(f"ome-zarr-{version}: this ome-zarr has no {class_name}")
            continue
        fmt = fmt_class()
        path = _store(corpus, OME_ZARR, f"ome-zarr-{version}")
        root = zarr.open_group(path, mode="w", zarr_format=fmt.zarr_format)
        write_image(
            image,
            root,
            axes="czyx",
            fmt=fmt,
            scale_factors=(2, 4),
            storage_options={"chunks": (1, 2, 16, 16)},
        )
        write_labels(
            labels,
            root,
            name="cells",
            axes="zyx",
            fmt=fmt,
            scaler=None,
            scale_factors=(2,),
            label_metadata={"colors": [{"label-value": 1, "rgba": [255, 0, 0, 255]}]},
        )


# ------------------------------------------------------------------------------- anndata


def _anndata():
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    rng = _rng(2)
    n_obs, n_var = 12, 8
    obs = pd.DataFrame(
        {
            "cell_type": pd.Categorical(rng.choice(["B", "T", "NK"], n_obs)),
            "stage": pd.Categorical(
                rng.choice(["lo", "mid", "hi"], n_obs),
                categories=["lo", "mid", "hi"],
                ordered=True,
            ),
            "n_genes": pd.array(rng.integers(0, 100, n_obs), dtype="Int32"),
            "n_counts": pd.array([5, None, 7, 8, None, 1] * 2, dtype="Int64"),
            "is_doublet": pd.array([True, False, None] * 4, dtype="boolean"),
            "kept": rng.random(n_obs) > 0.5,
            "score": rng.random(n_obs),
            "barcode": [f"AC{i:03d}GT" for i in range(n_obs)],
        },
        index=[f"cell_{i}" for i in range(n_obs)],
    )
    var = pd.DataFrame(
        {
            "gene_ids": [f"ENSG{i:05d}" for i in range(n_var)],
            "highly_variable": rng.random(n_var) > 0.5,
            "means": rng.random(n_var).astype("f4"),
        },
        index=[f"gene_{i}" for i in range(n_var)],
    )
    adata = ad.AnnData(X=rng.random((n_obs, n_var)).astype("f4"), obs=obs, var=var)
    adata.layers["counts"] = sp.random(
        n_obs, n_var, density=0.3, format="csr", random_state=3, dtype="f8"
    )
    adata.layers["dense_int"] = rng.integers(0, 9, (n_obs, n_var)).astype("i8")
    adata.obsp["distances"] = sp.random(n_obs, n_obs, density=0.2, format="csr", random_state=4)
    adata.obsp["connectivities"] = sp.random(
        n_obs, n_obs, density=0.2, format="csc", random_state=5
    )
    adata.obsm["X_pca"] = rng.random((n_obs, 3))
    adata.varm["PCs"] = rng.random((n_var, 3))
    adata.uns["n_neighbors"] = 15
    adata.uns["resolution"] = 0.5
    adata.uns["method"] = "leiden"
    adata.uns["log1p"] = True
    adata.uns["neighbors"] = {
        "params": {"n_pcs": np.int16(3), "metric": "euclidean", "knn": True},
        "weights": np.arange(5, dtype="f4"),
        "names": np.array(["x", "yy"]),
    }
    return adata


def write_anndata(corpus: Corpus) -> None:
    import anndata as ad

    adata = _anndata()
    for zarr_format in (2, 3):
        path = _store(corpus, ANNDATA, f"anndata-v{zarr_format}")
        with ad.settings.override(zarr_write_format=zarr_format):
            adata.write_zarr(path)


# ----------------------------------------------------------- zarr-python, numcodecs.zarr3


def numcodecs_zarr3_names() -> list[str]:
    """Every codec class ``numcodecs.zarr3`` exports (the module says which)."""
    with _quiet():
        import numcodecs.zarr3 as nz3

        names = getattr(nz3, "__all__", None) or [n for n in dir(nz3) if n[:1].isupper()]
        return sorted(n for n in names if isinstance(getattr(nz3, n, None), type))


def _floats(shape: tuple[int, ...], seed: int, dtype: str = "f8") -> np.ndarray:
    data = _rng(seed).normal(100.0, 30.0, shape)
    return data.round(3).astype(dtype)


def _ints(shape: tuple[int, ...], seed: int, dtype: str = "i4") -> np.ndarray:
    return np.cumsum(_rng(seed).integers(-3, 9, shape), axis=-1).astype(dtype)


# Codec class name -> (configuration, dtype of the data); data: floats or ints, bools for
# PackBits. A class not listed here is tried with no configuration on float64 data.
_CODEC_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "AsType": ({"encode_dtype": "f4", "decode_dtype": "f8"}, "f8"),
    "BitRound": ({"keepbits": 7}, "f4"),
    "Delta": ({"dtype": "i4", "astype": "i2"}, "i4"),
    "FixedScaleOffset": ({"offset": 100, "scale": 10, "dtype": "f8", "astype": "i2"}, "f8"),
    "PackBits": ({}, "bool"),
    "Quantize": ({"digits": 2, "dtype": "f8"}, "f8"),
    "PCodec": ({"level": 5}, "f8"),
    "ZFPY": ({"mode": 4}, "f8"),  # reversible: lossless
    "BZ2": ({"level": 3}, "i4"),
    "LZ4": ({"acceleration": 1}, "f8"),
    "LZMA": ({"preset": 1}, "f4"),
    "Blosc": ({"cname": "zstd", "clevel": 3, "shuffle": 2}, "f8"),
    "GZip": ({"level": 6}, "i8"),
    "Zlib": ({"level": 4}, "u2"),
    "Zstd": ({"level": 5, "checksum": True}, "f4"),
    "Shuffle": ({"elementsize": 8}, "f8"),
    "CRC32": ({"location": "end"}, "i2"),
    "CRC32C": ({}, "f8"),
    "Adler32": ({}, "u1"),
    "Fletcher32": ({}, "f4"),
    "JenkinsLookup3": ({"initval": 7}, "i8"),
}

SHAPE, CHUNKS = (19, 13), (8, 5)  # edge chunks on both axes; about 2 KiB of float64


def _codec_data(dtype: str, seed: int) -> np.ndarray:
    if dtype == "bool":
        return _rng(seed).random(SHAPE) > 0.4
    if np.dtype(dtype).kind == "f":
        return _floats(SHAPE, seed, dtype)
    return _ints(SHAPE, seed, dtype)


def _placement(codec) -> str:
    from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec

    if isinstance(codec, ArrayArrayCodec):
        return "filters"
    if isinstance(codec, ArrayBytesCodec):
        return "serializer"
    return "compressors"


def _write_with(group, name: str, data: np.ndarray, codec, **kw) -> None:
    arr = group.create_array(
        name,
        shape=data.shape,
        dtype=data.dtype,
        chunks=kw.pop("chunks", CHUNKS),
        fill_value=kw.pop("fill_value", 0),
        **{_placement(codec): codec},
        **kw,
    )
    arr[...] = data
    # written is not enough: the codec must also read back what it wrote (a codec missing a
    # library can fail only when it is used)
    np.asarray(group[name][...])


def write_numcodecs_zarr3(corpus: Corpus) -> None:
    """One array per ``numcodecs.zarr3`` codec, and a few chains of them; a second store
    with each inside sharding. Codecs zarr-python cannot write are skipped with a reason."""
    import numcodecs.zarr3 as nz3
    import zarr
    from zarr.codecs import BytesCodec, ShardingCodec

    plain_path = _store(corpus, ZARR_PYTHON, "numcodecs-zarr3")
    sharded_path = _store(corpus, ZARR_PYTHON, "numcodecs-zarr3-sharded")
    plain = zarr.open_group(plain_path, mode="w", zarr_format=3)
    sharded = zarr.open_group(sharded_path, mode="w", zarr_format=3)
    plain.attrs["about"] = "one array per numcodecs.zarr3 codec"
    usable: dict[str, Any] = {}
    for seed, name in enumerate(numcodecs_zarr3_names()):
        config, dtype = _CODEC_CASES.get(name, ({}, "f8"))
        array_name = name.lower()
        try:
            codec = getattr(nz3, name)(**config)
            _write_with(plain, array_name, _codec_data(dtype, seed), codec)
        except Exception as e:  # noqa: BLE001 - any failure of the writer is a skip reason
            corpus.skipped.append(f"numcodecs-zarr3: {name}: {type(e).__name__}: {e}")
            _forget(plain_path, array_name)
            continue
        usable[name] = codec
        corpus.codec_arrays.setdefault("numcodecs-zarr3", {})[array_name] = name
        # Inside sharding: inner chunks 4x5 in shards 8x10, edge shards on both axes.
        try:
            place = _placement(codec)
            codecs = [
                *([codec] if place == "filters" else []),
                codec if place == "serializer" else BytesCodec(),
                *([codec] if place == "compressors" else []),
            ]
            _write_with(
                sharded,
                array_name,
                _codec_data(dtype, seed),
                ShardingCodec(chunk_shape=(4, 5), codecs=codecs),
                chunks=(8, 10),
                compressors=None,  # sharding alone: inner chunks are read
            )
            corpus.codec_arrays.setdefault("numcodecs-zarr3-sharded", {})[array_name] = name
        except Exception as e:  # noqa: BLE001
            corpus.skipped.append(f"numcodecs-zarr3-sharded: {name}: {type(e).__name__}: {e}")
            _forget(sharded_path, array_name)
    # Chains: several array-to-array codecs, then several bytes-to-bytes ones.
    chains = {
        "chain_delta_shuffle_zstd_crc32": (
            ["Delta"],
            ["Shuffle", "Zstd", "CRC32"],
            "i4",
            {"Shuffle": {"elementsize": 4}},
        ),
        "chain_fso_astype_blosc_adler": (
            ["FixedScaleOffset"],
            ["Blosc", "Adler32"],
            "f8",
            {},
        ),
        "chain_quantize_bitround_lz4": (
            ["Quantize", "BitRound"],
            ["LZ4"],
            "f8",
            {"BitRound": {"keepbits": 20}},
        ),
    }
    for array_name, (filters, compressors, dtype, overrides) in chains.items():
        if not all(n in usable for n in (*filters, *compressors)):
            corpus.skipped.append(f"numcodecs-zarr3: {array_name}: a codec of it was skipped")
            continue
        make = [
            getattr(nz3, n)(**(overrides.get(n) or _CODEC_CASES.get(n, ({}, ""))[0]))
            for n in (*filters, *compressors)
        ]
        data = _codec_data(dtype, len(array_name))
        arr = plain.create_array(
            array_name,
            shape=data.shape,
            dtype=data.dtype,
            chunks=CHUNKS,
            fill_value=0,
            filters=make[: len(filters)],
            compressors=make[len(filters) :],
        )
        arr[...] = data
    # The byte order, dates and fill values that zarr-python's own codecs and types keep.
    if "Zstd" in usable:
        data = _ints(SHAPE, 99, ">i4")
        arr = plain.create_array(
            "big_endian_zstd",
            shape=SHAPE,
            dtype=">i4",
            chunks=CHUNKS,
            fill_value=-1,
            serializer=BytesCodec(endian="big"),
            compressors=[usable["Zstd"]],
        )
        arr[...] = data
    stamps = np.datetime64("2024-02-28T23:00", "ns") + np.arange(30).astype("m8[h]")
    plain.create_array("datetime_ns", data=stamps.reshape(5, 6), chunks=(2, 4))
    plain.create_array("timedelta_s", data=np.arange(-5, 25).astype("m8[s]"), chunks=(7,))
    part = plain.create_array(
        "partly_written", shape=SHAPE, dtype="f4", chunks=CHUNKS, fill_value=float("nan")
    )
    part[:8, :5] = 1.25  # one chunk stored, the others read as the NaN fill value


def write_numcodecs_v2(corpus: Corpus) -> None:
    """The same numcodecs codecs as Zarr v2 filters and compressors (``get_codec`` ids)."""
    import numcodecs
    import zarr

    path = _store(corpus, ZARR_PYTHON, "numcodecs-v2")
    group = zarr.open_group(path, mode="w", zarr_format=2)
    for seed, name in enumerate(numcodecs_zarr3_names()):
        config, dtype = _CODEC_CASES.get(name, ({}, "f8"))
        codec_id = name.lower()
        codec_id = {"jenkinslookup3": "jenkins_lookup3"}.get(codec_id, codec_id)
        try:
            codec = numcodecs.get_codec({"id": codec_id, **config})
            data = _codec_data(dtype, seed)
            # array-to-array codecs are filters, the rest the compressor
            is_filter = name in (
                "AsType",
                "BitRound",
                "Delta",
                "FixedScaleOffset",
                "PackBits",
                "Quantize",
                "Shuffle",
            )
            arr = group.create_array(
                codec_id,
                shape=data.shape,
                dtype=data.dtype,
                chunks=CHUNKS,
                fill_value=0,
                filters=[codec] if is_filter else None,
                compressors=None if is_filter else codec,
                chunk_key_encoding={"name": "v2", "separator": "/" if seed % 2 else "."},
                order="F" if seed % 3 == 0 and name != "ZFPY" else "C",  # zfp: C only
            )
            arr[...] = data
            np.asarray(group[codec_id][...])
        except Exception as e:  # noqa: BLE001
            corpus.skipped.append(f"numcodecs-v2: {codec_id}: {type(e).__name__}: {e}")
            _forget(path, codec_id)
            continue
        corpus.codec_arrays.setdefault("numcodecs-v2", {})[codec_id] = name


def write_root_array(corpus: Corpus) -> None:
    """A store whose root is itself an array (shown as ``MNT/array``)."""
    import zarr
    from zarr.codecs import BytesCodec
    from zarr.codecs.numcodecs import Delta, Zlib

    path = _store(corpus, ZARR_PYTHON, "root-array-v3")
    data = _ints((9, 10), 5, "i8")
    with _quiet():
        arr = zarr.create_array(
            path,
            shape=data.shape,
            dtype=data.dtype,
            chunks=(4, 4),
            fill_value=3,
            filters=[Delta(dtype="i8")],
            serializer=BytesCodec(),
            compressors=[Zlib(level=1)],
            dimension_names=["row", "col"],
            attributes={"units": "m"},
        )
    arr[...] = data


# ------------------------------------------------------------------------------ the whole


def _store(corpus: Corpus, writer: str, name: str) -> Path:
    assert (writer, name) in STORES, (writer, name)
    path = corpus.root / name
    corpus.stores[name] = Store(writer, name, path)
    return path


def _forget(store_path: Path, array_name: str) -> None:
    """Remove what a failed write left of an array (its metadata may already be there)."""
    import shutil

    shutil.rmtree(store_path / array_name, ignore_errors=True)


GENERATORS: dict[str, list[Callable[[Corpus], None]]] = {
    XARRAY: [write_xarray],
    OME_ZARR: [write_ome_zarr],
    ANNDATA: [write_anndata],
    ZARR_PYTHON: [write_numcodecs_zarr3, write_numcodecs_v2, write_root_array],
}


def build(root: Path | str) -> Corpus:
    """Write the whole corpus below ``root``; prints each skipped case with its reason."""
    corpus = Corpus(Path(root))
    corpus.root.mkdir(parents=True, exist_ok=True)
    for writer in WRITERS:
        for generate in GENERATORS[writer]:
            with _quiet():
                generate(corpus)
    for line in corpus.skipped:
        print(f"corpus: skipped {line}")
    return corpus


# ------------------------------------------------------- zarr-python's view of a store


@dataclass
class OracleArray:
    """One array as zarr-python reads it: ``path`` is the node path ('' for a root array)."""

    path: str
    array: Any  # zarr.Array

    @property
    def dtype(self):
        return self.array.dtype

    @property
    def has_raw_form(self) -> bool:
        """Numeric, bool, datetime, fixed-size strings and bytes: a fixed itemsize.
        Variable-length strings and bytes (NumPy kinds ``O``, ``T``) have none."""
        dt = self.array.dtype
        return isinstance(dt, np.dtype) and dt.kind not in "OT" and not dt.hasobject

    def file_dtype(self) -> np.dtype:
        """zarr-python's dtype in the byte order the array is stored in: zarr-python 3
        gives v3 arrays in native order whatever the ``bytes`` codec says."""
        dt = np.dtype(self.array.dtype)
        if self.array.metadata.zarr_format == 3 and dt.itemsize > 1:
            endian = _bytes_endian(self.array.metadata.codecs)
            if endian is not None:
                dt = dt.newbyteorder(">" if endian == "big" else "<")
        return dt

    def expected_bytes(self) -> bytes:
        """What the file must hold: zarr-python's values, C order, stored byte order."""
        values = self.array[...]
        return np.ascontiguousarray(values, dtype=self.file_dtype()).tobytes()


def _bytes_endian(codecs) -> str | None:
    for codec in codecs:
        inner = getattr(codec, "codecs", None)  # sharding: the inner chunks' codecs
        if inner is not None:
            found = _bytes_endian(inner)
            if found is not None:
                return found
        endian = getattr(codec, "endian", None)
        if endian is not None:
            return getattr(endian, "value", endian)
    return None


def oracle_arrays(path: Path | str) -> list[OracleArray]:
    """Every array of the store at ``path`` as zarr-python sees it: ``zarr.open_group`` and
    all its arrays recursively, or the root array itself."""
    import zarr

    with _quiet():
        try:
            group = zarr.open_group(path, mode="r")
        except (
            zarr.errors.GroupNotFoundError,
            zarr.errors.ContainsArrayError,
            FileNotFoundError,
            ValueError,
            TypeError,
        ):
            return [OracleArray("", zarr.open_array(path, mode="r"))]
        return sorted(
            (
                OracleArray(name, node)
                for name, node in group.members(max_depth=None)
                if isinstance(node, zarr.Array)
            ),
            key=lambda a: a.path,
        )


def count_arrays(corpus: Corpus) -> dict[str, tuple[int, int]]:
    """writer -> (arrays with a raw form, arrays without one), as zarr-python sees them."""
    counts = {w: [0, 0] for w in WRITERS}
    for store in corpus.stores.values():
        for arr in oracle_arrays(store.path):
            counts[store.writer][0 if arr.has_raw_form else 1] += 1
    return {w: (c[0], c[1]) for w, c in counts.items()}


def _main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: corpus.py DIR", file=sys.stderr)
        return 2
    import time

    t0 = time.monotonic()
    corpus = build(argv[1])
    print(f"built {len(corpus.stores)} stores in {time.monotonic() - t0:.1f} s")
    for store in corpus.stores.values():
        arrays = oracle_arrays(store.path)
        raw = sum(a.has_raw_form for a in arrays)
        print(f"{store.writer:12} {store.name:28} {raw} raw, {len(arrays) - raw} without")
    for writer, (raw, other) in count_arrays(corpus).items():
        print(f"{writer}: {raw + other} arrays ({raw} with a raw form, {other} without)")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
