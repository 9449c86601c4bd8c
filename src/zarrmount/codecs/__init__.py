"""Codec pipelines: stored chunk bytes to a decoded chunk array, built on numcodecs."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

from zarrmount.codecs.base import ChunkDecodeError, CodecError, Pipeline, ShardIndexSpec
from zarrmount.codecs.self_check import check_round_trip
from zarrmount.codecs.v2 import V2Pipeline
from zarrmount.codecs.v3 import V3Pipeline
from zarrmount.format.model import ArrayMeta

# Pipelines kept for arrays that code their chunks alike (most arrays of a hierarchy do):
# listing a group of 100,000 arrays then builds one, and a file opened builds none.
SHARED_PIPELINES = 256
# Pipelines whose description takes more (huge codec configurations or fill values) are
# not kept: 256 keys of that size would be memory of their own.
MAX_KEY_BYTES = 16 << 10


def build_pipeline(meta: ArrayMeta) -> Pipeline:
    """The pipeline for ``meta``; raises :class:`CodecError` for codecs we cannot run."""
    if meta.zarr_format == 2:
        return V2Pipeline(meta)
    if meta.zarr_format == 3:
        return V3Pipeline(meta)
    raise CodecError(f"no codec pipeline for zarr_format {meta.zarr_format}")


def _key(meta: ArrayMeta) -> tuple | None:
    """Everything of ``meta`` a pipeline reads: equal keys, interchangeable pipelines.
    None when it would take more than MAX_KEY_BYTES."""
    dtype = meta.dtype
    descr = str(dtype.descr) if dtype.fields is not None or dtype.subdtype is not None else ""
    fill = meta.fill_value.tobytes()
    codecs = repr(meta.codecs)  # exact (key order, 1 or 1.0 or True), and fast
    if len(descr) + len(fill) + len(codecs) > MAX_KEY_BYTES:
        return None
    return (meta.zarr_format, meta.chunks, meta.shards, meta.order, dtype.str, descr, fill, codecs)


_shared: OrderedDict[tuple, Pipeline] = OrderedDict()
_lock = threading.Lock()  # groups are listed in worker threads, maybe several at once


def shared_pipeline(meta: ArrayMeta) -> Pipeline:
    """The pipeline for ``meta``, the same object for every array whose chunks are coded
    alike (pipelines hold no state of their own, and are used from many threads anyway).
    Its ``meta`` is a copy holding only what codes a chunk, not ``meta``'s attributes or
    shape. Raises :class:`CodecError` like :func:`build_pipeline`."""
    key = _key(meta)
    with _lock:
        found = _shared.get(key)
        if found is not None:
            _shared.move_to_end(key)
            return found
    chunk_meta = dataclasses.replace(meta, shape=meta.chunks, attributes={}, dimension_names=None)
    pipeline = build_pipeline(chunk_meta)
    check_round_trip(pipeline)
    if key is None:
        return pipeline
    with _lock:
        pipeline = _shared.setdefault(key, pipeline)
        _shared.move_to_end(key)
        while len(_shared) > SHARED_PIPELINES:
            _shared.popitem(last=False)
    return pipeline


__all__ = [
    "ChunkDecodeError",
    "CodecError",
    "Pipeline",
    "ShardIndexSpec",
    "build_pipeline",
    "shared_pipeline",
]
