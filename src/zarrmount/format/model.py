"""Format-independent descriptions of groups and arrays, as the layers above see them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_FILE_BYTES = (1 << 63) - 1  # the largest file size the kernel knows


class MetadataError(ValueError):
    """A node's metadata is malformed or uses something we cannot show as a raw file."""


@dataclass(frozen=True, slots=True)
class ChunkKeyEncoding:
    """How chunk grid coordinates become store keys below the array's data prefix.

    v2: ``0.1`` or ``0/1`` (``0`` for 0-d); v3 default: ``c/0/1`` (``c`` for 0-d);
    v3 drafts: ``c0/1`` (``c`` for 0-d).
    """

    separator: str = "."
    prefix: str = ""
    scalar: str = "0"

    def key(self, coords: tuple[int, ...]) -> str:
        if not coords:
            return self.scalar
        return self.prefix + self.separator.join(map(str, coords))


@dataclass(frozen=True, slots=True)
class ArrayMeta:
    """Everything needed to read an array as a raw C-order file.

    ``dtype`` is the dtype of the file's bytes (stored byte order); ``order`` is the
    memory layout of a decoded chunk; ``codecs`` is the format's codec description,
    turned into a pipeline by :mod:`zarrmount.codecs`.
    """

    zarr_format: int
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    order: str
    fill_value: np.ndarray  # 0-d array of ``dtype``
    fill_json: Any
    codecs: dict[str, Any]
    key_encoding: ChunkKeyEncoding
    attributes: dict[str, Any] = field(default_factory=dict)
    # Sharded arrays: the shard shape; ``chunks`` is then the inner chunk shape.
    shards: tuple[int, ...] | None = None
    dimension_names: tuple[str | None, ...] | None = None
    format_label: str = ""  # ``user.zarr.format`` when not just ``zarr_format``
    # Arrays of variable-length elements (``dtype`` object): "utf8" or "bytes"
    strings: str | None = None

    def __post_init__(self) -> None:
        if (self.dtype == object) != (self.strings is not None):
            raise MetadataError(f"dtype {self.dtype} with no codec for its elements")
        if self.nbytes > MAX_FILE_BYTES:
            raise MetadataError(f"the array holds {self.nbytes} bytes, more than a file can")

    @property
    def format_name(self) -> str:
        return self.format_label or str(self.zarr_format)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.itemsize * math.prod(self.shape)

    @property
    def chunk_nbytes(self) -> int:
        return self.itemsize * math.prod(self.chunks)


@dataclass(frozen=True, slots=True)
class GroupNode:
    path: str
    zarr_format: int
    attributes: dict[str, Any] = field(default_factory=dict)
    implicit: bool = False  # a v3 draft prefix with descendants but no document


@dataclass(frozen=True, slots=True)
class ArrayNode:
    path: str
    meta: ArrayMeta
    data_prefix: str  # store prefix of the chunk keys, e.g. ``a/b/`` or ``data/root/a/b/``


@dataclass(frozen=True, slots=True)
class HiddenNode:
    """A node that exists in the store but cannot be shown; ``reason`` says why."""

    path: str
    kind: str  # "array", "group" or "unknown"
    reason: str


Node = GroupNode | ArrayNode | HiddenNode
