"""What an HDF5 file is made of, as the caller describes it: groups holding groups and
arrays, each with attributes. Array data is never here: only its shape and the dtype of
its file's bytes, whose byte order the file's datatypes then carry."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Reference:
    """An attribute value naming another object of the file (an HDF5 object reference):
    its path from the root group, ``""`` for the root, ``"a/b"`` for ``/a/b``."""

    path: str


@dataclass(frozen=True)
class Array:
    """An array: ``dtype`` is that of its file's bytes (C order, its own byte order),
    ``fill`` a 0-d array of it (the Zarr fill value) or None."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fill: np.ndarray | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class Group:
    """A group (the root's name is not used: the file is the root group); ``left_out``:
    members the caller leaves out (name, why), named with those the file cannot hold."""

    name: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    groups: Sequence[Group] = ()
    arrays: Sequence[Array] = ()
    left_out: Sequence[tuple[str, str]] = ()
