"""A Zarr group and everything below it as one HDF5 file (``headers/hdf5`` lays it out):
groups as groups, each array shown as a file as a contiguous dataset whose data region is
exactly that file's bytes (their byte order the datatype's), the Zarr fill value as the
dataset's, the store's attributes as HDF5 attributes. Made from metadata alone.

netCDF-4 on top (:mod:`.hdf5.netcdf4`): the dimensions named by ``_ARRAY_DIMENSIONS``
(v2, as xarray writes; the attribute then left out) or ``dimension_names`` (v3) as
dimension scales (its coordinate, or a dataset with no storage named for it), and
``_FillValue`` typed as the array where xarray masks with one (as the ``.nc`` of
:mod:`.netcdf_group`), so xarray reads from the file what it reads from the store."""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import zarrmount
from zarrmount.format.model import ArrayMeta
from zarrmount.headers.hdf5 import Array, Group, Hdf5Layout, Omission, hdf5_layout
from zarrmount.headers.hdf5.netcdf4 import Named, netcdf4
from zarrmount.headers.hdf5.walk import MAX_DEPTH
from zarrmount.headers.netcdf_group import fill_replaces, given_dimensions, masked_fill

log = logging.getLogger(__name__)


# why an array of variable-length strings is left out (HDF5 holds such strings in its
# global heap, never as an array file's bytes)
STRINGS = "its variable-length strings are no array file's bytes"


@cache
def _properties() -> str:
    """The root's ``_NCProperties``: netCDF-C's provenance, naming the writer (looked up
    when first needed: reading the package's version costs a short command's start)."""
    return f"version=2,zarrmount={zarrmount.__version__}"


@dataclass(frozen=True)
class Entry:
    """One node of the group's subtree as the mount shows it."""

    path: str  # below the file's group: "" the group itself, "a", "a/b"
    attributes: Mapping[str, Any]  # the node's user attributes as the store has them
    meta: ArrayMeta | None = None  # an array's metadata; None: a group (or see why_not)
    dtype: np.dtype | None = None  # of the array FILE's bytes; None: a group, or not shown
    why_not: str = ""  # an array not shown as a file: why (its meta None where unread)


@dataclass(frozen=True)
class H5File:
    """The file's layout (a data region's path is the ``Entry.path`` of the array whose
    file bytes go there) and what it leaves out: (path, why) of a member left out, an
    attribute (``why`` begins ``attribute 'NAME':``) or an array's dimensions (``why``
    begins ``dimension 'NAME'``: the array is there, over no named dimensions). A
    coordinate left out gives its name to a dimension-only dataset."""

    layout: Hdf5Layout
    omitted: list[tuple[str, str]]


def file_name(group_path: str, dataset: str) -> str:
    """A group's HDF5 file: its own name, the dataset's for the root, and ``.h5``."""
    return (group_path.rpartition("/")[2] or dataset) + ".h5"


def _fill(meta: ArrayMeta, dtype: np.dtype) -> np.ndarray | None:
    """The Zarr fill value as the file's dtype, None where it is none of its values."""
    try:
        return np.asarray(meta.fill_value).astype(dtype)
    except (TypeError, ValueError):
        return None


def _named(meta: ArrayMeta) -> Named | None:
    """The array's dimension names, where it names every one."""
    given = given_dimensions(meta)
    if given is None or not all(isinstance(name, str) for name in given):
        return None
    return Named(tuple(given), "_ARRAY_DIMENSIONS" if meta.zarr_format == 2 else None)


def _attributes(entry: Entry, meta: ArrayMeta, dtype: np.dtype) -> Mapping[str, Any]:
    """An array's attributes, ``_FillValue`` typed as its file where xarray masks with
    one (not where it is none of its values: xarray fails on it too)."""
    if not fill_replaces(meta):
        return entry.attributes
    own = {k: v for k, v in entry.attributes.items() if k != "_FillValue"}
    value = masked_fill(meta)
    if value is not None:
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            own["_FillValue"] = np.asarray(value, dtype=dtype)  # 0-d: its byte order
    return own


class _Tree:
    """The :class:`Group` tree of the entries, and their dimension names."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.members: dict[str, list[Entry]] = defaultdict(list)
        self.root: Entry | None = None
        self.names: dict[str, Named] = {}
        for entry in entries:
            if entry.path:
                self.members[entry.path.rpartition("/")[0]].append(entry)
            else:
                self.root = entry

    def group(self, entry: Entry, depth: int = 0) -> Group:
        """``entry``'s group; below the depth the layout keeps, groups without members."""
        arrays: list[Array] = []
        groups: list[Group] = []
        left_out: list[tuple[str, str]] = []
        for member in self.members[entry.path] if depth <= MAX_DEPTH else ():
            name = member.path.rpartition("/")[2]
            if member.meta is None and not member.why_not:
                groups.append(self.group(member, depth + 1))
            elif member.dtype is None:
                left_out.append((name, member.why_not or "not shown as a file"))
            else:
                arrays.append(self.array(name, member))
        name = entry.path.rpartition("/")[2]
        return Group(name, entry.attributes, groups, arrays, left_out)

    def array(self, name: str, entry: Entry) -> Array:
        meta, dtype = entry.meta, entry.dtype
        assert meta is not None and dtype is not None  # an array shown as a file
        named = _named(meta)
        if named is not None:
            self.names[entry.path] = named
        attributes = _attributes(entry, meta, dtype)
        return Array(name, meta.shape, dtype, _fill(meta, dtype), attributes)


def _why(omission: Omission) -> str:
    if omission.attribute is None:
        return omission.why
    return f"attribute {omission.attribute!r}: {omission.why}"


def h5_file(entries: Sequence[Entry]) -> H5File:
    """The HDF5 file of a group's subtree: ``entries`` in any order, every group's
    included, the file's own group with the path ``""``."""
    tree = _Tree(entries)
    if tree.root is None:
        raise ValueError("no entry of the file's own group (path '')")
    root, dropped = netcdf4(tree.group(tree.root), tree.names, _properties())
    layout = hdf5_layout(root)
    omitted = [(o.path, _why(o)) for o in layout.omitted] + dropped
    for path, why in omitted:
        log.debug("%s: left out of the HDF5 file: %s", path or "/", why)
    return H5File(layout, omitted)
