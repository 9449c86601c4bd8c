"""Through the kernel: ``-o sidecars=nifti`` shows beside each array of an OME-Zarr image
written by ome-zarr-py (0.4 on Zarr v2, 0.5 on v3) a ``NAME.nii`` that nibabel loads with
the voxels of zarr-python (axes reversed), the zooms of the image's scales and the sform
of its scales and translations; a 4 GiB volume is memory-mapped and read at its far end
without a voxel read to make the header. Expected values come from zarr-python and the
metadata ome-zarr-py wrote, never from the mount."""

from __future__ import annotations

import json
import os

import nibabel as nib
import numpy as np
import pytest
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

pytestmark = pytest.mark.mount

FORMATS = {"0.4": FormatV04, "0.5": FormatV05}
# axes: (shape, chunks, scale, unit of space) of ome-zarr-py's image, and NIfTI's units
# (nibabel's names) of space and time
IMAGES = {
    "yx": ((32, 48), (16, 16), {"y": 0.4, "x": 0.3}, "micrometer"),
    "zyx": ((10, 32, 48), (4, 16, 16), {"z": 2.0, "y": 0.4, "x": 0.3}, "micrometer"),
    "tzyx": ((3, 6, 20, 24), (1, 3, 8, 8), {"t": 40.0, "z": 1.5, "y": 0.8, "x": 0.8}, "millimeter"),
    "tczyx": (
        (2, 2, 4, 16, 24),
        (1, 1, 2, 8, 8),
        {"t": 5.0, "c": 1.0, "z": 1.5, "y": 0.5, "x": 0.25},
        "micrometer",
    ),
}
NIFTI_UNITS = {
    "yx": ("micron", "unknown"),
    "zyx": ("micron", "unknown"),
    "tzyx": ("mm", "msec"),
    "tczyx": ("micron", "msec"),
}


def _image(base, version: str, axes: str) -> str:
    """An OME-Zarr image of two levels; returns the store's root."""
    fmt = FORMATS[version]()
    shape, chunks, scale, unit = IMAGES[axes]
    root = str(base / f"{axes}-{version}.zarr")
    values = np.random.default_rng(len(axes)).integers(0, 4000, shape, dtype="<u2")
    units = {a: ("millisecond" if a == "t" else unit) for a in axes if a != "c"}
    group = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    options = {"chunks": chunks}
    write_image(
        values,
        group,
        fmt=fmt,
        axes=axes,
        scale_factors=[2],
        scale=scale,
        axes_units=units,
        storage_options=options,
    )
    return root


def _multiscales(root: str) -> dict:
    """The multiscales block as ome-zarr-py wrote it (0.4: .zattrs; 0.5: under ome)."""
    attrs = zarr.open_group(root, mode="r").attrs.asdict()
    return (attrs.get("ome") or attrs)["multiscales"][0]


def _transforms(dataset: dict) -> tuple[np.ndarray, np.ndarray]:
    """A level's scale and translation (zeros where it has none), C order."""
    found = {t["type"]: t for t in dataset["coordinateTransformations"]}
    scale = np.array(found["scale"]["scale"])
    shift = np.array(found.get("translation", {}).get("translation", [0.0] * len(scale)))
    return scale, shift


@pytest.mark.parametrize("axes", sorted(IMAGES))
@pytest.mark.parametrize("version", sorted(FORMATS))
def test_nibabel_loads_each_level_with_its_voxels_zooms_and_sform(
    mount_factory, tmp_path, version, axes
):
    root = _image(tmp_path, version, axes)
    mount = mount_factory(root, ["sidecars=nifti"], tag=f"nifti-{axes}-{version}")
    multiscales = _multiscales(root)
    for dataset in multiscales["datasets"]:
        path = dataset["path"]
        img = nib.load(mount.p(f"{path}.nii"))
        expected = np.asarray(zarr.open_array(root, path=path, mode="r")[...])
        assert img.shape == expected.shape[::-1]
        assert np.array_equal(np.asanyarray(img.dataobj), expected.T), path
        scale, shift = _transforms(dataset)
        assert np.allclose(img.header.get_zooms(), scale[::-1]), path
        assert img.header.get_xyzt_units() == NIFTI_UNITS[axes]
        sform = np.eye(4)  # x, y, z (a plane's z: 1 and 0)
        sform[:3, :3] = np.diag([*scale[::-1], 1.0, 1.0][:3])
        sform[:3, 3] = [*shift[::-1], 0.0, 0.0][:3]
        assert np.allclose(img.header.get_sform(), sform), path
        assert nib.aff2axcodes(img.affine) == ("R", "A", "S")


def test_a_4_gib_volume_is_memory_mapped_and_its_header_made_without_a_voxel(tmp_path):
    """512 x 2048 x 2048 uint16 (4 GiB) of fill value with one chunk written, at the end."""
    from helpers.mounting import mounted

    root = str(tmp_path / "big.zarr")
    shape, chunks = (512, 2048, 2048), (8, 1024, 1024)
    array = zarr.create_array(root, shape=shape, chunks=chunks, dtype="<u2", fill_value=7)
    written = np.arange(8 * 1024 * 1024, dtype=np.uint64).astype("<u2").reshape(8, 1024, 1024)
    array[-8:, -1024:, -1024:] = written
    expected = np.asarray(zarr.open_array(root, mode="r")[-1])
    with mounted(root, ["sidecars=nifti"], tag="nifti-4gib") as mount:
        path = mount.p("array.nii")
        assert os.stat(path).st_size == 352 + 2 * 512 * 2048 * 2048
        # nibabel's own reads of the header, past the page cache (whose read-ahead would
        # take the first voxels with it)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_DIRECT), "rb", buffering=0) as f:
            header = nib.Nifti1Header.from_fileobj(f)
        assert header.get_data_shape() == shape[::-1] and header["vox_offset"] == 352
        stats = mount.stats()
        assert stats["cache_misses"] == 0, json.dumps(stats)
        img = nib.load(path)
        assert img.shape == shape[::-1] and img.header.get_data_dtype() == np.dtype("<u2")
        voxels = np.asanyarray(img.dataobj)
        assert isinstance(voxels, np.memmap)  # nibabel maps the file, reads no more
        assert np.array_equal(voxels[:, :, -1], expected.T)
        assert voxels[0, 0, 0] == 7
        del voxels
