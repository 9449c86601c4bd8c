"""format/georef.py: each convention, the order they win in, and bad input. Expected
transforms and CRSs come from rasterio's Affine and pyproj, not from the module."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyproj import CRS
from rasterio.transform import from_origin

from zarrmount.format.georef import GEO_PROJ, Group, Place, Unplaced, Variable, georeference

UTM = from_origin(500000.0, 4000000.0, 10.0, 20.0)


def _array(attributes=None, dims=("y", "x"), shape=(4, 5)) -> Variable:
    return Variable(attributes or {}, dims, shape)


def _coords(y, x, y_attrs=None, x_attrs=None, ydim="y", xdim="x") -> dict:
    arrays = {
        ydim: Variable(y_attrs or {}, (ydim,), (len(y),)),
        xdim: Variable(x_attrs or {}, (xdim,), (len(x),)),
    }
    return {"arrays": arrays, "values": {ydim: np.asarray(y), xdim: np.asarray(x)}}


def test_geo_proj_in_the_framework():
    config = {"code": "EPSG:32633", "transform": list(UTM)[:6]}
    attrs = {"zarr_conventions_metadata": {GEO_PROJ: {"version": "0.1.0", "configuration": config}}}
    found = georeference("a", _array(attrs), Group())
    assert isinstance(found, Place) and found.convention == "geo:proj"
    assert found.transform == UTM.to_gdal() and found.crs.epsg == 32633


def test_geozarr_bbox_on_the_group():
    group = Group({"proj:code": "EPSG:32633", "spatial:bbox": [500000, 3999920, 500050, 4000000]})
    found = georeference("a", _array(), group)
    assert found.transform == UTM.to_gdal()


def test_geozarr_node_registration_is_shifted_half_a_cell():
    attrs = {"proj:code": "EPSG:32633", "spatial:registration": "node"}
    attrs["spatial:transform"] = [10, 0, 500005, 0, -20, 3999990]
    assert georeference("a", _array(attrs), Group()).transform == UTM.to_gdal()


def test_cf_grid_mapping_with_geotransform():
    mapping = Variable(
        {"crs_wkt": CRS(32633).to_wkt(), "GeoTransform": " ".join(map(str, UTM.to_gdal()))}, (), ()
    )
    found = georeference(
        "a", _array({"grid_mapping": "spatial_ref"}), Group({}, {"spatial_ref": mapping})
    )
    assert found.convention == "CF grid_mapping" and found.transform == UTM.to_gdal()
    assert CRS(found.crs.wkt).equals(CRS(32633))


@given(
    x0=st.floats(-1e6, 1e6),
    dx=st.floats(1e-3, 1e3),
    y0=st.floats(-1e6, 1e6),
    dy=st.floats(-1e3, -1e-3),
    rows=st.integers(2, 50),
    cols=st.integers(2, 50),
)
def test_regular_lon_lat_round_trip(x0, dx, y0, dy, rows, cols):
    lon = x0 + dx * (np.arange(cols) + 0.5)
    lat = y0 + dy * (np.arange(rows) + 0.5)
    found = georeference(
        "a",
        _array(dims=("lat", "lon"), shape=(rows, cols)),
        Group({}, **_coords(lat, lon, ydim="lat", xdim="lon")),
    )
    assert isinstance(found, Place) and found.crs.epsg == 4326
    expected = (x0, dx, 0.0, y0, 0.0, dy)
    scale = max(abs(x0), abs(y0), 1.0)
    assert np.allclose(found.transform, expected, rtol=1e-9, atol=1e-9 * scale)


def test_irregular_coordinates_say_so():
    lat, lon = [3.0, 2.0, 1.5, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0]
    found = georeference(
        "a", _array(dims=("lat", "lon")), Group({}, **_coords(lat, lon, ydim="lat", xdim="lon"))
    )
    assert isinstance(found, Unplaced) and "not regular" in found.reason


def test_xy_coordinates_without_a_crs_are_not_placed():
    found = georeference("a", _array(), Group({}, **_coords([3, 2, 1, 0], [0, 1, 2, 3, 4])))
    assert isinstance(found, Unplaced) and "name no CRS" in found.reason


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ({"proj:code": "EPSG:999999", "spatial:transform": list(UTM)[:6]}, "does not parse"),
        ({"proj:code": "EPSG:32633", "spatial:transform": [0, 0, 1, 0, -1, 0]}, "zero scale"),
        ({"proj:code": "EPSG:32633", "spatial:transform": [1, 1, 1, 0, -1, 0]}, "rotated"),
        ({"grid_mapping": "crs"}, "not in the group"),
        ({"_CRS": {"wkt": "nonsense"}}, "does not parse"),
    ],
)
def test_bad_input_is_not_placed(attrs, why):
    found = georeference("a", _array(attrs), Group())
    assert isinstance(found, Unplaced) and why in found.reason


def test_a_higher_convention_wins_a_conflict_and_a_broken_one_gives_way(caplog):
    config = {"code": "EPSG:32633", "transform": list(UTM)[:6]}
    attrs = {
        "zarr_conventions_metadata": {GEO_PROJ: {"version": "0.1.0", "configuration": config}},
        "proj:code": "EPSG:4326",
        "spatial:transform": [1, 0, 0, 0, -1, 0],
    }
    found = georeference("conflict", _array(attrs), Group())
    assert found.convention == "geo:proj" and "GeoZarr disagrees" in found.notes[0]
    georeference("conflict", _array(attrs), Group())
    assert sum("place it differently" in r.message for r in caplog.records) == 1
    attrs["zarr_conventions_metadata"][GEO_PROJ]["configuration"]["code"] = "EPSG:999999"
    found = georeference("b", _array(attrs), Group())
    assert found.convention == "GeoZarr" and "does not parse" in found.notes[0]


def test_arrays_of_one_dimension_are_not_placed():
    assert isinstance(georeference("a", _array(dims=("x",), shape=(5,)), Group()), Unplaced)
