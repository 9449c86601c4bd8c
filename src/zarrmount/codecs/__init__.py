"""Codec pipelines: stored chunk bytes to a decoded chunk array, built on numcodecs."""

from __future__ import annotations

from zarrmount.codecs.base import ChunkDecodeError, CodecError, Pipeline, ShardIndexSpec
from zarrmount.codecs.v2 import V2Pipeline
from zarrmount.codecs.v3 import V3Pipeline
from zarrmount.format.model import ArrayMeta


def build_pipeline(meta: ArrayMeta) -> Pipeline:
    """The pipeline for ``meta``; raises :class:`CodecError` for codecs we cannot run."""
    if meta.zarr_format == 2:
        return V2Pipeline(meta)
    if meta.zarr_format == 3:
        return V3Pipeline(meta)
    raise CodecError(f"no codec pipeline for zarr_format {meta.zarr_format}")


__all__ = ["ChunkDecodeError", "CodecError", "Pipeline", "ShardIndexSpec", "build_pipeline"]
