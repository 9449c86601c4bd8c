"""A tree made a netCDF-4 file: named dimensions as HDF5 dimension scales, laid out as
netCDF-C lays them out, so netCDF-C, h5netcdf (xarray) and the HDF5 dimension scale API
read the arrays' dimensions by name.

- a 1-D array named like its only dimension is that dimension's coordinate: the scale;
- a dimension with no coordinate is a dataset with no storage named for it, in the group
  where it is first used (``float`` big-endian, ``NAME`` saying it is a dimension but not
  a variable, as netCDF-C's): visible there and below, as netCDF-4 scopes dimensions;
  a use below reuses the nearest dimension of that name in scope if its length is the
  same, and makes its own otherwise;
- an array over dimensions holds ``DIMENSION_LIST`` (its scales), a scale ``CLASS``,
  ``NAME``, ``REFERENCE_LIST`` (its users) and ``_Netcdf4Dimid`` (unique in the file,
  numbered as the groups are read: each group's, then its groups'); the root holds
  ``_NCProperties``.

A coordinate the file cannot hold (of a type HDF5 has not) gives its place to a
dimension-only dataset of its name, and is named left out. An array whose dimensions
cannot be (a name used with two lengths in one group, taken by a member that is not its
coordinate, or that netCDF refuses) keeps none, and says why in its
``zarrmount_omitted`` attribute; netCDF-C then names its axes ``phony_dim_N``.
"""

from __future__ import annotations

from collections import ChainMap, Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from zarrmount.headers.hdf5.objects import OMITTED, array_problem
from zarrmount.headers.hdf5.tree import Array, DimensionList, FixedText, Group, ReferenceList
from zarrmount.headers.hdf5.walk import join, kept_members
from zarrmount.headers.netcdf_group import name_problem

NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."
_NO_DATA = np.dtype(">f4")  # a dimension-only dataset's type, as netCDF-C's

Scope = ChainMap[str, "_Dimension"]


class Named(NamedTuple):
    """An array's dimension names, one an axis, and the attribute that named them (left
    out where they became dimensions)."""

    dimensions: tuple[str, ...]
    attribute: str | None = None


@dataclass
class _Dimension:
    path: str  # its scale's
    length: int
    dimid: int
    users: list[tuple[str, int]] = field(default_factory=list)  # (array, axis)


class _Plan:
    """Where every dimension lies and which arrays use which."""

    def __init__(self, root: Group, names: Mapping[str, Named]) -> None:
        self.names = names
        self.scales: dict[str, _Dimension] = {}  # scale path -> its dimension
        self.only: dict[str, list[tuple[str, _Dimension]]] = defaultdict(list)  # group's
        self.used: dict[str, tuple[str, ...]] = {}  # array -> its scales' paths
        self.dimensioned: set[str] = set()  # arrays over dimensions (scales too)
        self.dropped: dict[str, str] = {}  # array -> why it has no dimensions
        self._group(root, "", 0, ChainMap())

    def _define(self, path: str, length: int) -> _Dimension:
        dimension = _Dimension(path, length, len(self.scales))
        self.scales[path] = dimension
        return dimension

    def _group(self, group: Group, path: str, depth: int, visible: Scope) -> None:
        members = [node for _, node in kept_members(group, depth, [])]
        arrays = [node for node in members if isinstance(node, Array)]
        own: dict[str, _Dimension] = {}
        for array in arrays:
            if self._is_coordinate(array, join(path, array.name)):
                own[array.name] = self._define(join(path, array.name), array.shape[0])
                self.dimensioned.add(join(path, array.name))
        taken = {node.name for node in (*group.arrays, *group.groups)} - set(_unheld(group))
        scope = visible.new_child(own)
        for array in arrays:
            at = join(path, array.name)
            if at in self.names and at not in self.scales:
                self._use(array, at, path, scope, taken)
        for node in members:
            if isinstance(node, Group):
                self._group(node, join(path, node.name), depth + 1, scope)

    def _is_coordinate(self, array: Array, path: str) -> bool:
        named = self.names.get(path)
        return (
            named is not None
            and named.dimensions == (array.name,)
            and len(array.shape) == 1
            and not name_problem(array.name)
        )

    def _use(self, array: Array, path: str, group: str, scope: Scope, taken: set[str]) -> None:
        """``array`` over its named dimensions, made where none in scope has its length."""
        dimensions = self.names[path].dimensions
        found: list[_Dimension] = []
        new: dict[str, int] = {}
        for axis, (name, length) in enumerate(zip(dimensions, array.shape, strict=True)):
            nearest = scope.get(name)
            if name in new or (nearest is not None and nearest.length == length):
                why = None if new.get(name, length) == length else "the array has two lengths"
            else:
                why = _unmade(name, nearest, scope.maps[0], taken)
                new[name] = length
            if why:
                self.dropped[path] = f"dimension {name!r} (axis {axis}): {why}"
                return
        for name, length in new.items():
            scope.maps[0][name] = made = self._define(join(group, name), length)
            self.only[group].append((name, made))
        for axis, name in enumerate(dimensions):
            found.append(scope[name])
            scope[name].users.append((path, axis))
        self.used[path] = tuple(d.path for d in found)
        self.dimensioned.add(path)


def _unmade(
    name: str, nearest: _Dimension | None, own: Mapping[str, _Dimension], taken: set[str]
) -> str | None:
    """Why the dimension ``name`` cannot be made in the group, or None."""
    if name in own and nearest is not None:
        return f"the group's has length {nearest.length}"
    if name in taken:
        return "a member of the group that is not its coordinate has the name"
    problem = name_problem(name)
    return f"netCDF refuses the name: {problem}" if problem else None


def _unheld(group: Group) -> dict[str, str]:
    """The group's arrays of types the file has not, by their (otherwise unique) names,
    and why: a dimension of the name takes the place of such a coordinate."""
    count = Counter(node.name for node in (*group.arrays, *group.groups))
    problems = {a.name: array_problem(a) for a in group.arrays if count[a.name] == 1}
    return {name: why for name, why in problems.items() if why}


def _scale(dimension: _Dimension, name: str) -> dict[str, object]:
    """A scale's attributes, as the dimension scale API and netCDF-C write them."""
    found: dict[str, object] = {"CLASS": FixedText("DIMENSION_SCALE"), "NAME": FixedText(name)}
    if dimension.users:
        found["REFERENCE_LIST"] = ReferenceList(tuple(dimension.users))
    found["_Netcdf4Dimid"] = np.int32(dimension.dimid)
    return found


class _Maker:
    """The tree again, with the plan's scales and attributes."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def group(self, group: Group, path: str) -> Group:
        only = dict(self.plan.only.get(path, ()))
        displaced = {name: why for name, why in _unheld(group).items() if name in only}
        arrays = [
            self.array(a, join(path, a.name)) for a in group.arrays if a.name not in displaced
        ]
        arrays += [self.only(name, d) for name, d in only.items()]
        groups = [self.group(g, join(path, g.name)) for g in group.groups]
        left_out = [*group.left_out, *displaced.items()]
        return replace(group, groups=groups, arrays=arrays, left_out=left_out)

    def array(self, array: Array, path: str) -> Array:
        plan, attributes = self.plan, dict(array.attributes)
        named = plan.names.get(path)
        if path in plan.dimensioned and named is not None and named.attribute:
            attributes.pop(named.attribute, None)
        if plan.used.get(path):  # a scalar has none
            attributes["DIMENSION_LIST"] = DimensionList(tuple((s,) for s in plan.used[path]))
        if path in plan.scales:
            attributes |= _scale(plan.scales[path], array.name)
        why = plan.dropped.get(path)
        if why:
            given = attributes.get(OMITTED)
            attributes[OMITTED] = f"{given}; {why}" if isinstance(given, str) else why
        return replace(array, attributes=attributes)

    def only(self, name: str, dimension: _Dimension) -> Array:
        """A dimension with no coordinate: a dataset with no storage."""
        shown = f"{NOT_A_VARIABLE}{dimension.length:10d}"
        return Array(name, (dimension.length,), _NO_DATA, None, _scale(dimension, shown), False)


def netcdf4(
    root: Group, names: Mapping[str, Named], properties: str
) -> tuple[Group, list[tuple[str, str]]]:
    """``root`` as a netCDF-4 file: the arrays at ``names``' paths over the dimensions
    named there; ``properties`` the root's ``_NCProperties``. Also which arrays keep no
    dimensions, and why."""
    plan = _Plan(root, names)
    made = _Maker(plan).group(root, "")
    attributes = {**made.attributes, "_NCProperties": FixedText(properties, len(properties))}
    return replace(made, attributes=attributes), list(plan.dropped.items())
