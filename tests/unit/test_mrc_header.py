"""The ``.mrc`` view: a header of 1024 bytes then the voxels, a file ``mrcfile`` validates as
MRC2014 and reads as the array, with the voxel size and origin of its physical space in
Å. Expected values come from NumPy and from the numbers written here, never from the
header code; big-endian arrays are read through the vfs, which shows them little-endian."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import NamedTuple

import mrcfile
import numpy as np
import pytest
import trio
import zarr
from hypothesis import given
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.format.multiscales import Axis
from zarrmount.format.physical import Space
from zarrmount.headers import NotApplicable
from zarrmount.headers.mrc import mrc_header
from zarrmount.inspect_tree import inspect
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore

# mrcfile's record arrays set a dtype, which NumPy 2.5 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:Setting the dtype:DeprecationWarning")

# the modes of MRC2014 that NumPy has, and bool (0 and 1: mode 0)
MODES = {"i1": 0, "?": 0, "<i2": 1, "<f4": 2, "<c8": 4, "<u2": 6, "<f2": 12}
MICROMETRE = 1e4  # Å


def _values(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values that fill the type's range (negative ones where it has them)."""
    rng = np.random.default_rng(len(shape))
    if dtype == "?":
        return rng.integers(0, 2, size=shape).astype(bool)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype="u1")
    values = raw.view(dtype).reshape(shape)
    return np.nan_to_num(values, posinf=1, neginf=-1) if values.dtype.kind in "fc" else values


class Read(NamedTuple):
    """What mrcfile makes of a file."""

    valid: bool
    printed: str  # by mrcfile.validate: why not
    data: np.ndarray
    voxel: tuple[float, float, float]  # x, y, z
    origin: tuple[float, float, float]
    header: np.recarray


def _read(path: Path) -> Read:
    printed = io.StringIO()
    valid = mrcfile.validate(str(path), print_file=printed)
    with mrcfile.open(str(path)) as mrc:
        voxel, origin = mrc.voxel_size.item(), mrc.header.origin.item()
        return Read(valid, printed.getvalue(), mrc.data.copy(), voxel, origin, mrc.header.copy())


def _file(tmp_path: Path, values: np.ndarray, space: Space | None = None) -> Path:
    path = tmp_path / "view.mrc"
    path.write_bytes(mrc_header(values.shape, values.dtype, space) + values.tobytes())
    return path


def _space(units: tuple[str | None, ...], scale: tuple, translation: tuple) -> Space:
    axes = tuple(
        Axis(name, "space", unit) for name, unit in zip("zyx"[-len(units) :], units, strict=True)
    )
    return Space(axes, scale, translation, "OME-Zarr 0.4")


@pytest.mark.parametrize("dtype,mode", MODES.items())
@pytest.mark.parametrize("shape", [(7, 5), (3, 7, 5)])
def test_each_mode_is_a_valid_mrc2014_file_mrcfile_reads_as_the_array(tmp_path, dtype, mode, shape):
    values = _values(shape, dtype)
    read = _read(_file(tmp_path, values))
    assert read.valid, read.printed
    header = read.header
    assert int(header.mode) == mode and read.data.shape == shape
    np.testing.assert_array_equal(read.data, values)
    assert read.voxel == (1.0, 1.0, 1.0) and read.origin == (0.0, 0.0, 0.0)  # no space
    # statistics left "not computed", as MRC2014 allows: no voxel read to make the header
    assert header.dmax < header.dmin and header.dmean < header.dmax and header.rms < 0
    assert int(header.nversion) == 20141 and header.map == b"MAP "
    assert bytes(header.machst) == bytes((0x44, 0x44, 0, 0))
    assert (int(header.nsymbt), int(header.ispg)) == (0, len(shape) - 2)


def test_bytes_are_signed_for_imod_and_the_fields_lie_where_mrc2014_puts_them(tmp_path):
    head = mrc_header((3, 7, 5), np.dtype("i1"))
    words = np.frombuffer(head, "<i4")
    assert len(head) == 1024
    assert words[:4].tolist() == [5, 7, 3, 0] and words[7:10].tolist() == [5, 7, 3]
    assert words[16:19].tolist() == [1, 2, 3]  # MAPC, MAPR, MAPS
    assert head[208:212] == b"MAP "  # word 53
    # IMOD's stamp ("IMOD") and flags: 1, mode 0 bytes are signed; 8, RMS < 0 not computed
    assert head[152:156] == b"IMOD" and words[39] == 1 | 8


def test_voxel_size_and_origin_are_the_scales_and_translations_in_angstrom(tmp_path):
    space = _space(("micrometer", "nanometer", "angstrom"), (0.5, 2.0, 3.0), (1.0, -2.0, 3.5))
    read = _read(_file(tmp_path, _values((4, 3, 2), "<f4"), space))
    assert read.valid, read.printed
    assert read.voxel == (3.0, 20.0, 5000.0)  # x, y, z
    assert read.origin == (3.5, -20.0, 10000.0)
    assert read.header.cella.item() == (6.0, 60.0, 20000.0)


def test_axes_without_a_length_unit_keep_a_voxel_of_one_angstrom_at_zero(tmp_path):
    axes = (Axis("t", "time", "second"), Axis("y", "space", "micrometer"), Axis("x", "space"))
    space = Space(axes, (2.0, 0.25, 7.0), (5.0, 1.5, 9.0), "OME-Zarr 0.5")
    read = _read(_file(tmp_path, _values((2, 3, 4), "<u2"), space))
    assert read.voxel == (1.0, 2500.0, 1.0) and read.origin == (0.0, 15000.0, 0.0)


@given(
    shape=st.lists(st.integers(1, 6), min_size=2, max_size=3).map(tuple),
    scale=st.tuples(*[st.floats(1e-3, 1e3)] * 3),
    translation=st.tuples(*[st.floats(-1e3, 1e3)] * 3),
)
def test_any_image_or_volume_reads_back_with_its_scales(
    tmp_path_factory, shape, scale, translation
):
    ndim = len(shape)
    values = _values(shape, "<f4")
    space = _space(("micrometer",) * ndim, scale[:ndim], translation[:ndim])
    path = _file(tmp_path_factory.mktemp("mrc"), values, space)
    read = _read(path)
    assert read.valid, read.printed
    np.testing.assert_array_equal(read.data, values)
    expected_voxel = [s * MICROMETRE for s in reversed(scale[:ndim])] + [1.0] * (3 - ndim)
    expected_origin = [t * MICROMETRE for t in reversed(translation[:ndim])] + [0.0] * (3 - ndim)
    np.testing.assert_allclose(read.voxel, expected_voxel, rtol=1e-6)  # float32 cell / N
    assert read.origin == tuple(np.float32(expected_origin).tolist())


def test_leading_dimensions_of_length_one_are_dropped(tmp_path):
    values = _values((1, 1, 3, 4, 5), "<i2")  # OME-Zarr's t, c, z, y, x
    units = (None, None, "micrometer", "micrometer", "nanometer")
    axes = tuple(Axis(n, "space", u) for n, u in zip("tczyx", units, strict=True))
    space = Space(axes, (1.0, 1.0, 0.5, 0.25, 4.0), (0.0,) * 5, "OME-Zarr 0.4")
    read = _read(_file(tmp_path, values, space))
    assert read.valid, read.printed
    np.testing.assert_array_equal(read.data, values[0, 0])
    assert read.voxel == (40.0, 2500.0, 5000.0)


@pytest.mark.parametrize(
    "shape,dtype,words",
    [
        ((4, 5), "u1", "no uint8"),
        ((4, 5), "<i4", "no int32"),
        ((4, 5), "<f8", "no float64"),
        ((4, 5), "<c16", "no complex128"),
        ((20,), "<f4", "not 1-D"),
        ((2, 3, 4, 5), "<f4", "not 4-D"),
        ((1,), "<f4", "not 1-D"),
    ],
)
def test_what_mrc2014_cannot_hold_is_refused_with_the_reason(shape, dtype, words):
    with pytest.raises(NotApplicable, match=words):
        mrc_header(shape, np.dtype(dtype))


# ---------------------------------------------------------------- through the vfs


def _fs(root: str, options: str):
    mount_options = MountOptions()
    mount_options.apply(options)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    return assemble(dialect, node, pipeline, mount_options).fs


async def _read_view(fs, name: str, piece: int) -> bytes:
    ino = (await fs.lookup(1, name)).ino
    fh = fs.open(ino, os.O_RDONLY)
    got = [bytes(await fs.read(fh, at, piece)) for at in range(0, fs.getattr(ino).size, piece)]
    await fs.release(fh)
    return b"".join(got)


@pytest.mark.parametrize(
    "stored,options",
    [
        (">i2", ""),
        (">f4", ""),
        (">c8", ""),
        ("<u2", ",byteorder=big"),
        (">f2", ",byteorder=native"),
    ],
)
@pytest.mark.parametrize("piece", [5, 1000, 1 << 20])
def test_a_big_endian_array_is_shown_little_endian(tmp_path, stored, options, piece):
    root = str(tmp_path / "a.zarr")
    shape = (3, 11, 13)
    array = zarr.create_array(root, shape=shape, chunks=(2, 4, 8), dtype=stored, zarr_format=2)
    array[...] = _values(shape, stored)
    expected = np.asarray(zarr.open_array(root, mode="r")[...])
    fs = _fs(root, "sidecars=mrc" + options)
    path = tmp_path / "array.mrc"
    path.write_bytes(trio.run(_read_view, fs, "array.mrc", piece))
    read = _read(path)
    assert read.valid, read.printed
    assert bytes(read.header.machst) == bytes((0x44, 0x44, 0, 0))
    np.testing.assert_array_equal(read.data, expected)


def test_inspect_says_why_an_array_has_no_mrc_view(tmp_path):
    root = str(tmp_path / "a.zarr")
    zarr.create_array(root, shape=(5, 6), dtype="u1")
    dialect, node, _ = hierarchy.open_hierarchy(LocalStore(root))
    line = inspect(dialect, node, as_json=False, kinds=["npy", "mrc"])
    assert "sidecars: npy" in line and "mrc: MRC2014 has no uint8" in line


def test_the_header_of_a_4_gib_volume_is_made_without_loading_a_chunk(tmp_path):
    root = str(tmp_path / "volume.zarr")
    zarr.create_array(root, shape=(1024,) * 3, chunks=(64, 256, 256), dtype="<f4")
    fs = _fs(root, "sidecars=mrc")

    async def main():
        ino = (await fs.lookup(1, "array.mrc")).ino
        fh = fs.open(ino, os.O_RDONLY)
        head = bytes(await fs.read(fh, 0, 1024))
        await fs.release(fh)
        return fs.getattr(ino).size, head

    size, head = trio.run(main)
    assert size == 1024 + 4 * 1024**3
    assert np.frombuffer(head, "<i4", 3).tolist() == [1024] * 3
    assert fs.stats()["cache_misses"] == 0
