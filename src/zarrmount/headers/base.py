"""What every header generator shares: the refusal, and names of types in its message."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

T = TypeVar("T")


class NotApplicable(Exception):
    """The array gets no header of this kind; the message tells a person why."""


def type_name(dtype: np.dtype) -> str:
    """A short name of ``dtype`` for messages: its NumPy name, or its family when the
    name says little (``void96`` for a record)."""
    if dtype.names is not None:
        return "structured (record) types"
    if dtype.subdtype is not None:
        return "sub-array types"
    if dtype.kind in "SU":
        return "fixed-length strings"
    if dtype.kind == "V":
        return "opaque (void) types"
    if dtype.hasobject:
        return "Python object types"
    return dtype.name


def plain_type(table: dict[tuple[str, int], T], dtype: np.dtype, format_name: str) -> T:
    """``table``'s entry for a plain (not structured, not sub-array) ``dtype`` by kind and
    size; NotApplicable naming the format when it has none."""
    found = None
    if dtype.names is None and dtype.subdtype is None:
        found = table.get((dtype.kind, dtype.itemsize))
    if found is None:
        raise NotApplicable(f"{format_name} has no {type_name(dtype)}")
    return found
