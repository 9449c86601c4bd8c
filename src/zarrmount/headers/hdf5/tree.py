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
class FixedText:
    """An attribute value of ASCII text as a scalar fixed-length, null-terminated string
    of ``size`` bytes (its length and a NUL unless given), as the HDF5 dimension scale
    API and netCDF-C write ``CLASS``, ``NAME`` and ``_NCProperties``."""

    text: str
    size: int | None = None


@dataclass(frozen=True)
class DimensionList:
    """An attribute value naming each dimension's scales (their paths), as the HDF5
    dimension scale API writes ``DIMENSION_LIST``: a variable-length sequence of object
    references a dimension."""

    scales: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ReferenceList:
    """An attribute value naming the datasets a dimension scale is attached to, each with
    the dimension it is attached to, as ``REFERENCE_LIST`` (records of ``dataset``, an
    object reference, and ``dimension``, a uint32, as HDF5 2 and netCDF-C write it)."""

    users: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Array:
    """An array: ``dtype`` is that of its file's bytes (C order, its own byte order),
    ``fill`` a 0-d array of it (the Zarr fill value) or None; ``stored`` False: a dataset
    with no storage (reads give the fill value), as netCDF-C's dimension-only datasets."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fill: np.ndarray | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    stored: bool = True

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
