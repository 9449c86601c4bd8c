"""Through the kernel: GDAL (rasterio's wheel) places the ``.hdr`` views of georeferenced
arrays where their writers' own readers do. Each store is written by the tool whose
convention it holds (rioxarray, xarray, GDAL's Zarr driver) or by zarr-python with the
attributes a convention defines; the expected CRS and transform come from rasterio or
rioxarray reading the store, or from what the writer was told, and the pixels from
zarr-python."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
import rioxarray  # noqa: F401 (the .rio accessor)
import xarray as xr
import zarr
from helpers.mounting import run_cli
from rasterio.crs import CRS
from rasterio.transform import Affine, from_origin

pytestmark = pytest.mark.mount

ROWS, COLS = 20, 30
PIXELS = np.arange(ROWS * COLS, dtype="float32").reshape(ROWS, COLS)
UTM = from_origin(500000.0, 4000000.0, 10.0, 20.0)
GEO_PROJ = "f010a634-3525-416e-9320-8f44b5bc352c"


def _rioxarray(path) -> tuple[str, CRS, Affine]:
    x = 500005.0 + 10.0 * np.arange(COLS)
    y = 3999990.0 - 20.0 * np.arange(ROWS)
    da = xr.DataArray(PIXELS, dims=("y", "x"), coords={"y": y, "x": x}, name="band")
    da = da.rio.write_crs("EPSG:32633").rio.write_transform(da.rio.transform())
    da.to_dataset().to_zarr(path, zarr_format=2, consolidated=False)
    read = xr.open_zarr(path, consolidated=False, decode_coords="all")["band"]
    return "band", CRS.from_wkt(read.rio.crs.to_wkt()), read.rio.transform()


def _cf_lat_lon(path) -> tuple[str, CRS, Affine]:
    lat = xr.Variable("lat", 59.875 - 0.25 * np.arange(ROWS), {"units": "degrees_north"})
    lon = xr.Variable("lon", 10.125 + 0.25 * np.arange(COLS), {"units": "degrees_east"})
    da = xr.DataArray(PIXELS, dims=("lat", "lon"), coords={"lat": lat, "lon": lon}, name="t2m")
    da.to_dataset().to_zarr(path, zarr_format=3, consolidated=False)
    read = xr.open_zarr(path, consolidated=False)["t2m"].rio.set_spatial_dims("lon", "lat")
    # no CRS named: WGS 84, as GDAL's netCDF driver takes longitude/latitude
    return "t2m", CRS.from_epsg(4326), read.rio.transform()


def _gdal(path) -> tuple[str, CRS, Affine]:
    profile = dict(driver="Zarr", width=COLS, height=ROWS, count=1, dtype="float32")
    with rasterio.open(path, "w", crs="EPSG:32633", transform=UTM, **profile) as out:
        out.write(PIXELS, 1)
    with rasterio.open(path) as src:
        return path.name.removesuffix(".zarr"), src.crs, src.transform


def _geozarr(path) -> tuple[str, CRS, Affine]:
    group = zarr.open_group(path, mode="w", zarr_format=3)
    group.attrs.update(
        {
            "zarr_conventions": [{"name": "proj:"}, {"name": "spatial:"}],
            "proj:code": "EPSG:32633",
            "spatial:dimensions": ["y", "x"],
            "spatial:transform": list(UTM)[:6],
        }
    )
    array = group.create_array("b04", shape=PIXELS.shape, dtype="f4", dimension_names=["y", "x"])
    array[...] = PIXELS
    return "b04", CRS.from_epsg(32633), UTM


def _geo_proj(path) -> tuple[str, CRS, Affine]:
    array = zarr.create_array(path, shape=PIXELS.shape, dtype="f4", zarr_format=3)
    array[...] = PIXELS
    config = {"code": "EPSG:32633", "transform": list(UTM)[:6]}
    entry = {"version": "0.1.0", "name": "geo:proj", "configuration": config}
    array.attrs.update(
        {"zarr_conventions_version": "0.1.0", "zarr_conventions_metadata": {GEO_PROJ: entry}}
    )
    return "", CRS.from_epsg(32633), UTM


WRITERS = {
    "rioxarray": _rioxarray,
    "cf-lat-lon": _cf_lat_lon,
    "gdal": _gdal,
    "geozarr": _geozarr,
    "geo-proj": _geo_proj,
}


def _close(got: Affine, expected: Affine) -> bool:
    return all(
        abs(g - e) <= 1e-9 * max(abs(e), 1.0) for g, e in zip(got[:6], expected[:6], strict=True)
    )


# what GDAL opens: the array file (ENVI by its .hdr) or the .tif view
VIEWS = {"envi": "", "tiff": ".tif"}


@pytest.mark.parametrize("view_kind", sorted(VIEWS))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_gdal_places_each_view_as_the_writer_does(mount_factory, tmp_path, writer, view_kind):
    source = tmp_path / f"{writer}.zarr"
    name, crs, transform = WRITERS[writer](source)
    mount = mount_factory(str(source), ["sidecars=envi+tiff"], tag=f"maps-{writer}")
    with rasterio.open(mount.p((name or "array") + VIEWS[view_kind])) as view:
        assert view.crs == crs, view.crs
        assert _close(view.transform, transform), (view.transform, transform)
        got = view.read(1)
    expected = np.asarray(zarr.open_array(str(source), path=name, mode="r")[...])
    assert np.array_equal(got, expected)


def test_the_tiled_view_is_placed_and_masked_as_gdal_reads_the_store(mount_factory, tmp_path):
    """GDAL's own Zarr driver reading the store is the reference: CRS, transform, nodata."""
    source = tmp_path / "tiled.zarr"
    profile = dict(driver="Zarr", width=COLS * 4, height=ROWS * 4, count=1, dtype="float32")
    options = {"BLOCKSIZE": "16,32", "FORMAT": "ZARR_V2"}
    with rasterio.open(
        source, "w", crs="EPSG:32633", transform=UTM, nodata=-9999.0, **profile, **options
    ) as out:
        out.write(np.tile(PIXELS, (4, 4)), 1)
    with rasterio.open(source) as src:
        name = src.name.rpartition("/")[2].removesuffix(".zarr")
        crs, transform, nodata, pixels = src.crs, src.transform, src.nodata, src.read(1)
    mount = mount_factory(str(source), ["sidecars=tiff"], tag="maps-tiled")
    with rasterio.open(mount.p(name + ".tif")) as view:
        assert view.block_shapes == [(16, 32)]  # one tile per chunk
        assert view.crs == crs and _close(view.transform, transform)
        assert view.nodata == nodata == -9999.0
        assert np.array_equal(view.read(1), pixels)


def _attrs_store(path, attributes: dict, dims=("y", "x")) -> str:
    group = zarr.open_group(path, mode="w", zarr_format=3)
    array = group.create_array("a", shape=PIXELS.shape, dtype="f4", dimension_names=dims)
    array[...] = PIXELS
    array.attrs.update(attributes)
    return "a"


BAD = {
    "crs-does-not-parse": (
        {"proj:code": "EPSG:999999", "spatial:transform": [10, 0, 5, 0, -20, 9]},
        "does not parse",
    ),
    "zero-scale": (
        {"proj:code": "EPSG:32633", "spatial:transform": [0, 0, 5, 0, -20, 9]},
        "zero scale",
    ),
    "nan-scale": (
        {"proj:code": "EPSG:32633", "spatial:transform": [float("nan"), 0, 5, 0, -20, 9]},
        "not finite",
    ),
    "rotated": (
        {"proj:code": "EPSG:32633", "spatial:transform": [10, 1, 5, 1, -20, 9]},
        "rotated",
    ),
    "grid-mapping-missing": ({"grid_mapping": "spatial_ref"}, "not in the group"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_georeferencing_leaves_the_view_unplaced(mount_factory, tmp_path, case):
    attributes, why = BAD[case]
    source = tmp_path / f"{case}.zarr"
    name = _attrs_store(source, json.loads(json.dumps(attributes)))
    mount = mount_factory(str(source), ["sidecars=envi+tiff"], tag=f"maps-{case}")
    for suffix in VIEWS.values():
        with rasterio.open(mount.p(name + suffix)) as view:
            assert view.crs is None
            assert view.transform == Affine.identity()
            assert np.array_equal(view.read(1), PIXELS)
    found = json.loads(run_cli(["--inspect", "--json", str(source)]).stdout)
    (node,) = [n for n in found["nodes"] if n["path"] == name]
    assert why in node["place"]["reason"], node["place"]


def test_irregular_coordinates_leave_the_view_unplaced(mount_factory, tmp_path):
    lat = 59.875 - 0.25 * np.arange(ROWS)
    lat[5] += 0.01
    lon = 10.125 + 0.25 * np.arange(COLS)
    da = xr.DataArray(PIXELS, dims=("lat", "lon"), coords={"lat": lat, "lon": lon}, name="t")
    source = tmp_path / "irregular.zarr"
    da.to_dataset().to_zarr(source, zarr_format=3, consolidated=False)
    mount = mount_factory(str(source), ["sidecars=envi"], tag="maps-irregular")
    with rasterio.open(mount.p("t")) as view:
        assert view.crs is None
        assert view.transform == Affine.identity()
        assert np.array_equal(view.read(1), PIXELS)


def test_inspect_says_where_an_array_lies(tmp_path):
    source = tmp_path / "geozarr.zarr"
    _geozarr(source)
    found = json.loads(run_cli(["--inspect", "--json", str(source)]).stdout)
    (node,) = [n for n in found["nodes"] if n["path"] == "b04"]
    assert node["place"]["epsg"] == 32633
    assert node["place"]["convention"] == "GeoZarr"
    assert node["place"]["transform"] == list(UTM.to_gdal())
    text = run_cli(["--inspect", str(source)]).stdout
    assert "map: EPSG:32633 by GeoZarr" in text
