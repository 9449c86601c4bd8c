"""Coordinate reference systems as conventions give them (an EPSG code, WKT, PROJJSON),
made into what headers write: GDAL's ENVI reader takes WKT1 only, and a GeoTIFF wants
the EPSG code. Parsing needs pyproj (the ``maps`` extra); without it no CRS is made."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class BadCrs(ValueError):
    """The CRS given does not parse, or cannot be written as WKT1; the message says why."""


@dataclass(frozen=True)
class Crs:
    wkt: str  # WKT1 as GDAL writes it (ENVI's ``coordinate system string``)
    epsg: int | None  # where the CRS is one of EPSG's
    name: str

    @property
    def label(self) -> str:
        """A short name for ``--inspect``."""
        return f"EPSG:{self.epsg}" if self.epsg is not None else self.name


def parse_crs(given: Any) -> Crs:
    """The CRS ``given`` names: ``"EPSG:4326"`` (any authority pyproj knows), WKT1 or
    WKT2 text, or a PROJJSON object (or its text)."""
    try:
        from pyproj import CRS
        from pyproj.exceptions import CRSError
    except ImportError as e:
        raise BadCrs("pyproj is not installed (pip install 'zarrmount[maps]')") from e
    if isinstance(given, dict):
        given = json.dumps(given)
    if not isinstance(given, str) or not given.strip():
        raise BadCrs(f"a CRS is text or a PROJJSON object, not {given!r:.60}")
    try:
        crs = CRS.from_user_input(given)
        wkt = crs.to_wkt("WKT1_GDAL")
    except CRSError as e:
        raise BadCrs(f"the CRS {given!r:.60} does not parse: {e}") from e
    if not wkt:
        raise BadCrs(f"the CRS {crs.name!r} has no WKT1 form")
    return Crs(wkt, crs.to_epsg(), crs.name)


def same_crs(a: Crs, b: Crs) -> bool:
    """Whether two conventions name one CRS."""
    if a.epsg is not None and b.epsg is not None:
        return a.epsg == b.epsg
    return a.wkt == b.wkt
