"""The May 2022 editor's draft of Zarr v3: an entry point ``zarr.json``, documents under
``meta/`` (``<path>.array.json``, ``<path>.group.json``) and chunks under ``data/``."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

from helpers.stores.core import draft_key, write_chunks, write_json

DRAFT_PROTOCOL = "https://purl.org/zarr/spec/protocol/core/3.0"
DRAFT_SPEC_URI = "https://purl.org/zarr/spec/core/3.0"
GZIP_URI = "https://purl.org/zarr/spec/codecs/gzip/1.0"
BLOSC_URI = "https://purl.org/zarr/spec/codecs/blosc/1.0"
ENDIAN_URI = "https://purl.org/zarr/spec/codecs/endian/1.0"

BLOSC_CONFIG = {"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}


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

    @property
    def file_dtype(self) -> np.dtype:
        """The dtype of the bytes the mount shows (big endian under the endian codec)."""
        dt = self.data.dtype
        return dt.newbyteorder(">") if self.big and dt.itemsize > 1 else dt


def draft_encode(spec: DraftArraySpec, chunk: np.ndarray) -> bytes:
    arr = chunk.T if spec.layout == "F" else chunk  # F: dimension order reversed
    dt = arr.dtype.newbyteorder(">") if spec.big else arr.dtype.newbyteorder("<")
    raw = np.ascontiguousarray(arr.astype(dt)).tobytes()
    if spec.compressor == "gzip":
        return gzip.compress(raw, compresslevel=1)
    if spec.compressor == "blosc":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1).encode(raw)
    return raw


def draft_codecs(spec: DraftArraySpec) -> list[dict]:
    codecs = []
    if spec.big:
        codecs.append({"type": ENDIAN_URI, "configuration": {"endian": "big"}})
    if spec.compressor == "gzip":
        codecs.append({"type": GZIP_URI, "configuration": {"level": 1}})
    elif spec.compressor == "blosc":
        codecs.append({"type": BLOSC_URI, "configuration": dict(BLOSC_CONFIG)})
    return codecs


def draft_doc(spec: DraftArraySpec) -> dict:
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
        "codecs": draft_codecs(spec),
        **spec.extra,
    }


def write_draft_chunks(root: Path, path: str, spec: DraftArraySpec) -> tuple[dict, bytes]:
    """``meta/<path>.array.json`` and ``data/<path>/c<i>/<j>``; returns (document, the
    bytes the file must show)."""
    doc = draft_doc(spec)
    write_json(root / "meta" / (f"{path}.array.json" if path else "array.json"), doc, indent=2)
    expected = write_chunks(
        root / "data" / path if path else root / "data",
        spec.data,
        spec.chunks,
        spec.fill,
        key=lambda idx: draft_key(idx, spec.separator),
        encode=lambda chunk: draft_encode(spec, chunk),
        present=spec.present,
    )
    return doc, np.ascontiguousarray(expected.astype(spec.file_dtype)).tobytes()


def write_entry_point(root: Path, spec_form: bool = False) -> None:
    """The root ``zarr.json``; ``spec_form``: exactly as the May 2022 text words it."""
    root.mkdir(parents=True, exist_ok=True)
    if spec_form:
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
    write_json(root / "zarr.json", entry, indent=2)
