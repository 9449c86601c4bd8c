"""headers/geotiff.py: the tags are written into TIFFs by tifffile and read back by
rasterio (GDAL 3.12) and Debian's gdalinfo (GDAL 3.6). Expected CRSs and transforms are
the ones given, compared by pyproj and rasterio; expected nodata values are what GDAL's
Zarr driver or xarray reads from a store written with the same metadata."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import warnings

import numpy as np
import pytest
import rasterio
import tifffile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rasterio.crs import CRS as RasterioCrs

from zarrmount.format import v2, v3
from zarrmount.format.crs import Crs, parse_crs
from zarrmount.format.georef import Place
from zarrmount.headers.geotiff import GeoTiff, geotiff_tags, nodata_of
from zarrmount.headers.tifftags import ASCII

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

LAEA = "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m"
MADE_UP = (
    'PROJCS["My made up grid",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",'
    '6378137,298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],'
    'PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],'
    'PARAMETER["central_meridian",13],PARAMETER["scale_factor",0.9996],'
    'PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1]]'
)
ACCENTED = MADE_UP.replace('"WGS 84",DATUM["WGS_1984"', '"Réseau X",DATUM["Réseau_X"')
HELMERT = "+proj=tmerc +lon_0=9 +k=1 +x_0=3500000 +ellps=bessel +towgs84=598.1,73.7,418.2"
SPHERE = "+proj=longlat +R=6371000"
LAT_LON = (
    'GEOGCS["My sphere",DATUM["my_datum",SPHEROID["sphere",6371000,0]],PRIMEM["Greenwich",0],'
    'UNIT["degree",0.0174532925199433],AXIS["Latitude",NORTH],AXIS["Longitude",EAST]]'
)
METRES = (500000.0, 10.0, 0.0, 4000000.0, 0.0, -20.0)
DEGREES = (-12.5, 0.25, 0.0, 61.0, 0.0, -0.125)


def _crs_place(given: str, transform=METRES) -> Place:
    pytest.importorskip("pyproj")
    return Place(parse_crs(given), transform, "test")


def _extratag(tag) -> tuple:
    values = tag.values
    if tag.kind == ASCII:  # tifffile takes text as str, or as bytes where not 7-bit
        raw = values[:-1]
        values = raw.decode() if raw.isascii() else values
    return (tag.code, tag.kind, 0 if tag.kind == ASCII else tag.count, values, True)


def _tiff(path, geo: GeoTiff, dtype="float32") -> str:
    data = np.zeros((4, 5), dtype)
    tifffile.imwrite(path, data, extratags=[_extratag(t) for t in geo.tags])
    return str(path)


def _read(path: str):
    with rasterio.open(path) as ds:
        return ds.crs, ds.transform.to_gdal(), ds.nodata


def _close(a, b) -> bool:
    return all(math.isclose(p, q, rel_tol=1e-9, abs_tol=1e-300) for p, q in zip(a, b, strict=True))


def _same(read: RasterioCrs | None, given: str) -> bool:
    """Equal as rasterio (GDAL's OSR) and as pyproj compare them."""
    from pyproj import CRS

    return (
        read is not None
        and read == RasterioCrs.from_user_input(given)
        and CRS.from_wkt(read.to_wkt()).equals(CRS.from_user_input(given))
    )


def _keys(path: str) -> dict:
    with tifffile.TiffFile(path) as tif:
        return tif.pages[0].geotiff_tags or {}


@pytest.mark.parametrize(
    ("given", "transform", "key", "code"),
    [
        ("EPSG:4326", DEGREES, "GeographicTypeGeoKey", 4326),
        ("EPSG:32633", METRES, "ProjectedCSTypeGeoKey", 32633),
        ("EPSG:3857", METRES, "ProjectedCSTypeGeoKey", 3857),
        ("EPSG:27700", METRES, "ProjectedCSTypeGeoKey", 27700),
        ("EPSG:3035", METRES, "ProjectedCSTypeGeoKey", 3035),  # north, east axes
        ("EPSG:4978", METRES, "GeographicTypeGeoKey", 4978),  # geocentric
        ("EPSG:7405", METRES, "VerticalCSTypeGeoKey", 5701),  # BNG + ODN height
    ],
)
def test_a_crs_with_an_epsg_code_is_written_as_it(tmp_path, given, transform, key, code):
    path = _tiff(tmp_path / "a.tif", geotiff_tags(_crs_place(given, transform), None))
    crs, read, _ = _read(path)
    assert _same(crs, given) and _close(read, transform)
    assert int(_keys(path)[key]) == code


# LAEA is EPSG:3035's projection on GRS 1980, not ETRS89: pyproj matches it to 3035 at
# 70 % confidence, GDAL tells them apart
@pytest.mark.parametrize("given", [LAEA, MADE_UP, ACCENTED, HELMERT, SPHERE])
def test_a_crs_without_an_epsg_code_is_read_back_alike(tmp_path, given):
    place = _crs_place(given, DEGREES if given == SPHERE else METRES)
    geo = geotiff_tags(place, None)
    path = _tiff(tmp_path / "a.tif", geo)
    crs, read, _ = _read(path)
    assert geo.no_crs is None and _same(crs, given) and _close(read, place.transform)
    assert int(_keys(path)["GTModelTypeGeoKey"]) == 32767  # user-defined


MY_HEIGHT = 'VERT_CS["my height",VERT_DATUM["mine",2005],UNIT["metre",1],AXIS["Up",UP]]'
LOCAL = 'LOCAL_CS["site grid",LOCAL_DATUM["site",0],UNIT["metre",1],AXIS["X",EAST],AXIS["Y",NORTH]]'


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("EPSG:5701", "vertical"),
        (LOCAL, "engineering"),
        (f'COMPD_CS["UTM + mine",{MADE_UP},{MY_HEIGHT}]', "compound"),
    ],
)
def test_a_crs_gdal_would_read_otherwise_is_left_out(tmp_path, given, why):
    geo = geotiff_tags(_crs_place(given), None)
    assert geo.no_crs is not None and why in geo.no_crs
    crs, read, _ = _read(_tiff(tmp_path / "a.tif", geo))
    assert crs is None and _close(read, METRES)


def test_axes_a_geotiff_cannot_state_leave_the_crs_out(tmp_path):
    """GDAL writes a WKT1's axes (pyproj leaves north-first ones out); read from a
    GeoTIFF they are always east, north, another CRS."""
    wkt = RasterioCrs.from_wkt(LAT_LON).to_wkt()
    geo = geotiff_tags(Place(Crs(wkt, None, "My sphere"), DEGREES, "test"), None)
    assert geo.no_crs == "the axes of My sphere point north, east; a GeoTIFF's east, north"
    assert _read(_tiff(tmp_path / "a.tif", geo))[0] is None


def test_a_compound_crs_of_epsg_parts_needs_no_code_of_its_own(tmp_path):
    path = _tiff(tmp_path / "a.tif", geotiff_tags(_crs_place("EPSG:32633+5773"), None))
    assert _same(_read(path)[0], "EPSG:32633+5773")


@pytest.mark.parametrize(
    "transform",
    [
        (500000.0, 10.0, 0.0, 4000000.0, 0.0, 20.0),  # south up
        (500000.0, -10.0, 0.0, 4000000.0, 0.0, -20.0),  # east to west
        (500000.0, 10.0, 2.0, 4000000.0, 3.0, -20.0),  # rotated
    ],
)
def test_grids_not_north_up_are_placed_by_a_matrix(tmp_path, transform):
    path = _tiff(tmp_path / "a.tif", geotiff_tags(_crs_place("EPSG:32633", transform), None))
    crs, read, _ = _read(path)
    assert _same(crs, "EPSG:32633") and _close(read, transform)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    x0=st.floats(-1e7, 1e7),
    y0=st.floats(-1e7, 1e7),
    dx=st.floats(1e-6, 1e5),
    dy=st.floats(1e-6, 1e5),
    south_up=st.booleans(),
)
def test_any_grid_is_read_back_where_it_lies(tmp_path, x0, y0, dx, dy, south_up):
    transform = (x0, dx, 0.0, y0, 0.0, dy if south_up else -dy)
    path = _tiff(tmp_path / "a.tif", geotiff_tags(_crs_place("EPSG:32633", transform), None))
    assert _close(_read(path)[1], transform)


@pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="no gdalinfo")
@pytest.mark.parametrize(
    ("given", "transform"),
    [("EPSG:4326", DEGREES), ("EPSG:32633", METRES), ("EPSG:7405", METRES)]
    + [(LAEA, METRES), (ACCENTED, METRES)],
)
def test_gdal_3_6_reads_the_same_place(tmp_path, given, transform):
    from pyproj import CRS

    path = _tiff(tmp_path / "a.tif", geotiff_tags(_crs_place(given, transform), -9999))
    info = json.loads(subprocess.run(["gdalinfo", "-json", path], capture_output=True).stdout)
    assert CRS.from_wkt(info["coordinateSystem"]["wkt"]).equals(CRS.from_user_input(given))
    assert _close(info["geoTransform"], transform)
    assert info["bands"][0]["noDataValue"] == -9999


def test_nothing_placed_nothing_written():
    assert geotiff_tags(None, None) == GeoTiff(())


def test_tags_come_sorted_by_code():
    codes = [t.code for t in geotiff_tags(_crs_place(LAEA), float("nan")).tags]
    assert codes == sorted(codes) and codes[-1] == 42113


# --- nodata: what GDAL's Zarr driver (or xarray) reads from a store with the same metadata


def _zarray(dtype: str, fill) -> dict:
    return {
        "zarr_format": 2,
        "shape": [4, 5],
        "chunks": [4, 5],
        "dtype": dtype,
        "compressor": None,
        "fill_value": fill,
        "order": "C",
        "filters": None,
    }


def _store(root, zarray: dict, attributes: dict | None = None):
    """A Zarr v2 store holding array ``a``, and its metadata as zarrmount parses it."""
    (root / "a").mkdir(parents=True)
    (root / ".zgroup").write_text('{"zarr_format": 2}')
    (root / "a" / ".zarray").write_text(json.dumps(zarray))
    (root / "a" / ".zattrs").write_text(json.dumps(attributes or {}))
    return v2.parse_array(json.dumps(zarray).encode(), attributes or {})


def _gdal_zarr_nodata(root):
    with rasterio.open(f'ZARR:"{root}":/a') as ds:
        return ds.nodata


def _same_nodata(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [
        ("<f4", "NaN"),
        ("<f4", 1e20),
        ("<f4", 0.1),
        ("<f8", 0.1),
        ("<f4", "-Infinity"),
        (">f8", -9999.0),
        ("<f2", 0.1),
        ("<i2", -9999),
        ("|u1", 0),
        ("<i8", -(2**63)),
        ("<f4", None),
    ],
)
def test_the_nodata_of_a_fill_value_is_what_gdal_reads_from_the_store(tmp_path, dtype, fill):
    meta = _store(tmp_path / "s.zarr", _zarray(dtype, fill))
    geo = geotiff_tags(None, nodata_of(meta))
    path = _tiff(tmp_path / "a.tif", geo, np.dtype(dtype).newbyteorder("="))
    assert _same_nodata(_read(path)[2], _gdal_zarr_nodata(tmp_path / "s.zarr"))


def test_a_64_bit_integer_nodata_is_exact(tmp_path):
    meta = _store(tmp_path / "s.zarr", _zarray("<i8", -(2**63) + 1))
    path = _tiff(tmp_path / "a.tif", geotiff_tags(None, nodata_of(meta)), "int64")
    with tifffile.TiffFile(path) as tif:  # rasterio's nodata is a double
        assert tif.pages[0].nodata == -(2**63) + 1


def _xarray_fill(path, zarr_format: int, name: str):
    xr = pytest.importorskip("xarray")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(path, consolidated=False, zarr_format=zarr_format)[name].encoding.get(
            "_FillValue"
        )


# GDAL's Zarr driver ignores the attribute: it reports the fill values, 0 and NaN
@pytest.mark.parametrize(("name", "dtype", "fill"), [("i", "i2", -32768), ("f", "f4", -9999.0)])
def test_a_v3_fill_value_attribute_is_the_nodata_xarray_masks(tmp_path, name, dtype, fill):
    xr = pytest.importorskip("xarray")
    store = tmp_path / "s.zarr"
    ds = xr.Dataset({name: (("y", "x"), np.zeros((4, 5), dtype))})
    ds[name].encoding["_FillValue"] = fill
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    doc = json.loads((store / name / "zarr.json").read_text())
    nodata = nodata_of(v3.parse_array(name, doc))
    path = _tiff(tmp_path / "a.tif", geotiff_tags(None, nodata), dtype)
    assert _read(path)[2] == _xarray_fill(store, 3, name) == fill


def test_a_v2_null_fill_value_leaves_the_attribute(tmp_path):
    store = tmp_path / "s.zarr"
    meta = _store(
        store, _zarray("<f4", None), {"_ARRAY_DIMENSIONS": ["y", "x"], "_FillValue": -1.5}
    )
    path = _tiff(tmp_path / "a.tif", geotiff_tags(None, nodata_of(meta)))
    assert _read(path)[2] == _xarray_fill(store, 2, "a") == -1.5
