"""Where an array with two spatial dimensions (its last two: rows, columns) lies on the
Earth: its CRS and GDAL-order geotransform (pixel-is-area), or why it has none.

Pure: callers give the attributes of the array, of its group and of the group's other
arrays, and the values of the 1-D coordinate arrays ``coordinates_wanted`` names. The
conventions are tried in this order, the first that holds wins; one that disagrees with
it is logged once and left out:

1. the Zarr conventions framework 0.1.0: ``geo:proj`` (by its UUID) with ``code`` and an
   affine ``transform`` a, b, c, d, e, f;
2. GeoZarr: ``proj:code`` / ``proj:wkt2`` / ``proj:projjson`` with ``spatial:transform``
   (or ``spatial:bbox``), on the array or its group;
3. GDAL's Zarr driver: ``_CRS`` (``wkt``, ``projjson`` or ``url``) with the coordinates;
4. CF: ``grid_mapping`` naming a variable with ``crs_wkt`` / ``spatial_ref`` (and
   rioxarray's ``GeoTransform``, else the coordinates);
5. regularly spaced 1-D coordinates alone: longitude/latitude are WGS 84, as GDAL's
   netCDF driver takes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarrmount.format import geogrid
from zarrmount.format.crs import BadCrs, Crs, parse_crs, same_crs
from zarrmount.format.geogrid import BadGrid, Transform
from zarrmount.format.model import ArrayMeta

log = logging.getLogger(__name__)

GEO_PROJ = "f010a634-3525-416e-9320-8f44b5bc352c"  # the framework's geo:proj
MAX_COORDINATE = 1 << 20  # values of a coordinate array read at most
NONE = "no CRS or transform in its attributes, and no x/y or longitude/latitude coordinates"
_LON, _LAT = {"lon", "longitude"}, {"lat", "latitude"}
_DEGREES = {"degrees_east", "degree_east", "degrees_e", "degree_e", "degrees_north"}
_DEGREES |= {"degree_north", "degrees_n", "degree_n", "degrees", "degree"}
_told: set[tuple[str, str, str]] = set()  # conflicts logged


@dataclass(frozen=True)
class Variable:
    """What georeferencing reads of an array."""

    attributes: Mapping[str, Any]
    dims: tuple[str | None, ...]
    shape: tuple[int, ...]
    numeric: bool = True


@dataclass(frozen=True)
class Group:
    """The array's group: its attributes, arrays, and the coordinate values read."""

    attributes: Mapping[str, Any] = field(default_factory=dict)
    arrays: Mapping[str, Variable] = field(default_factory=dict)
    # None: not read (``--inspect`` reads no array's values)
    values: Mapping[str, np.ndarray] | None = field(default_factory=dict)


@dataclass(frozen=True)
class Place:
    crs: Crs
    transform: Transform  # GDAL's order, pixel-is-area
    convention: str
    notes: tuple[str, ...] = ()  # conventions passed over, and why


@dataclass(frozen=True)
class Unplaced:
    reason: str


Found = Place | Unplaced


def variable(meta: ArrayMeta) -> Variable:
    """An array's attributes, dimension names (v2: ``_ARRAY_DIMENSIONS``) and shape."""
    given: Any = meta.dimension_names
    if meta.zarr_format == 2:
        given = meta.attributes.get("_ARRAY_DIMENSIONS")
    if not isinstance(given, (list, tuple)) or len(given) != len(meta.shape):
        given = [None] * len(meta.shape)
    dims = tuple(g if isinstance(g, str) else None for g in given)
    numeric = meta.strings is None and meta.dtype.kind in "iuf"
    return Variable(meta.attributes, dims, tuple(meta.shape), numeric)


def coordinates_wanted(array: Variable, arrays: Mapping[str, Variable]) -> list[str]:
    """The 1-D arrays whose values may place ``array``: named as its last two dimensions,
    as long, numeric, and at most ``MAX_COORDINATE`` values."""
    if len(array.shape) < 2:
        return []
    wanted = []
    for dim, n in zip(array.dims[-2:], array.shape[-2:], strict=True):
        found = arrays.get(dim) if dim else None
        if found and found.numeric and found.shape == (n,) and n <= MAX_COORDINATE:
            wanted.append(dim)
    return wanted


def _setting(array: Variable, group: Group, key: str) -> Any:
    return array.attributes.get(key, group.attributes.get(key))


def _centres(array: Variable, group: Group) -> Transform:
    ydim, xdim = array.dims[-2:]
    if group.values is None:
        raise BadGrid(f"the values of coordinates {ydim}, {xdim} are read when mounted")
    for dim in (ydim, xdim):
        if dim is None:
            raise BadGrid("its last two dimensions have no names")
        if dim not in group.values:
            raise BadGrid(f"no coordinate array {dim} of its length")
    return geogrid.from_centres((ydim, group.values[ydim]), (xdim, group.values[xdim]))


def _geo_proj(array: Variable, group: Group) -> tuple[Crs, Transform] | None:
    block = _setting(array, group, "zarr_conventions_metadata")
    entry = block.get(GEO_PROJ) if isinstance(block, dict) else None
    if not isinstance(entry, dict):
        return None
    config = entry.get("configuration")
    if not isinstance(config, dict) or "code" not in config:
        raise BadCrs("geo:proj names no code")
    given = config.get("transform")
    transform = _centres(array, group) if given is None else geogrid.from_affine(given)
    return parse_crs(config["code"]), transform


def _geozarr(array: Variable, group: Group) -> tuple[Crs, Transform] | None:
    keys = ("proj:code", "proj:wkt2", "proj:projjson")
    given = next((v for k in keys if (v := _setting(array, group, k)) is not None), None)
    if given is None:
        return None
    dims = _setting(array, group, "spatial:dimensions")
    if dims is not None and list(dims) != list(array.dims[-2:]):
        raise BadGrid(f"spatial:dimensions {dims!r:.60} are not its last two dimensions")
    centre = _setting(array, group, "spatial:registration") == "node"
    affine = _setting(array, group, "spatial:transform")
    bbox = _setting(array, group, "spatial:bbox")
    if affine is not None:
        transform = geogrid.from_affine(affine, centre)
    elif bbox is not None:
        transform = geogrid.from_bbox(bbox, array.shape[-2:])
    else:
        transform = _centres(array, group)
    return parse_crs(given), transform


def _gdal_crs(array: Variable, group: Group) -> tuple[Crs, Transform] | None:
    given = array.attributes.get("_CRS")
    if given is None:
        return None
    if not isinstance(given, dict):
        raise BadCrs(f"_CRS is not an object: {given!r:.60}")
    crs = next((given[k] for k in ("wkt", "projjson", "url") if k in given), None)
    return parse_crs(crs), _centres(array, group)


def _grid_mapping(array: Variable, group: Group) -> tuple[Crs, Transform] | None:
    named = array.attributes.get("grid_mapping")
    if named is None:
        return None
    name = str(named).split(":")[0].strip()
    mapping = group.arrays.get(name)
    if mapping is None:
        raise BadCrs(f"grid_mapping names {name!r}, which is not in the group")
    attrs = mapping.attributes
    wkt = attrs.get("crs_wkt", attrs.get("spatial_ref"))
    if wkt is None:
        raise BadCrs(f"grid_mapping {name!r} has no crs_wkt or spatial_ref")
    given = attrs.get("GeoTransform")
    transform = _centres(array, group) if given is None else geogrid.from_gdal_text(given)
    return parse_crs(wkt), transform


def _coordinates(array: Variable, group: Group) -> tuple[Crs, Transform] | None:
    ydim, xdim = array.dims[-2:]
    if ydim is None or xdim is None:
        return None
    if xdim.lower() not in _LON or ydim.lower() not in _LAT:
        if {xdim.lower(), ydim.lower()} == {"x", "y"}:
            raise BadCrs("its x/y coordinates name no CRS")
        return None
    for dim in (ydim, xdim):
        units = group.arrays[dim].attributes.get("units") if dim in group.arrays else None
        if units is not None and str(units).lower() not in _DEGREES:
            raise BadGrid(f"coordinate {dim} is in {units!r:.40}, not degrees")
    return parse_crs("EPSG:4326"), _centres(array, group)


Reader = Callable[[Variable, Group], tuple[Crs, Transform] | None]
CONVENTIONS: tuple[tuple[str, Reader], ...] = (
    ("geo:proj", _geo_proj),
    ("GeoZarr", _geozarr),
    ("GDAL _CRS", _gdal_crs),
    ("CF grid_mapping", _grid_mapping),
    ("coordinates", _coordinates),
)


def _each(array: Variable, group: Group):
    """Each convention's finding in order: (name, (crs, transform) or None, problem)."""
    for label, read in CONVENTIONS:
        try:
            yield label, read(array, group), None
        except (BadCrs, BadGrid) as e:
            yield label, None, str(e)


def georeference(path: str, array: Variable, group: Group) -> Found:
    """The place of the array at ``path`` (named in logs), or why it has none."""
    if len(array.shape) < 2:
        return Unplaced("it has fewer than two dimensions")
    problems: list[str] = []
    winner: Place | None = None
    for label, found, problem in _each(array, group):
        if winner is None and problem:
            problems.append(f"{label}: {problem}")
        elif winner is None and found:
            winner = Place(*found, label, tuple(problems))
        elif winner is not None and found:
            winner = _compared(path, winner, label, *found)
    if winner is None:
        return Unplaced("; ".join(problems) or NONE)
    return winner


def _compared(path: str, winner: Place, label: str, crs: Crs, transform: Transform) -> Place:
    """``winner``, noting ``label``'s finding where it disagrees (logged once)."""
    if same_crs(winner.crs, crs) and geogrid.close(winner.transform, transform):
        return winner
    if (path, winner.convention, label) not in _told:
        _told.add((path, winner.convention, label))
        log.warning(
            "%s: %s and %s place it differently; %s wins",
            path,
            winner.convention,
            label,
            winner.convention,
        )
    note = f"{label} disagrees and is left out"
    return Place(winner.crs, winner.transform, winner.convention, (*winner.notes, note))
