"""A Zarr group as netCDF classic sees it (``headers/netcdf.py`` writes it): its arrays as
variables over named dimensions, their attributes typed as netCDF expects, ``_FillValue``
where xarray masks with one when it reads the Zarr store, so that CF-aware readers decode
from the file what xarray decodes from the store. Made from metadata alone."""

from __future__ import annotations

import base64
import json
import logging
import struct
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrmount.format.model import ArrayMeta
from zarrmount.headers.base import NotApplicable, plain_type
from zarrmount.headers.netcdf import (
    NC_BYTE,
    NC_CHAR,
    NC_DOUBLE,
    NC_DTYPES,
    NC_FLOAT,
    NC_INT,
    NC_INT64,
    NC_SHORT,
    NC_UINT64,
    Attribute,
    Classic,
    Variable,
    classic,
)

log = logging.getLogger(__name__)

OMITTED = "zarrmount_omitted"  # the global attribute naming the arrays left out, and why
STRINGS = "netCDF classic has no variable-length strings"  # why such arrays are left out

# (NumPy kind, item size) -> nc_type; unsigned 8/16/32-bit as the signed type + _Unsigned
_TYPES: dict[tuple[str, int], int] = {
    ("b", 1): NC_BYTE,
    ("i", 1): NC_BYTE,
    ("u", 1): NC_BYTE,
    ("i", 2): NC_SHORT,
    ("u", 2): NC_SHORT,
    ("i", 4): NC_INT,
    ("u", 4): NC_INT,
    ("i", 8): NC_INT64,
    ("u", 8): NC_UINT64,
    ("f", 4): NC_FLOAT,
    ("f", 8): NC_DOUBLE,
}
_INT32 = (-(1 << 31), (1 << 31) - 1)


@dataclass(frozen=True)
class Member:
    """One array of the group: its name, metadata and the dtype of its file's bytes."""

    name: str
    meta: ArrayMeta | None  # None: not an array shown as a file (strings)
    dtype: np.dtype | None
    why_not: str = ""  # when meta is None


@dataclass(frozen=True)
class GroupFile:
    layout: Classic
    members: list[Member]  # of each variable, in the file's order
    omitted: list[tuple[str, str]]  # (array name, why)


def file_name(group_path: str, dataset: str) -> str:
    """A group's netCDF file: its own name, the dataset's for the root, and ``.nc``."""
    return (group_path.rpartition("/")[2] or dataset) + ".nc"


def nc_type(dtype: np.dtype) -> int:
    """The nc_type of an array's elements; NotApplicable where netCDF classic has none."""
    if dtype.kind in "SU" and dtype.itemsize:
        return NC_CHAR  # with one more dimension: the characters
    return plain_type(_TYPES, dtype, "netCDF classic")


def name_problem(name: str) -> str | None:
    """Why netCDF refuses ``name`` (its rules for every name), or None."""
    if not name:
        return "it is empty"
    if unicodedata.normalize("NFC", name) != name:
        return "it is not in Unicode normal form C"
    if name[0].isascii() and not (name[0].isalnum() or name[0] == "_"):
        return f"it begins with {name[0]!r}"
    if "/" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "it contains '/' or a control character"
    if name[-1].isspace():
        return "it ends with white space"
    return None


def why_not(name: str, meta: ArrayMeta, dtype: np.dtype) -> str | None:
    """Why the array is no variable of its group's netCDF file, or None."""
    problem = name_problem(name)
    if problem:
        return f"netCDF refuses the name: {problem}"
    try:
        nc_type(dtype)
    except NotApplicable as e:
        return str(e)
    if 0 in meta.shape:
        return "an empty axis (netCDF classic's only empty dimension is the record one)"
    return None


class _Dimensions:
    """The group's dimensions: a name used with two lengths is split (``x``, ``x_20``)."""

    def __init__(self) -> None:
        self.lengths: dict[str, int] = {}
        self.ids: dict[str, int] = {}
        self.tuples: dict[tuple[int, ...], tuple[int, ...]] = {}

    def take(self, name: str, length: int, user: str) -> int:
        """The id of the dimension ``name`` of ``length`` (``user`` names the array)."""
        found = name
        while self.lengths.get(found, length) != length:
            found += f"_{length}" if found == name else "_"
        if found != name:
            log.warning("%s: dimension %r has two lengths: %r is %d", user, name, found, length)
        if found not in self.ids:
            self.ids[found] = len(self.ids)
            self.lengths[found] = length
        return self.ids[found]

    def shared(self, dimids: tuple[int, ...]) -> tuple[int, ...]:
        """One tuple for every variable over the same dimensions (10,000 of them)."""
        return self.tuples.setdefault(dimids, dimids)


def given_dimensions(meta: ArrayMeta) -> Sequence[Any] | None:
    """The array's dimension names as the store gives them, one an axis (each a name or
    not): ``_ARRAY_DIMENSIONS`` (v2, as xarray writes), ``dimension_names`` (v3)."""
    given: Sequence[Any] | None = meta.dimension_names
    if meta.zarr_format == 2:
        given = meta.attributes.get("_ARRAY_DIMENSIONS")
    if not isinstance(given, (list, tuple)) or len(given) != len(meta.shape):
        return None
    return given


def _names(name: str, meta: ArrayMeta) -> list[str]:
    """The array's dimension names as given, or made from the array's name."""
    given = given_dimensions(meta) or [None] * len(meta.shape)
    return [
        g if isinstance(g, str) and not name_problem(g) else f"{name}_dim{i}"
        for i, g in enumerate(given)
    ]


def _numbers(values: list[int | float], version: int) -> tuple[int, np.ndarray] | None:
    """The least netCDF type holding every one of ``values`` exactly."""
    if all(isinstance(v, int) for v in values):
        low, high = min(values), max(values)
        if _INT32[0] <= low and high <= _INT32[1]:
            return NC_INT, np.array(values, ">i4")
        if version == 5 and low >= -(1 << 63) and high < 1 << 63:
            return NC_INT64, np.array(values, ">i8")
    doubles = np.array(values, ">f8")
    ok = all(isinstance(v, float) or float(v) == v for v in values)
    return (NC_DOUBLE, doubles) if ok else None


def attribute(name: str, value: Any, version: int) -> Attribute:
    """``value`` typed as netCDF expects: text as char, booleans as bytes, numbers and lists
    of them as the least type holding them; anything else as JSON text."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return Attribute(name, NC_CHAR, raw, len(raw))
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, bool) for v in items):
        return Attribute(name, NC_BYTE, bytes(map(int, items)), len(items))
    numeric = items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
    typed = _numbers(items, version) if numeric else None
    if typed is not None:
        code, array = typed
        return Attribute(name, code, array.tobytes(), len(array))
    return attribute(name, json.dumps(value, ensure_ascii=False), version)


def fill_replaces(meta: ArrayMeta) -> bool:
    """Whether the store's ``_FillValue`` attribute gives way to the typed one of
    :func:`masked_fill`: a v3 array's holds its encoding; a v2 array's fill value is the
    one xarray masks with."""
    return meta.zarr_format == 3 or meta.fill_json is not None


def masked_fill(meta: ArrayMeta) -> Any:
    """The value xarray masks with when it reads the array from Zarr, or None: a v2
    array's fill value; a v3 array's ``_FillValue`` attribute (floats as base64 of a
    little-endian double)."""
    if meta.zarr_format == 2:
        return None if meta.fill_json is None else meta.fill_value
    value = meta.attributes.get("_FillValue")
    if meta.dtype.kind == "f" and isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
            return struct.unpack("<d", raw)[0] if len(raw) == 8 else None
        except (ValueError, struct.error):
            return None
    return value if isinstance(value, (int, float)) else None


def _fill_attribute(meta: ArrayMeta, dtype: np.dtype, code: int) -> list[Attribute]:
    """``_FillValue`` typed as the variable (an unsigned one's bits as its signed type)."""
    value = masked_fill(meta)
    if value is None or code == NC_CHAR:
        return []
    stored = NC_DTYPES[code]
    try:
        native = np.asarray(value, dtype=dtype.newbyteorder("="))
    except (TypeError, ValueError, OverflowError):
        return []  # not a value of its type: xarray fails on it too
    typed = native.view(stored.newbyteorder("=")).astype(stored)
    return [Attribute("_FillValue", code, typed.tobytes(), 1)]


def _member_attributes(member: Member, version: int) -> list[Attribute]:
    """A variable's attributes, made again each time its header entry is (never held)."""
    assert member.meta is not None and member.dtype is not None  # a variable's
    return _variable_attributes(member.meta, member.dtype, version)


def _variable_attributes(meta: ArrayMeta, dtype: np.dtype, version: int) -> list[Attribute]:
    code = nc_type(dtype)
    own = dict(meta.attributes)
    if meta.zarr_format == 2:
        own.pop("_ARRAY_DIMENSIONS", None)
    if fill_replaces(meta):
        own.pop("_FillValue", None)  # typed, below
    if dtype.kind == "u" and dtype.itemsize < 8:
        own.setdefault("_Unsigned", "true")
    elif dtype.kind == "b":
        own.setdefault("dtype", "bool")  # as xarray writes booleans to netCDF
    elif dtype.kind == "U":
        own.setdefault("_Encoding", "utf-8")
    # 64-bit integer attributes only in CDF-5, whose types only its files hold: every
    # attribute fits the version it is made for
    found = [attribute(k, v, version) for k, v in own.items() if not name_problem(k)]
    return found + _fill_attribute(meta, dtype, code)


def _global_attributes(
    attributes: dict[str, Any], omitted: list[tuple[str, str]], version: int
) -> list[Attribute]:
    own = {k: v for k, v in attributes.items() if not name_problem(k)}
    if omitted:
        own[OMITTED] = "; ".join(f"{name}: {why}" for name, why in omitted)
    return [attribute(k, v, version) for k, v in own.items()]


def group_file(attributes: dict[str, Any], members: Sequence[Member], where: str) -> GroupFile:
    """The netCDF classic file of a group with ``attributes`` and arrays ``members``
    (``where`` names the group in warnings)."""
    dims = _Dimensions()
    shown: list[Member] = []
    variables: list[Variable] = []
    omitted: list[tuple[str, str]] = []
    for m in sorted(members, key=lambda m: m.name):
        meta, dtype = m.meta, m.dtype
        why = m.why_not if meta is None or dtype is None else why_not(m.name, meta, dtype)
        if why or meta is None or dtype is None:
            omitted.append((m.name, why or "not shown"))
            continue
        lengths = list(meta.shape)
        names = _names(m.name, meta)
        if dtype.kind in "SU":  # the characters of each element: one more dimension
            lengths.append(dtype.itemsize)
            names.append(f"strlen{dtype.itemsize}")
        user = f"{where}/{m.name}"
        dimids = tuple(dims.take(n, k, user) for n, k in zip(names, lengths, strict=True))
        variables.append(Variable(m.name, dims.shared(dimids), nc_type(dtype), meta.nbytes, m))
        shown.append(m)
    layout = classic(
        list(dims.lengths.items()),
        lambda version: _global_attributes(attributes, omitted, version),
        variables,
        _member_attributes,
    )
    return GroupFile(layout, shown, omitted)
