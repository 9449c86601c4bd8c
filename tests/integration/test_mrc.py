"""Through the kernel: the ``.mrc`` views as electron microscopy reads them. mrcfile
validates each level of an OME-Zarr image written by ome-zarr-py (0.4 on Zarr v2, 0.5 on
v3) and reads zarr-python's voxels with the voxel size and origin the image declares, in
Å; the header of a 4 GiB volume is read without a chunk loaded, and the volume opens
memory-mapped and reads its last slice from its last chunk."""

from __future__ import annotations

import io
import os

import mrcfile
import numpy as np
import pytest
import zarr
from mrcfile.mrcinterpreter import MrcInterpreter
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.writer import write_image

pytestmark = [
    pytest.mark.mount,
    # mrcfile's record arrays set a dtype, which NumPy 2.5 deprecates
    pytest.mark.filterwarnings("ignore:Setting the dtype:DeprecationWarning"),
]

MICROMETRE = 1e4  # Å
SCALE = {"z": 0.5, "y": 0.1, "x": 0.2}  # micrometres


def _transforms(group: zarr.Group, fmt) -> dict[str, tuple[list[float], list[float]]]:
    """Each level's scale and translation (z, y, x, micrometres) as ome-zarr-py wrote them."""
    attributes = group.attrs.asdict()
    multiscales = (attributes["ome"] if fmt.version == "0.5" else attributes)["multiscales"]
    found = {}
    for dataset in multiscales[0]["datasets"]:
        steps = {step["type"]: step for step in dataset["coordinateTransformations"]}
        found[dataset["path"]] = steps["scale"]["scale"], steps["translation"]["translation"]
    return found


@pytest.mark.parametrize("fmt", [FormatV04(), FormatV05()], ids=lambda f: f.version)
def test_each_level_of_an_ome_zarr_image_is_an_mrc_file_with_its_voxel_size(
    mount_factory, tmp_path, fmt
):
    root = str(tmp_path / "image.zarr")
    image = np.random.default_rng(3).integers(0, 60000, size=(12, 64, 40), dtype="u2")
    group = zarr.open_group(root, mode="w", zarr_format=fmt.zarr_format)
    units = dict.fromkeys("zyx", "micrometer")
    write_image(image, group, axes="zyx", fmt=fmt, scale=SCALE, axes_units=units)
    levels = _transforms(group, fmt)
    assert len(levels) > 1
    mount = mount_factory(root, ["sidecars=mrc"], tag=f"mrc-ome-{fmt.version}")
    for level, (scale, translation) in levels.items():
        path = mount.p(level + ".mrc")
        printed = io.StringIO()
        assert mrcfile.validate(path, print_file=printed), printed.getvalue()
        with mrcfile.open(path) as mrc:
            np.testing.assert_array_equal(mrc.data, zarr.open_array(root, path=level)[...])
            voxel, origin = mrc.voxel_size.item(), mrc.header.origin.item()
        np.testing.assert_allclose(voxel, np.multiply(scale[::-1], MICROMETRE), rtol=1e-6)
        np.testing.assert_allclose(origin, np.multiply(translation[::-1], MICROMETRE), rtol=1e-6)


# 4 GiB of float32 in chunks of 64 MiB: the first 4 MiB of voxels lie in the first chunk
SIDE, CHUNKS = 1024, (16, 1024, 1024)


def _sparse_volume(root: str) -> np.ndarray:
    """A volume of its fill value but for its last chunk, which is written: that chunk."""
    array = zarr.create_array(
        root, shape=(SIDE,) * 3, chunks=CHUNKS, dtype="<f4", fill_value=-1.5, zarr_format=3
    )
    last = np.arange(np.prod(CHUNKS), dtype="<f4").reshape(CHUNKS)
    array[-CHUNKS[0] :] = last
    return last


def test_a_4_gib_volume_header_loads_no_chunk_and_its_memory_map_reads_the_last_slice(
    mount_factory, tmp_path
):
    root = str(tmp_path / "volume.zarr")
    last = _sparse_volume(root)
    mount = mount_factory(root, ["sidecars=mrc"], tag="mrc-4gib")
    path = mount.p("array.mrc")
    assert os.stat(path).st_size == 1024 + 4 * SIDE**3
    # mrcfile's reading of the header, past the page cache (whose read-ahead would take
    # the first voxels with it)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_DIRECT), "rb", buffering=0) as f:
        header = MrcInterpreter(f, permissive=True, header_only=True).header
        assert (int(header.nx), int(header.ny), int(header.nz)) == (SIDE,) * 3
    assert mount.stats()["cache_misses"] == 0
    with mrcfile.mmap(path, mode="r", permissive=True) as mrc:
        opened = mount.stats()
        assert mrc.data.shape == (SIDE,) * 3 and mrc.data.dtype == np.float32
        # through the page cache the kernel reads on from the header's page (1 MiB here):
        # voxels of the first chunk, which is absent (the fill value)
        assert opened["cache_misses"] <= 1, opened
        assert opened["read_bytes"] < 4 << 20, opened
        np.testing.assert_array_equal(mrc.data[-1], last[-1])
        assert mount.stats()["cache_misses"] - opened["cache_misses"] == 1  # the last chunk
