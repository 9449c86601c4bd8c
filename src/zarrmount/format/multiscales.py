"""Which arrays of a group are the levels of a pyramid, full resolution first, with each
level's scale and translation where its convention gives them (the ``.tif`` view of the
full-resolution array carries the others as overviews).

Pure: callers give the group's attributes and, for each array directly in the group, its
shape and dtype. The declarations, in the order they are tried (the first that gives a
pyramid wins; the others are named in its notes):

1. OME-Zarr 0.5 (Zarr v3): ``attributes["ome"]["multiscales"]``, version in ``ome``;
2. OME-Zarr 0.1-0.4: a ``multiscales`` list of ``{"version", "axes", "datasets": [{"path",
   "coordinateTransformations"}], "coordinateTransformations"}``;
3. the zarr-conventions multiscales convention, as GDAL 3.13 reads it: a ``multiscales``
   object ``{"layout": [{"asset", "derived_from", "transform": {"scale",
   "translation"}}]}`` with the convention named in ``zarr_conventions`` (by ``uuid``,
   ``schema_url`` or ``spec_url``);
4. the same convention in the Zarr conventions framework 0.1.0:
   ``zarr_conventions_metadata[MULTISCALES_UUID]["configuration"]["layout"]``, whose
   proposal named the fields ``group``/``from_group`` with ``scale``/``translation`` on
   the level itself (read as aliases, in both forms).

Rules. Levels come largest first (most elements; declaration order breaks ties), whatever
order they are declared in. A declared level that does not hold is dropped, with a note
saying why, and the others kept: a path that is not an array directly in the group ("0"
and "./0" are; "0/data", "../0" and child groups are not), a path declared twice, another
number of dimensions or dtype than the first level, a level not smaller than the one
before it (no larger in every dimension, smaller in one), a transform that does not read
(not a list, an unknown type, a scale of the wrong length or not positive and finite, a
translation not finite). Of several OME multiscales the first is read, with a note. A
block that is not of its convention's form, or whose levels all drop, is a ``NoPyramid``
with the reason. Nothing raises.

Scale and translation map a level's indices to coordinates, ``x * scale + translation``:
OME-Zarr composes a dataset's transforms, then the multiscale's own. The convention's
``transform`` is relative to ``derived_from`` (its README; GDAL writes scale = source
size / level size), so it is composed along ``derived_from`` down to the level that
derives from none: the coordinates are that level's pixels. The drafts' scale and
translation on the level itself map its indices to coordinates ("at each level", their
README) and are taken as they are. ``None`` when not given, or when a ``derived_from``
chain does not reach a level deriving from none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

MULTISCALES_UUID = "d35379db-88df-4056-af3a-620245f8e347"
_CONVENTION_URL = "/zarr-conventions/multiscales/"
_CONVENTION = "zarr-conventions multiscales"

Arrays = Mapping[str, tuple[tuple[int, ...], str]]
Vector = tuple[float, ...]
Affine = tuple[Vector | None, Vector | None]  # scale, translation; None: not given
_Kept = tuple[str, tuple[int, ...], Any]  # a level's name, shape and declared entry


@dataclass(frozen=True)
class Axis:
    name: str
    type: str | None = None
    unit: str | None = None


@dataclass(frozen=True)
class Level:
    path: str  # the array's name in the group
    shape: tuple[int, ...]
    scale: Vector | None = None
    translation: Vector | None = None


@dataclass(frozen=True)
class Pyramid:
    levels: tuple[Level, ...]  # full resolution first
    convention: str  # "OME-Zarr 0.4", "zarr-conventions multiscales", ...
    axes: tuple[Axis, ...] | None = None  # OME-Zarr's, when they fit the levels
    notes: tuple[str, ...] = ()  # what was dropped or passed over, and why


@dataclass(frozen=True)
class NoPyramid:
    reason: str


class _Bad(Exception):
    """A declaration, or one level of it, that does not hold."""


@dataclass
class _Block:
    """One multiscales declaration, read up to its levels' paths."""

    label: str
    entries: list[tuple[Any, Any]]  # (declared path, the level's entry), as declared
    transform: Callable[[Any, int], Affine]  # a level's entry and ndim to its affine
    axes: Any = None
    notes: list[str] = field(default_factory=list)


def pyramid(attributes: Mapping[str, Any], arrays: Arrays) -> Pyramid | NoPyramid | None:
    """The pyramid the group declares, why it has none, or None when it declares none."""
    found = _declared(attributes)
    if not found:
        return None
    passed: list[str] = []
    for index, (name, read) in enumerate(found):
        try:
            result = _assemble(read(), arrays)
        except _Bad as bad:
            result = NoPyramid(str(bad))
        if isinstance(result, NoPyramid):
            passed.append(f"{name}: {result.reason}")
            continue
        unread = [f"{other} also declared, not read" for other, _ in found[index + 1 :]]
        return replace(result, notes=(*passed, *result.notes, *unread))
    return NoPyramid("; ".join(passed))


def describe(found: Pyramid | NoPyramid | None) -> str:
    """One line for ``--inspect``: "levels 0, 1, 2 (OME-Zarr 0.4)", or why not."""
    if found is None:
        return "no multiscales"
    if isinstance(found, NoPyramid):
        return f"no pyramid: {found.reason}"
    paths = ", ".join(level.path for level in found.levels)
    return f"levels {paths} ({found.convention})" + "".join(f"; {n}" for n in found.notes)


def _declared(attributes: Mapping[str, Any]) -> list[tuple[str, Callable[[], _Block]]]:
    """Each multiscales declaration of the group, in reading order, with its reader."""
    found: list[tuple[str, Callable[[], _Block]]] = []
    ome = attributes.get("ome")
    if isinstance(ome, Mapping) and "multiscales" in ome:
        found.append(("OME-Zarr 0.5 multiscales", lambda: _ome(ome["multiscales"], ome)))
    if "multiscales" in attributes:
        given = attributes["multiscales"]
        if isinstance(given, Mapping):
            declared = _names_convention(attributes.get("zarr_conventions"))
            found.append((f"{_CONVENTION} layout", lambda: _convention(given, declared)))
        else:
            found.append(("OME-Zarr multiscales", lambda: _ome(given, None)))
    metadata = attributes.get("zarr_conventions_metadata")
    if isinstance(metadata, Mapping) and MULTISCALES_UUID in metadata:
        entry = metadata[MULTISCALES_UUID]
        config = entry.get("configuration") if isinstance(entry, Mapping) else None
        label = f"{_CONVENTION} (conventions 0.1.0)"
        found.append((label, lambda: _layout(config, label)))
    return found


def _names_convention(conventions: Any) -> bool:
    """Whether ``zarr_conventions`` names the multiscales convention (or, as the
    convention's drafts did, is an object keyed by its UUID)."""
    if isinstance(conventions, Mapping):
        return MULTISCALES_UUID in conventions
    if not isinstance(conventions, list):
        return False
    return any(_is_multiscales(entry) for entry in conventions)


def _is_multiscales(entry: Any) -> bool:
    if not isinstance(entry, Mapping):
        return False
    urls = (entry.get(key) for key in ("schema_url", "spec_url"))
    return entry.get("uuid") == MULTISCALES_UUID or any(
        isinstance(url, str) and _CONVENTION_URL in url for url in urls
    )


def _ome(multiscales: Any, ome: Mapping[str, Any] | None) -> _Block:
    """An OME-Zarr ``multiscales`` list (``ome``: the 0.5 object holding it)."""
    if not isinstance(multiscales, list) or not multiscales:
        raise _Bad("multiscales is not a non-empty list")
    block = multiscales[0]
    if not isinstance(block, Mapping) or not isinstance(block.get("datasets"), list):
        raise _Bad("multiscales[0] is not an object with a datasets list")
    version = (ome if ome is not None else block).get("version")
    label = f"OME-Zarr {version}" if isinstance(version, str) else "OME-Zarr"
    outer = block.get("coordinateTransformations")

    def transform(dataset: Any, ndim: int) -> Affine:
        inner = _ome_transforms(dataset.get("coordinateTransformations"), ndim)
        return _then(inner, _ome_transforms(outer, ndim))

    entries = [(_field(d, "path"), d) for d in block["datasets"]]
    notes = [f"{len(multiscales)} multiscales declared, the first read"]
    return _Block(label, entries, transform, block.get("axes"), notes[len(multiscales) < 2 :])


def _ome_transforms(given: Any, ndim: int) -> Affine:
    """A list of OME-Zarr coordinate transformations, composed in their order."""
    affine: Affine = (None, None)
    if given is None:
        return affine
    if not isinstance(given, list):
        raise _Bad("coordinateTransformations is not a list")
    for step in given:
        kind = step.get("type") if isinstance(step, Mapping) else None
        if kind == "scale":
            affine = _then(affine, (_vector(step.get("scale"), ndim, "scale", True), None))
        elif kind == "translation":
            moved = _vector(step.get("translation"), ndim, "translation", False)
            affine = _then(affine, (None, moved))
        elif kind != "identity":
            raise _Bad(f"a coordinate transformation of type {kind!r} is not read")
    return affine


def _convention(multiscales: Mapping[str, Any], declared: bool) -> _Block:
    if not declared:
        raise _Bad(f"a multiscales object, but zarr_conventions does not name {_CONVENTION}")
    return _layout(multiscales, _CONVENTION)


def _layout(config: Any, label: str) -> _Block:
    """The convention's ``layout``: each level's transform relative to the one it
    derives from (drafts: scale and translation on the level, its own)."""
    layout = config.get("layout") if isinstance(config, Mapping) else None
    if not isinstance(layout, list) or not layout:
        raise _Bad("multiscales layout is not a non-empty list")
    entries = [(_field(e, "asset", "group"), e) for e in layout]
    named = {_name_or_none(path): entry for path, entry in reversed(entries)}
    notes: list[str] = []

    def transform(entry: Any, ndim: int) -> Affine:
        if not isinstance(entry, Mapping) or "transform" not in entry:
            return _own(entry, ndim)  # drafted: the level's own, relative to nothing
        found = _chained(entry, named, ndim)
        if found is None:
            notes.append(f"{_field(entry, 'asset', 'group')}: derived_from reaches no base level")
            return None, None
        return found

    return _Block(label, entries, transform, None, notes)


def _chained(entry: Any, named: Mapping[str | None, Any], ndim: int) -> Affine | None:
    """A level's transform composed along ``derived_from``; None if the chain breaks."""
    affine, seen = _own(entry, ndim), set()
    while (source := _field(entry, "derived_from", "from_group")) is not None:
        name = _name_or_none(source)
        if name is None or name in seen or name not in named:
            return None
        seen.add(name)
        entry = named[name]
        try:
            affine = _then(affine, _own(entry, ndim))
        except _Bad:
            return None
    return affine


def _own(entry: Any, ndim: int) -> Affine:
    """A layout level's ``transform`` (or, as drafted, the scale/translation on it)."""
    given = entry.get("transform", entry) if isinstance(entry, Mapping) else None
    if not isinstance(given, Mapping):
        raise _Bad("transform is not an object")
    scale, moved = given.get("scale"), given.get("translation")
    return (
        None if scale is None else _vector(scale, ndim, "scale", True),
        None if moved is None else _vector(moved, ndim, "translation", False),
    )


def _field(entry: Any, *names: str) -> Any:
    """The first of ``names`` an entry has (None: none, or not an object)."""
    if not isinstance(entry, Mapping):
        return None
    return next((entry[n] for n in names if n in entry), None)


def _name(path: Any) -> str:
    """The array a level's path names directly in the group ("0", "./0")."""
    if not isinstance(path, str):
        raise _Bad("no path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or len(parts) != 1 or parts[0] == "..":
        raise _Bad(f"{path!r} is not an array directly in this group")
    return parts[0]


def _name_or_none(path: Any) -> str | None:
    try:
        return _name(path)
    except _Bad:
        return None


def _vector(given: Any, ndim: int, what: str, positive: bool) -> Vector:
    """``ndim`` finite numbers (and positive, for a scale)."""
    if not isinstance(given, list) or len(given) != ndim:
        raise _Bad(f"{what} is not a list of {ndim} numbers")
    values = tuple(_number(v) for v in given)
    for v in values:
        if v is None or not math.isfinite(v) or (positive and v <= 0):
            raise _Bad(f"{what} has {given!r:.60}: not all {'positive ' * positive}numbers")
    return values  # type: ignore[return-value]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _then(first: Affine, second: Affine) -> Affine:
    """``first`` then ``second`` (None, not given, is the identity)."""
    (s1, t1), (s2, t2) = first, second
    if s1 is None or s2 is None:
        scale = s2 if s1 is None else s1
    else:
        scale = tuple(a * b for a, b in zip(s1, s2, strict=True))
    if t1 is None and t2 is None:
        return scale, None
    ndim = len(next(v for v in (s1, t1, s2, t2) if v is not None))
    t1, s2, t2 = t1 or (0.0,) * ndim, s2 or (1.0,) * ndim, t2 or (0.0,) * ndim
    return scale, tuple(t * s + u for t, s, u in zip(t1, s2, t2, strict=True))


def _assemble(block: _Block, arrays: Arrays) -> Pyramid | NoPyramid:
    """The declared levels that hold, largest first, with their transforms and axes."""
    notes = block.notes
    found = _decreasing(_resolved(block, arrays, notes), notes)
    levels = []
    for name, shape, entry in found:
        try:
            scale, moved = _finite(block.transform(entry, len(shape)))
        except _Bad as bad:
            notes.append(f"{name} dropped: {bad}")
            continue
        levels.append(Level(name, shape, scale, moved))
    if not levels:
        return NoPyramid("; ".join(dict.fromkeys(notes)) or "no levels")
    axes = _axes(block.axes, len(levels[0].shape), notes)
    return Pyramid(tuple(levels), block.label, axes, tuple(dict.fromkeys(notes)))


def _resolved(block: _Block, arrays: Arrays, notes: list[str]) -> list[tuple[str, Any, Any]]:
    """(name, (shape, dtype), entry) of each level naming an array of the group, once."""
    found: dict[str, tuple[str, Any, Any]] = {}
    for index, (path, entry) in enumerate(block.entries):
        try:
            name = _name(path)
            if name not in arrays:
                raise _Bad(f"{name!r} is not an array of this group")
            if name in found:
                raise _Bad(f"{name!r} is declared twice")
        except _Bad as bad:
            notes.append(f"level {index} dropped: {bad}")
            continue
        found[name] = (name, arrays[name], entry)
    return list(found.values())


def _decreasing(found: list[tuple[str, Any, Any]], notes: list[str]) -> list[_Kept]:
    """Largest first, each level smaller than the one kept before it, as the first."""
    found = sorted(found, key=lambda f: -math.prod(f[1][0]))
    kept: list[_Kept] = []
    for name, (shape, dtype), entry in found:
        why = _not_below(tuple(shape), dtype, kept, found[0][1][1])
        if why:
            notes.append(f"{name} dropped: {why}")
        else:
            kept.append((name, tuple(shape), entry))
    return kept


def _not_below(shape: tuple[int, ...], dtype: str, kept: list[_Kept], first_dtype: str) -> str:
    """Why a level cannot follow the levels kept so far ("" if it can)."""
    if not kept:
        return ""
    first, (last, last_shape, _) = kept[0][1], kept[-1]
    if len(shape) != len(first):
        return f"{len(shape)} dimensions where {kept[0][0]} has {len(first)}"
    if dtype != first_dtype:
        return f"dtype {dtype} where {kept[0][0]} has {first_dtype}"
    if shape == last_shape or any(n > m for n, m in zip(shape, last_shape, strict=True)):
        return f"shape {shape} is not smaller than {last}'s {last_shape}"
    return ""


def _finite(affine: Affine) -> Affine:
    """A composed transform still finite (and its scale positive) after the products."""
    scale, moved = affine
    if scale is not None and not all(math.isfinite(v) and v > 0 for v in scale):
        raise _Bad("its composed scale is not finite and positive")
    if moved is not None and not all(math.isfinite(v) for v in moved):
        raise _Bad("its composed translation is not finite")
    return affine


def _axes(given: Any, ndim: int, notes: list[str]) -> tuple[Axis, ...] | None:
    """OME-Zarr's axes (0.3: names), when there is one for each dimension."""
    if given is None:
        return None
    axes = [_axis(a) for a in given] if isinstance(given, list) else [None]
    if None in axes or len(axes) != ndim:
        notes.append(f"axes not read: not {ndim} named axes")
        return None
    return tuple(a for a in axes if a is not None)


def _axis(given: Any) -> Axis | None:
    if isinstance(given, str):
        return Axis(given)
    if not isinstance(given, Mapping) or not isinstance(given.get("name"), str):
        return None
    kind, unit = given.get("type"), given.get("unit")
    return Axis(
        given["name"],
        kind if isinstance(kind, str) else None,
        unit if isinstance(unit, str) else None,
    )
