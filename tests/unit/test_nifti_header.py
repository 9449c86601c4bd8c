"""NIfTI headers (the ``.nii`` views) read by nibabel: a header followed by an array's
C-order bytes is an image whose voxels are the array with its axes reversed, whose zooms
are its scales in NIfTI's units and whose sform and qform place it as the header module
says (OME-Zarr's x, y, z as NIfTI's i, j, k, diagonal). Expected values come from NumPy
and the numbers written here, never from the header code."""

from __future__ import annotations

import os

import nibabel as nib
import numpy as np
import pytest
import trio
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.format.multiscales import Axis
from zarrmount.format.physical import Space
from zarrmount.headers import NotApplicable
from zarrmount.headers.nifti import nifti_header
from zarrmount.inspect_tree import inspect
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs.sidecars import SIDECARS

TYPES = ["|b1", "|u1", "|i1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"]
TYPES += ["<f4", "<f8", "<c8", "<c16"]
SHAPES = {2: (5, 7), 3: (3, 5, 7), 4: (2, 3, 4, 5), 5: (2, 1, 3, 4, 5)}
EYE = np.eye(4)


def _values(dtype: np.dtype, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random values spanning the type (integers to both extremes)."""
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, shape, dtype=dtype.newbyteorder("="), endpoint=True)
        return data.astype(dtype)
    data = rng.standard_normal(shape) * 1e3 + (
        1j * rng.standard_normal(shape) if dtype.kind == "c" else 0
    )
    return data.astype(dtype)


def _load(path, header: bytes, data: bytes) -> nib.Nifti1Image:
    path.write_bytes(header + data)
    return nib.load(path)


def _space(units, scale, translation=None, types=None) -> Space:
    """A space of axes named a0, a1, ... (C order) by hand, as OME-Zarr would give it."""
    n = len(scale)
    types = types or ["space"] * n
    axes = tuple(Axis(f"a{i}", t, u) for i, (t, u) in enumerate(zip(types, units, strict=True)))
    return Space(axes, tuple(scale), tuple(translation or [0.0] * n), "OME-Zarr 0.4")


def _raw_header(path, kind: type = nib.Nifti1Header) -> nib.Nifti1Header:
    """The header as stored (nibabel's image header is a copy it adjusts)."""
    with open(path, "rb") as f:
        return kind.from_fileobj(f)


@pytest.mark.parametrize("ndim", sorted(SHAPES))
@pytest.mark.parametrize("code", TYPES)
def test_every_type_and_rank_reads_back_as_the_array_reversed(tmp_path, code, ndim):
    dtype, shape = np.dtype(code), SHAPES[ndim]
    values = _values(dtype, shape, ndim)
    path = tmp_path / "a.nii"
    img = _load(path, nifti_header(shape, dtype, None), values.tobytes())
    assert type(img) is nib.Nifti1Image and img.shape == shape[::-1]
    got = np.asanyarray(img.dataobj)
    expected = values.astype(np.uint8) if dtype.kind == "b" else values
    assert got.dtype == expected.dtype and np.array_equal(got, expected.T)
    assert img.header.get_zooms() == (1.0,) * ndim
    raw = _raw_header(path)
    assert np.array_equal(raw.get_sform(), EYE) and np.array_equal(raw.get_qform(), EYE)
    assert raw["sform_code"] == raw["qform_code"] == 0  # unknown: no space
    assert raw["scl_slope"] == raw["scl_inter"] == raw["cal_min"] == raw["cal_max"] == 0
    assert raw["vox_offset"] == 352 and raw["magic"] == b"n+1"
    assert raw.get_xyzt_units() == ("unknown", "unknown")
    assert path.read_bytes()[344:352] == b"n+1\0" + bytes(4)  # no extensions


def test_a_micrometre_space_gives_zooms_units_and_a_diagonal_sform(tmp_path):
    """z, y, x of 0.5, 0.1, 0.2 um from (10, 20, 30) um: i, j, k are x, y, z."""
    values = _values(np.dtype("<u2"), (4, 5, 6))
    space = _space(["micrometer"] * 3, [0.5, 0.1, 0.2], [10.0, 20.0, 30.0])
    path = tmp_path / "a.nii"
    img = _load(path, nifti_header(values.shape, values.dtype, space), values.tobytes())
    assert np.array_equal(img.dataobj, values.T)
    assert np.allclose(img.header.get_zooms(), (0.2, 0.1, 0.5))
    expected = [[0.2, 0, 0, 30], [0, 0.1, 0, 20], [0, 0, 0.5, 10], [0, 0, 0, 1]]
    raw = _raw_header(path)
    assert np.allclose(raw.get_sform(), expected) and np.allclose(raw.get_qform(), expected)
    assert np.allclose(img.affine, expected)
    assert raw["sform_code"] == raw["qform_code"] == 2  # aligned
    assert raw.get_xyzt_units() == ("micron", "unknown")
    assert nib.aff2axcodes(img.affine) == ("R", "A", "S")


@pytest.mark.parametrize(
    "unit, scale, nifti_unit, zoom",
    [
        ("micrometer", 0.7, "micron", 0.7),
        ("nanometer", 250.0, "micron", 0.25),
        ("angstrom", 5000.0, "micron", 0.5),
        ("picometer", 2e6, "micron", 2.0),
        ("millimeter", 1.5, "mm", 1.5),
        ("centimeter", 0.3, "mm", 3.0),
        ("inch", 1.0, "mm", 25.4),
        ("meter", 2.0, "meter", 2.0),
        ("kilometer", 0.5, "meter", 500.0),
        (None, 0.7, "unknown", 0.7),
        ("furlong", 3.0, "unknown", 3.0),  # not a unit OME-Zarr names
    ],
)
def test_a_length_is_given_in_the_nifti_unit_below_it(tmp_path, unit, scale, nifti_unit, zoom):
    """Translations too: each axis starts 2 scales from the origin."""
    space = _space([unit] * 2, [scale, scale], [2 * scale, 2 * scale])
    path = tmp_path / "a.nii"
    img = _load(path, nifti_header((3, 4), np.dtype("<f4"), space), bytes(48))
    assert np.allclose(img.header.get_zooms(), (zoom, zoom))
    assert img.header.get_xyzt_units() == (nifti_unit, "unknown")
    expected = [[zoom, 0, 0, 2 * zoom], [0, zoom, 0, 2 * zoom], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert np.allclose(_raw_header(path).get_sform(), expected)


def test_lengths_of_several_units_take_the_first_axis_unit(tmp_path):
    """x in nanometres (NIfTI's first axis) sets microns; z in millimetres follows."""
    space = _space(["millimeter", "micrometer", "nanometer"], [0.002, 0.5, 100.0])
    img = _load(tmp_path / "a.nii", nifti_header((2, 3, 4), np.dtype("u1"), space), bytes(24))
    assert np.allclose(img.header.get_zooms(), (0.1, 0.5, 2.0))
    assert img.header.get_xyzt_units() == ("micron", "unknown")


@pytest.mark.parametrize(
    "unit, scale, nifti_unit, zoom",
    [
        ("second", 2.5, "sec", 2.5),
        ("millisecond", 40.0, "msec", 40.0),
        ("minute", 2.0, "sec", 120.0),
        ("nanosecond", 1500.0, "usec", 1.5),
    ],
)
def test_a_time_axis_fourth_gets_a_time_unit(tmp_path, unit, scale, nifti_unit, zoom):
    """OME-Zarr's t, z, y, x: NIfTI's x, y, z, t."""
    types = ["time", "space", "space", "space"]
    units = [unit, "micrometer", "micrometer", "micrometer"]
    space = _space(units, [scale, 1.0, 0.5, 0.25], [3 * scale, 0, 0, 0], types)
    values = _values(np.dtype("<f4"), (2, 3, 4, 5))
    img = _load(
        tmp_path / "a.nii", nifti_header(values.shape, values.dtype, space), values.tobytes()
    )
    assert np.array_equal(img.dataobj, values.T)
    assert np.allclose(img.header.get_zooms(), (0.25, 0.5, 1.0, zoom))
    assert img.header.get_xyzt_units() == ("micron", nifti_unit)


def test_a_five_dimensional_image_keeps_its_channels_and_times_in_order(tmp_path):
    """OME-Zarr's t, c, z, y, x: NIfTI's x, y, z, c, t (no axis moved: bytes as they are)."""
    types = ["time", "channel", "space", "space", "space"]
    units = ["second", None, "millimeter", "millimeter", "millimeter"]
    space = _space(units, [3.0, 1.0, 1.2, 0.9, 0.8], [0, 0, -50.0, -60.0, -70.0], types)
    values = _values(np.dtype("<i2"), (2, 3, 4, 5, 6))
    path = tmp_path / "a.nii"
    img = _load(path, nifti_header(values.shape, values.dtype, space), values.tobytes())
    assert img.shape == (6, 5, 4, 3, 2) and np.array_equal(img.dataobj, values.T)
    assert np.allclose(img.header.get_zooms(), (0.8, 0.9, 1.2, 1.0, 3.0))
    assert img.header.get_xyzt_units() == ("mm", "sec")
    expected = [[0.8, 0, 0, -70], [0, 0.9, 0, -60], [0, 0, 1.2, -50], [0, 0, 0, 1]]
    assert np.allclose(_raw_header(path).get_sform(), expected)


@pytest.mark.parametrize(
    "code", [">i2", ">u2", ">i4", ">u4", ">i8", ">u8", ">f4", ">f8", ">c8", ">c16"]
)
def test_a_big_endian_array_is_shown_little_endian(tmp_path, code):
    dtype = np.dtype(code)
    values = _values(dtype, (3, 4, 5), 7)
    convert = SIDECARS["nifti"].convert(dtype)
    shown = convert(np.frombuffer(values.tobytes(), np.uint8)).tobytes()
    img = _load(tmp_path / "a.nii", nifti_header(values.shape, dtype, None), shown)
    assert img.header.endianness == "<"
    got = np.asanyarray(img.dataobj)
    assert got.dtype == dtype.newbyteorder("<") and np.array_equal(got, values.T)


@pytest.mark.parametrize("code", ["|u1", "|b1", "<i4", "<c16"])
def test_little_endian_and_single_byte_arrays_are_shown_as_they_are(code):
    assert SIDECARS["nifti"].convert(np.dtype(code)) is None


@pytest.mark.parametrize("length, image", [(32_767, nib.Nifti1Image), (32_768, nib.Nifti2Image)])
def test_nifti1_holds_axes_up_to_32767_and_nifti2_the_longer(tmp_path, length, image):
    values = _values(np.dtype("<i2"), (2, length))
    path = tmp_path / "a.nii"
    img = _load(path, nifti_header(values.shape, values.dtype, None), values.tobytes())
    assert type(img) is image and np.array_equal(img.dataobj, values.T)


def test_a_nifti2_file_of_a_long_sparse_volume_reads_its_last_row(tmp_path):
    """1.6 GB of uint8 with a 40,000-voxel axis, written sparse: header, a first and a last
    row; nibabel memory-maps it."""
    shape = (40_000, 40_000)
    first, last = _values(np.dtype("u1"), (2, 40_000), 3)
    path = tmp_path / "long.nii"
    header = nifti_header(shape, np.dtype("u1"), _space(["micrometer"] * 2, [0.5, 0.25]))
    with open(path, "wb") as f:
        f.write(header + first.tobytes())
        f.truncate(len(header) + shape[0] * shape[1])
        f.seek(-shape[1], os.SEEK_END)
        f.write(last.tobytes())
    img = nib.load(path)
    raw = _raw_header(path, nib.Nifti2Header)
    assert type(img) is nib.Nifti2Image and img.shape == shape
    assert raw["sizeof_hdr"] == 540 and raw["vox_offset"] == 544 and raw["magic"] == b"n+2"
    with open(path, "rb") as f:
        assert f.read(12)[4:] == b"n+2\0\r\n\x1a\n"
    assert np.array_equal(img.dataobj[:, -1], last) and np.array_equal(img.dataobj[:, 0], first)
    assert img.dataobj[20_000, 20_000] == 0
    assert np.allclose(img.header.get_zooms(), (0.25, 0.5))
    assert np.allclose(raw.get_sform(), np.diag([0.25, 0.5, 1, 1]))


@pytest.mark.parametrize(
    "shape, code, why",
    [
        ((5,), "<f4", "2-D to 7-D"),
        ((), "<f4", "2-D to 7-D"),
        ((1,) * 8, "<f4", "2-D to 7-D"),
        ((0, 3), "<f4", "empty"),
        ((2, 3), "<f2", "float16"),
        ((2, 3), "<U3", "fixed-length strings"),
        ((2, 3), "|S3", "fixed-length strings"),
        ((2, 3), [("a", "<i4"), ("b", "<f4")], "structured"),
        ((2, 3), ("<i2", (2,)), "sub-array"),
    ],
)
def test_arrays_nifti_cannot_hold_get_no_header_and_the_reason(shape, code, why):
    with pytest.raises(NotApplicable, match=why):
        nifti_header(shape, np.dtype(code), None)


# test-side numbers: metres per unit, and the size of the NIfTI unit each one sets
METRES = {"micrometer": 1e-6, "nanometer": 1e-9, "millimeter": 1e-3}
NIFTI_UNIT = {
    "micrometer": (1e-6, "micron"),
    "nanometer": (1e-6, "micron"),
    "millimeter": (1e-3, "mm"),
}


@st.composite
def _images(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=2, max_size=7)))
    dtype = np.dtype(draw(st.sampled_from(TYPES + [">i2", ">f8", ">u4"])))
    scales = draw(st.lists(st.floats(1e-3, 1e3), min_size=len(shape), max_size=len(shape)))
    units = draw(
        st.lists(st.sampled_from([*METRES, None]), min_size=len(shape), max_size=len(shape))
    )
    return shape, dtype, scales, units


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_images())
def test_any_small_image_reads_back_with_its_voxels_and_zooms(image):
    shape, dtype, scales, units = image
    values = _values(dtype, shape)
    raw = np.frombuffer(values.tobytes(), np.uint8)
    convert = SIDECARS["nifti"].convert(dtype)
    data = (convert(raw) if convert else raw).tobytes()
    img = nib.Nifti1Image.from_bytes(nifti_header(shape, dtype, _space(units, scales)) + data)
    expected = values.astype(np.uint8) if dtype.kind == "b" else values
    assert np.array_equal(np.asanyarray(img.dataobj), expected.T)
    first = next((u for u in reversed(units) if u is not None), None)
    size, name = NIFTI_UNIT[first] if first else (1.0, "unknown")
    zooms = [s * METRES[u] / size if u else s for s, u in zip(scales, units, strict=True)]
    assert np.allclose(img.header.get_zooms(), zooms[::-1], rtol=1e-6)
    assert img.header.get_xyzt_units()[0] == name


def test_a_mount_shows_a_big_endian_array_as_a_nii_and_inspect_says_why_others_have_none(tmp_path):
    """Without a kernel: the view's bytes, read in pieces, are the array little-endian."""
    root = str(tmp_path / "a.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    values = _values(np.dtype(">i4"), (6, 7, 8))
    group.create_array("vol", shape=values.shape, chunks=(2, 4, 4), dtype=">i4")[...] = values
    group.create_array("line", shape=(9,), dtype="<f4")
    options = MountOptions()
    options.apply("sidecars=nifti")
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    fs = assemble(dialect, node, pipeline, options).fs

    async def main() -> bytes:
        ino = (await fs.lookup(1, "vol.nii")).ino
        fh = fs.open(ino, os.O_RDONLY)
        size = fs.getattr(ino).size
        got = b"".join([bytes(await fs.read(fh, at, 1000)) for at in range(0, size, 1000)])
        await fs.release(fh)
        return got

    img = nib.Nifti1Image.from_bytes(trio.run(main))
    assert np.array_equal(np.asanyarray(img.dataobj), values.T)
    listing = inspect(dialect, node, as_json=False, kinds=["nifti"])
    assert "NIfTI views are of 2-D to 7-D arrays" in listing
