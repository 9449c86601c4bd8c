"""The GeoTIFF tags of a ``.tif`` view: where the image lies on a map, its CRS, and the
value that marks missing data, as GDAL (so QGIS and rasterio) reads them.

Pure: a ``Place`` (``format/georef.py``) and a nodata value in, ``Tag``s out, which the
TIFF writer adds to the first image's IFDs.

A CRS whose WKT names its EPSG code is written as that code (GDAL looks the rest up).
Any other is written the way GDAL's ESRI_PE flavour marks a CRS: a user-defined model
whose ``PCSCitationGeoKey`` holds ``ESRI PE String = `` and the WKT1, which GDAL 3.6
and 3.12 both read back as the same CRS. ``Crs.epsg`` is not used: pyproj gives a close
match an EPSG code too, which GDAL would read as another CRS. A CRS neither way carries
(axes a GeoTIFF cannot state, vertical or engineering CRSs) is left out, with the
reason, and the image is still placed.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrmount.format.crs import Crs
from zarrmount.format.geogrid import Transform
from zarrmount.format.georef import Place
from zarrmount.format.model import ArrayMeta
from zarrmount.headers.tifftags import ASCII, DOUBLE, SHORT, Tag, ascii_tag

PIXEL_SCALE, TIEPOINT, TRANSFORMATION = 33550, 33922, 34264
KEY_DIRECTORY, ASCII_PARAMS = 34735, 34737
GDAL_NODATA = 42113

MODEL_TYPE, RASTER_TYPE, CITATION = 1024, 1025, 1026
GEODETIC, GEODETIC_CITATION = 2048, 2049
PROJECTED, PROJECTED_CITATION, VERTICAL = 3072, 3073, 4096
PROJECTED_MODEL, GEOGRAPHIC_MODEL, GEOCENTRIC_MODEL = 1, 2, 3
USER_DEFINED = 32767  # also the largest code a key may hold: above it are private codes
PIXEL_IS_AREA = 1
PE_STRING = "ESRI PE String = "
_UNCARRIED = {
    "VERT_CS": "a vertical CRS, which places no image",
    "LOCAL_CS": "an engineering CRS, which GDAL 3.6 reads from a GeoTIFF with errors",
}

Keys = dict[int, int | str]  # a GeoKey's value: a SHORT, or text in GeoAsciiParamsTag


class NotCarried(ValueError):
    """No GeoKeys GDAL reads back as this CRS; the message says why."""


@dataclass(frozen=True)
class GeoTiff:
    """The tags to add, and why they carry no CRS (for ``--inspect``) where the image
    is placed without one."""

    tags: tuple[Tag, ...]
    no_crs: str | None = None


def geotiff_tags(place: Place | None, nodata: int | float | None) -> GeoTiff:
    """The tags placing the image at ``place`` (None: nowhere) with ``nodata`` marking
    missing values (None: no value does), sorted by code."""
    tags: list[Tag] = []
    no_crs = None
    if place is not None:
        tags += _placement(place.transform)
        try:
            tags += _key_tags(crs_keys(place.crs))
        except NotCarried as e:
            no_crs = str(e)  # no GeoKeys: the raster type's alone GDAL reads as a local CRS
    if nodata is not None:
        tags.append(ascii_tag(GDAL_NODATA, nodata_text(nodata)))
    return GeoTiff(tuple(sorted(tags, key=lambda t: t.code)), no_crs)


def _placement(transform: Transform) -> list[Tag]:
    """Tiepoint and pixel scale for a north-up grid; a transformation matrix otherwise,
    as GDAL misreads a negative scale (a south-up grid read back as north-up)."""
    x0, dx, rx, y0, ry, dy = transform
    if rx or ry or dx <= 0 or dy >= 0:
        matrix = (dx, rx, 0.0, x0, ry, dy, 0.0, y0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
        return [Tag(TRANSFORMATION, DOUBLE, matrix)]
    return [
        Tag(PIXEL_SCALE, DOUBLE, (dx, -dy, 0.0)),
        Tag(TIEPOINT, DOUBLE, (0.0, 0.0, 0.0, x0, y0, 0.0)),
    ]


def crs_keys(crs: Crs) -> Keys:
    """The GeoKeys naming ``crs`` besides the raster type, or NotCarried."""
    kind = _keyword(crs.wkt)
    code = _epsg_code(crs.wkt)
    if code is not None and kind in ("PROJCS", "GEOGCS", "GEOCCS"):
        return _epsg_keys(kind, code, crs.name)
    if kind == "COMPD_CS":
        return _compound_keys(crs)
    if kind in ("PROJCS", "GEOGCS", "GEOCCS"):
        return _pe_keys(crs)
    why = _UNCARRIED.get(kind, f"not a CRS a GeoTIFF holds ({kind or 'no WKT1'})")
    raise NotCarried(f"{crs.label} is {why}")


def _epsg_keys(kind: str, code: int, name: str) -> Keys:
    """The model type, the code and a citation naming it, as GDAL writes them."""
    if kind == "GEOGCS":
        return {MODEL_TYPE: GEOGRAPHIC_MODEL, GEODETIC: code, GEODETIC_CITATION: name}
    if kind == "GEOCCS":
        return {MODEL_TYPE: GEOCENTRIC_MODEL, GEODETIC: code, CITATION: name}
    return {MODEL_TYPE: PROJECTED_MODEL, CITATION: name, PROJECTED: code}


def _compound_keys(crs: Crs) -> Keys:
    """A horizontal and a vertical CRS, each by its EPSG code: GDAL reads both back."""
    parts = {_keyword(node): _epsg_code(node) for node in _children(crs.wkt)}
    vertical = parts.get("VERT_CS")
    kind = "PROJCS" if "PROJCS" in parts else "GEOGCS"
    horizontal = parts.get(kind)
    if vertical is None or horizontal is None:
        raise NotCarried(f"{crs.label} is a compound CRS whose parts are not both EPSG's")
    return {**_epsg_keys(kind, horizontal, crs.name), VERTICAL: vertical}


def _pe_keys(crs: Crs) -> Keys:
    """A user-defined model holding the WKT1, which GDAL reads back; GDAL takes its axes
    as east, north whatever the WKT says, so a CRS whose axes differ is left out."""
    axes = [_arguments(node)[1].upper() for node in _children(crs.wkt) if _keyword(node) == "AXIS"]
    if _keyword(crs.wkt) != "GEOCCS" and axes not in ([], ["EAST", "NORTH"]):
        listed = ", ".join(axes).lower()
        raise NotCarried(f"the axes of {crs.label} point {listed}; a GeoTIFF's east, north")
    return {MODEL_TYPE: USER_DEFINED, PROJECTED_CITATION: PE_STRING + crs.wkt}


def _key_tags(keys: Keys) -> list[Tag]:
    """GeoKeyDirectoryTag (version 1.1, minor revision 1 where a vertical CRS needs it),
    sorted by key, and the texts it points into."""
    directory: list[int] = []
    text = b""
    for key, value in sorted({RASTER_TYPE: PIXEL_IS_AREA, **keys}.items()):
        if isinstance(value, str):
            raw = value.encode("utf-8") + b"|"  # GDAL reads UTF-8 names as they were
            directory += [key, ASCII_PARAMS, len(raw), len(text)]
            text += raw
        else:
            directory += [key, 0, 1, value]
    minor = 1 if VERTICAL in keys else 0
    tags = [Tag(KEY_DIRECTORY, SHORT, (1, 1, minor, len(directory) // 4, *directory))]
    if text:
        tags.append(Tag(ASCII_PARAMS, ASCII, text + b"\0"))
    return tags


def _keyword(node: str) -> str:
    return node.split("[", 1)[0].strip().upper() if "[" in node else ""


def _arguments(node: str) -> list[str]:
    """The comma-separated items directly inside WKT1 ``KEYWORD[...]``, nodes whole."""
    body = node[node.index("[") + 1 : node.rindex("]")]
    items, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(body):
        if ch == '"':
            quoted = not quoted  # a doubled quote inside a name toggles twice
        elif not quoted and ch == "[":
            depth += 1
        elif not quoted and ch == "]":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return items


def _children(node: str) -> list[str]:
    return [item for item in _arguments(node) if "[" in item]


def _epsg_code(node: str) -> int | None:
    """The EPSG code in a node's own AUTHORITY, where it has one a key can hold."""
    for child in _children(node):
        if _keyword(child) == "AUTHORITY":
            name, code = (a.strip('"') for a in _arguments(child)[:2])
            if name.upper() == "EPSG" and code.isdigit() and 0 < int(code) < USER_DEFINED:
                return int(code)
    return None


def nodata_text(value: int | float) -> str:
    """``GDAL_NODATA``: integers exactly (GDAL's own writer gives a 64-bit one an
    exponent, which it reads back as -9), floats as the shortest text of their exact
    value (``nan``, ``inf`` included), so that a reader rounding to the band's type or
    not reads the same."""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


def nodata_of(meta: ArrayMeta) -> int | float | None:
    """The value marking missing data: a ``_FillValue`` attribute where xarray masks
    with it (every v3 array; a v2 one whose fill value is null), else the fill value,
    which GDAL's Zarr driver reports (it ignores ``_FillValue``) and xarray masks with
    in v2. None where no value of the array's type is given."""
    given = meta.attributes.get("_FillValue")
    if meta.fill_json is not None and (meta.zarr_format == 2 or given is None):
        return _typed(meta.fill_value, meta.dtype)
    if meta.dtype.kind == "f" and isinstance(given, str):
        given = _base64_double(given)  # xarray's v3 encoding of a float fill value
    if not isinstance(given, (int, float)) or isinstance(given, bool):
        return None
    return _typed(given, meta.dtype)


def _base64_double(text: str) -> float | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return None
    return struct.unpack("<d", raw)[0] if len(raw) == 8 else None


def _typed(value: Any, dtype: np.dtype) -> int | float | None:
    """``value`` as an element of ``dtype`` holds it (a float32 one rounded, a boolean
    as the byte the TIFF view shows), or None where the type has no such value or the
    view is not a number."""
    if dtype.kind == "b":
        return int(bool(value))
    if dtype.kind == "f":
        return float(np.asarray(value).astype(dtype))
    if dtype.kind not in "iu" or (isinstance(value, float) and not value.is_integer()):
        return None
    exact, info = int(value), np.iinfo(dtype)
    return exact if info.min <= exact <= info.max else None
