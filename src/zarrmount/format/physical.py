"""Where an array's elements lie in physical space (microscopy, neuroimaging, electron
microscopy): for each axis its kind and unit, and the scale and translation that map an
index to a coordinate, ``index * scale + translation``, as OME-Zarr gives them.

Pure: callers give a group's attributes and its arrays' shapes and dtypes, as to
``format/multiscales.py``, whose pyramid gives each level's composed transform. Where
each array's space comes from:

- OME-Zarr 0.4 (``multiscales``) and 0.5 (``ome.multiscales``): the level's transform
  and the multiscale's ``axes``, one per dimension, with their ``type`` (space, time,
  channel or another) and ``unit``, read as the UDUNITS-2 names OME-Zarr lists;
- the zarr-conventions multiscales (either form) where the group names no CRS (a group
  with ``proj:`` attributes or ``geo:proj`` is on a map, ``format/georef.py``): each
  level in the pixels of the level all derive from, no units; the spatial convention's
  ``spatial:dimensions`` name the last dimensions as space, and an axis-aligned group
  ``spatial:transform`` (pixel or node registration) maps those pixels to coordinates.

Bad input never raises: an array gets ``Unspaced`` saying why (the group's multiscales
make no pyramid; the array is not one of its levels, dropped for a path that is not an
array of the group, a shape that does not shrink, a scale that is not positive and
finite, a transform whose length is not its dimensions'; the axes are not one per
dimension; no scale given), or a ``Space`` with what holds: a unit that is not known, or
not of its axis's kind, is left out (None) with a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zarrmount.format.multiscales import Arrays, Axis, Level, NoPyramid, Pyramid, Vector, pyramid
from zarrmount.format.multiscales import describe as describe_pyramid

GEO_PROJ = "f010a634-3525-416e-9320-8f44b5bc352c"  # the Zarr conventions' geo:proj
_CRS_KEYS = ("proj:code", "proj:wkt2", "proj:projjson", "_CRS")

# SI prefixes as powers of ten, so that converting between them rounds once
_PREFIXES = {
    "yotta": 24, "zetta": 21, "exa": 18, "peta": 15, "tera": 12, "giga": 9, "mega": 6,
    "kilo": 3, "hecto": 2, "deca": 1, "": 0, "deci": -1, "centi": -2, "milli": -3,
    "micro": -6, "nano": -9, "pico": -12, "femto": -15, "atto": -18, "zepto": -21,
    "yocto": -24,
}  # fmt: skip
# a unit as (factor, power of ten) of the metre or the second
_Size = tuple[float, int]
LENGTHS: dict[str, _Size] = {f"{p}meter": (1.0, e) for p, e in _PREFIXES.items()} | {
    "angstrom": (1.0, -10),
    "inch": (2.54, -2),
    "foot": (3.048, -1),
    "yard": (9.144, -1),
    "mile": (1.609344, 3),
    "parsec": (3.0856775814913673, 16),
}
TIMES: dict[str, _Size] = {f"{p}second": (1.0, e) for p, e in _PREFIXES.items()} | {
    "minute": (6.0, 1),
    "hour": (3.6, 3),
    "day": (8.64, 4),
}
# symbols and spellings met in stores, for UDUNITS-2 names (which also take "metre")
_ALIASES = {
    "micron": "micrometer", "µm": "micrometer", "μm": "micrometer", "um": "micrometer",
    "nm": "nanometer", "mm": "millimeter", "cm": "centimeter", "m": "meter",
    "Å": "angstrom", "s": "second", "ms": "millisecond", "µs": "microsecond",
    "μs": "microsecond", "us": "microsecond", "ns": "nanosecond", "min": "minute",
    "h": "hour",
}  # fmt: skip
_UNITS_OF = {"space": LENGTHS, "time": TIMES}


@dataclass(frozen=True)
class Space:
    axes: tuple[Axis, ...]  # one per dimension, in the array's (C) order
    scale: Vector
    translation: Vector
    convention: str  # "OME-Zarr 0.4", ...
    notes: tuple[str, ...] = ()  # what was passed over, and why

    def dims(self, *types: str | None) -> tuple[int, ...]:
        """The dimensions (C order) whose axes are of one of ``types``."""
        return tuple(i for i, axis in enumerate(self.axes) if axis.type in types)


@dataclass(frozen=True)
class Unspaced:
    reason: str


@dataclass(frozen=True)
class _Frame:
    """What every level of a pyramid shares: its axes, and the transform from the
    coordinates its levels are given in to the space's (the identity for OME-Zarr)."""

    axes: tuple[Axis, ...]
    scale: Vector
    translation: Vector
    notes: tuple[str, ...]
    relative: bool = False  # levels given relative to the first: its own is the identity


def unit_name(given: Any) -> str | None:
    """The UDUNITS-2 name OME-Zarr uses ("micrometer") of a length or time unit as
    written ("micrometre", "µm", "micrometers"), None if it is neither."""
    if not isinstance(given, str):
        return None
    name = _ALIASES.get(given.strip(), given.strip().lower().replace("metre", "meter"))
    for candidate in (name, name.removesuffix("s")):
        if candidate in LENGTHS or candidate in TIMES:
            return candidate
    return None


def length_in(value: float, unit: str | None, target: str) -> float | None:
    """``value`` of the length ``unit`` in ``target`` (both UDUNITS-2 names, or as
    ``unit_name`` reads them): 0.5 micrometer is 5000.0 angstrom. None if either is not
    a length."""
    return _converted(value, unit, target, LENGTHS)


def time_in(value: float, unit: str | None, target: str) -> float | None:
    """``value`` of the time ``unit`` in ``target``; None if either is not a time."""
    return _converted(value, unit, target, TIMES)


def _converted(value: float, unit: str | None, target: str, table: dict) -> float | None:
    given, wanted = table.get(unit_name(unit)), table.get(unit_name(target))
    if given is None or wanted is None:
        return None
    power = given[1] - wanted[1]
    factor = given[0] / wanted[0]
    # by an int power of ten: between decimal units one rounding, 0.5 um is 5000.0 A
    return value * factor * 10**power if power >= 0 else value * factor / 10**-power


def spaces(attributes: Mapping[str, Any], arrays: Arrays) -> dict[str, Space | Unspaced]:
    """The space of each of ``arrays`` (a group's, by name: shape and dtype) its group's
    multiscales gives, or why none; empty when the group declares no multiscales."""
    found = pyramid(attributes, arrays)
    if found is None:
        return {}
    if isinstance(found, NoPyramid):
        return dict.fromkeys(arrays, Unspaced(f"its group's multiscales: {found.reason}"))
    frame = _frame(found, attributes)
    levels = {level.path: level for level in found.levels}
    outside = Unspaced(f"not one of its group's {describe_pyramid(found)}")
    return {
        name: _level(levels[name], found, frame) if name in levels else outside for name in arrays
    }


def describe(found: Space | Unspaced) -> str:
    """One line for ``--inspect``: "z 0.5 micrometer, y 0.1 micrometer, x 0.1 micrometer
    (OME-Zarr 0.4)", a translation as "from 10", or why there is no space."""
    if isinstance(found, Unspaced):
        return f"none: {found.reason}"
    parts = []
    for axis, scale, moved in zip(found.axes, found.scale, found.translation, strict=True):
        if axis.type == "channel":
            parts.append(f"{axis.name} channels")
            continue
        unit = f" {axis.unit}" if axis.unit else ""
        start = f" from {moved:.10g}" if moved else ""
        parts.append(f"{axis.name} {scale:.10g}{unit}{start}")
    notes = "".join(f"; {n}" for n in found.notes)
    return f"{', '.join(parts)} ({found.convention}){notes}"


def _frame(found: Pyramid, attributes: Mapping[str, Any]) -> _Frame | Unspaced:
    ndim = len(found.levels[0].shape)
    if found.convention.startswith("OME-Zarr"):
        if found.axes is None:
            return Unspaced(f"the multiscales' axes are not {ndim} named axes")
        axes, notes = _units(found.axes)
        return _Frame(axes, (1.0,) * ndim, (0.0,) * ndim, notes)
    if _on_a_map(attributes):
        return Unspaced("its group names a CRS: it lies on a map, not in a physical space")
    return _convention_frame(attributes, ndim)


def _units(axes: tuple[Axis, ...]) -> tuple[tuple[Axis, ...], tuple[str, ...]]:
    """The axes with their units' UDUNITS-2 names; a unit not known, or not of its
    axis's kind, left out with a note."""
    kept, notes = [], []
    for axis in axes:
        name = unit_name(axis.unit)
        known = _UNITS_OF.get(axis.type or "", LENGTHS | TIMES)
        if axis.unit is not None and name not in known:
            kind = f"{axis.type} " if axis.type in _UNITS_OF else ""
            notes.append(f"axis {axis.name}: unit {axis.unit!r} is not a known {kind}unit")
            name = None
        kept.append(Axis(axis.name, axis.type, name))
    return tuple(kept), tuple(notes)


def _on_a_map(attributes: Mapping[str, Any]) -> bool:
    metadata = attributes.get("zarr_conventions_metadata")
    framework = isinstance(metadata, Mapping) and GEO_PROJ in metadata
    return framework or any(key in attributes for key in _CRS_KEYS)


def _convention_frame(attributes: Mapping[str, Any], ndim: int) -> _Frame:
    """The zarr-conventions multiscales' frame: the spatial convention's dimensions (the
    last ones) and its transform, where given; no units."""
    notes = ["the zarr-conventions multiscales gives no units"]
    named = attributes.get("spatial:dimensions")
    if not (isinstance(named, list) and all(isinstance(n, str) for n in named)):
        named = []
    if len(named) > ndim:
        notes.append(f"spatial:dimensions names {len(named)} of {ndim} dimensions: not read")
        named = []
    lead = ndim - len(named)
    axes = [Axis(f"dim_{i}") for i in range(lead)]
    axes += [Axis(name, "space") for name in named]
    scale, moved = [1.0] * ndim, [0.0] * ndim
    affine = _spatial_transform(attributes, notes) if len(named) == 2 else None
    if affine is not None:
        (scale[-1], moved[-1]), (scale[-2], moved[-2]) = affine
    return _Frame(tuple(axes), tuple(scale), tuple(moved), tuple(notes), relative=True)


def _spatial_transform(attributes: Mapping[str, Any], notes: list[str]) -> tuple | None:
    """``spatial:transform`` a, b, c, d, e, f as (x scale, x at the first sample centre),
    (y scale, y ...), where it is axis-aligned with positive pixel sizes."""
    given = attributes.get("spatial:transform")
    if given is None:
        return None
    numbers = _finite(given, 6)
    if numbers is None or numbers[1] or numbers[3] or numbers[0] <= 0 or numbers[4] <= 0:
        notes.append(f"spatial:transform {given!r:.80} not read: not axis-aligned and positive")
        return None
    a, _, c, _, e, f = numbers
    half = 0.0 if attributes.get("spatial:registration") == "node" else 0.5
    return (a, c + half * a), (e, f + half * e)


def _finite(given: Any, count: int) -> tuple[float, ...] | None:
    if not isinstance(given, list) or len(given) != count:
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in given):
        return None
    values = tuple(float(v) for v in given)
    return values if all(math.isfinite(v) for v in values) else None


def _level(level: Level, found: Pyramid, frame: _Frame | Unspaced) -> Space | Unspaced:
    """A level's space: its transform, then the frame's."""
    if isinstance(frame, Unspaced):
        return frame
    ndim = len(level.shape)
    scale = level.scale
    if scale is None and frame.relative and level is found.levels[0]:
        scale = (1.0,) * ndim
    if scale is None:
        return Unspaced(f"{found.convention} gives it no scale")
    moved = level.translation or (0.0,) * ndim
    return Space(
        frame.axes,
        tuple(s * f for s, f in zip(scale, frame.scale, strict=True)),
        tuple(t * f + g for t, f, g in zip(moved, frame.scale, frame.translation, strict=True)),
        found.convention,
        (*found.notes, *frame.notes),
    )
