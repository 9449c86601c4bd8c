"""The Zarr v3 editor's drafts: the May 2022 layout (built here by hand from the draft's rules,
numpy + numcodecs only) and the older ``meta/root`` layout (zarrita conformance data).

May 2022 (``/work/shared/specs/zarr-v3.0-core-draft-2022-05-25.rst``): entry point
``zarr.json``, ``meta/<path>.array.json`` / ``meta/<path>.group.json`` (root group
``meta/group.json``, root array ``meta/array.json``), chunks ``data/<path>/c<i><sep><j>``,
``codecs`` with URI ``type``s (gzip, blosc, endian), implicit groups,
``chunk_memory_layout`` "F" (dimension order reversed before encoding), fill values as
hex/binary strings, "NaN"/"+Infinity"/"-Infinity" and null, edge and missing chunks.
Oracle: the NumPy source with the fill value where a chunk is missing.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from helpers import common, shared_dir
from helpers import v3_fixtures as v3
from helpers.mounting import mounted, run_cli
from helpers.oracle import assert_bytes_equal, read_file

pytestmark = pytest.mark.mount

DRY = v3.build_draft(None)
ARRAY_PATHS = sorted(DRY.arrays)

CONFORMANCE = shared_dir() / "conformance" / "zarr_implementations"
ZARRITA = CONFORMANCE / "examples" / "zarrita.zr3"
REFERENCE = CONFORMANCE / "data" / "reference_image.png"
ZARRITA_ARRAYS = {"raw", "zlib", "gzip", "blosc/lz4"}


draft, draft_mount, live = common.mounted_hierarchy_fixtures(
    v3.build_draft, "zarr-draft", "draft.zr3", "draft", names=("draft", "draft_mount", "live")
)


def test_fixture_layout(draft):
    """The store follows the May 2022 rules (no ``root/`` prefix anywhere)."""
    root = draft.root
    entry = json.loads((root / "zarr.json").read_text())
    assert entry["zarr_format"] == v3.DRAFT_PROTOCOL
    assert (root / "meta" / "group.json").is_file()
    assert (root / "meta" / "a_gzip.array.json").is_file()
    assert (root / "data" / "a_gzip" / "c0" / "0").is_file()
    assert (root / "data" / "g_dot_separator" / "c0.1").is_file()
    assert (root / "data" / "zerod" / "c").is_file()
    assert not (root / "meta" / "implicit.group.json").exists()
    assert not (root / "meta" / "implicit" / "deeper.group.json").exists()
    assert not (root / "meta" / "root").exists() and not (root / "data" / "root").exists()
    assert not (root / "data" / "l_float64_plus_inf").exists()  # no chunk at all


def test_listing(live, draft):
    common.assert_listing_matches(live.path, draft)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_bytes_and_xattrs(live, draft, path):
    case = draft.arrays[path]
    full = live.p(path)
    common.assert_array_file(full, case)
    problems = v3.v3_xattr_problems(full, case)
    assert not problems, f"{path}: " + "; ".join(problems)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_uncached_reads(live, draft, path):
    case = draft.arrays[path]
    n = case.nbytes
    rng = np.random.default_rng(len(path))
    fd = os.open(live.p(path), os.O_RDONLY | os.O_DIRECT)
    try:
        for _ in range(20):
            off = int(rng.integers(0, n + 1))
            size = int(rng.integers(1, n - off + 9))
            assert_bytes_equal(os.pread(fd, size, off), case.expected[off : off + size], None)
    finally:
        os.close(fd)


def test_draft_nodes_that_must_be_hidden(live, draft):
    """An array extension that must be understood, a storage transformer, an unknown field:
    hidden (the draft: "must fail to open"), listed by --inspect with a reason."""
    listed = set(os.listdir(live.path))
    for path in draft.hidden:
        assert path not in listed
        with pytest.raises(FileNotFoundError):
            os.stat(live.p(path))
    res = run_cli(["--inspect", str(draft.root), "--json"])
    assert res.returncode == 0, res.stderr
    nodes = {n["path"]: n for n in json.loads(res.stdout)["nodes"]}
    for path in draft.hidden:
        assert nodes[path]["shown"] is False and nodes[path]["reason"], nodes[path]


def test_groups_and_attributes(live, draft):
    for path, attrs in draft.groups.items():
        full = live.p(path)
        assert stat.S_ISDIR(os.stat(full).st_mode), path
        assert v3.getxattr_json(full, "user.zarr.attributes") == attrs, path
    assert v3.getxattr_json(live.path, "user.zarr.conventions") == v3.DRAFT_ROOT_CONVENTIONS
    assert os.listdir(live.p("implicit")) == ["deeper"]
    assert os.listdir(live.p("implicit/deeper")) == ["arr"]
    assert os.listdir(live.p("explicit")) == ["child"]


def test_fill_values_in_missing_chunks(live):
    """Independent spot checks of the fill value forms (bits, not only equality)."""

    def elem(path, index, dtype):
        dtype = np.dtype(dtype)
        with open(live.p(path), "rb") as f:
            return os.pread(f.fileno(), dtype.itemsize, index * dtype.itemsize)

    # e_missing_hex_fill: "0x3fc00000" = 1.5; chunk (0, 1) is missing -> element (0, 4)
    assert elem("e_missing_hex_fill", 4, "<f4") == np.float32(1.5).tobytes()
    # h_uint16_hex: "0xfffe"; chunk 1 (elements 4-7) missing
    assert elem("h_uint16_hex", 5, "<u2") == np.uint16(0xFFFE).tobytes()
    # i_int8_binary: "0b11111110" = -2; chunk (1, 1) missing -> element (2, 2)
    assert elem("i_int8_binary", 2 * 5 + 2, "i1") == np.int8(-2).tobytes()
    # f_null_fill: null reads as zeros; chunk row 1 missing -> element (3, 0)
    assert elem("f_null_fill", 3 * 7, "<i2") == b"\0\0"
    # d_big_F_3d: "0x7fc00001" in a big-endian file; chunk (0, 0, 1) missing
    assert elem("d_big_F_3d", 3, ">f4") == bytes.fromhex("7fc00001")
    # l_float64_plus_inf: "+Infinity", nothing written
    assert read_file(live.p("l_float64_plus_inf")) == np.full(9 * 8, np.inf, "<f8").tobytes()
    # k_float64_neg_inf: "-Infinity" big endian; chunk (0, 1) missing -> element (0, 3)
    assert elem("k_float64_neg_inf", 3, ">f8") == np.array(-np.inf, ">f8").tobytes()


def test_endian_and_layout(live):
    """endian codec big -> big-endian file dtype; F layout still gives a C-order file."""
    assert os.getxattr(live.p("c_big_gzip"), "user.zarr.dtype").decode() == ">u4"
    assert os.getxattr(live.p("d_big_F_3d"), "user.zarr.dtype").decode() == ">f4"
    assert os.getxattr(live.p("b_blosc_F"), "user.zarr.dtype").decode() == "<f4"
    assert os.getxattr(live.p("zerod"), "user.zarr.dtype").decode() == ">f8"
    assert read_file(live.p("zerod")) == np.array(-4.25, ">f8").tobytes()
    assert read_file(live.p("zerod_missing")) == np.array(77, "<i4").tobytes()


def test_inspect_json(draft):
    res = run_cli(["--inspect", str(draft.root), "--json"])
    assert res.returncode == 0, res.stderr
    nodes = {n["path"]: n for n in json.loads(res.stdout)["nodes"]}
    for path, case in draft.arrays.items():
        n = nodes[path]
        assert n["shown"] is True and n["type"] == "array", n
        assert n["shape"] == list(case.shape) and n["chunks"] == list(case.chunks), n
        assert str(n["format"]) == "3-draft", n
    for path in draft.groups:
        assert nodes[path]["type"] == "group" and nodes[path]["shown"] is True


def test_draft_root_array(tmp_path):
    """May 2022 root array: ``meta/array.json`` and chunks ``data/c<i>/<j>``."""
    case = v3.build_draft_root_array(tmp_path / "rootarray.zr3")
    assert (tmp_path / "rootarray.zr3" / "meta" / "array.json").is_file()
    assert (tmp_path / "rootarray.zr3" / "data" / "c0" / "0").is_file()
    with mounted(tmp_path / "rootarray.zr3", tag="draftroot") as m:
        assert os.listdir(m.path) == ["array"]
        assert_bytes_equal(read_file(m.p("array")), case.expected, case.dtype)
        problems = v3.v3_xattr_problems(m.p("array"), case)
        assert not problems, problems


def test_draft_entry_point_as_the_spec_words_it(tmp_path):
    """The May 2022 text: ``"zarr_format": "https://purl.org/zarr/spec/core/3.0"`` and
    ``"metadata_encoding": {"type": "json", "metadata_key_suffix": ".json"}``."""
    h = v3.build_draft(tmp_path / "specform.zr3", spec_form=True)
    with mounted(h.root, tag="draftspec") as m:
        for path in ("a_gzip", "b_blosc_F", "implicit/deeper/arr"):
            case = h.arrays[path]
            assert_bytes_equal(read_file(m.p(path)), case.expected, case.dtype)


# --------------------------------------------------------------------------- zarrita (meta/root)


@pytest.fixture(scope="module")
def reference():
    if not ZARRITA.is_dir() or not REFERENCE.is_file():
        pytest.skip(f"conformance data not present under {CONFORMANCE}")
    from PIL import Image

    with Image.open(REFERENCE) as img:
        arr = np.asarray(img)
    return np.ascontiguousarray(arr).tobytes(), arr.shape


def test_zarrita_conformance(reference):
    """Every array of the read-only ``zarrita.zr3`` (mounted in place) equals the image."""
    want, shape = reference
    with mounted(ZARRITA, tag="zarrita") as m:
        found = {}
        for dirpath, _dirs, files in os.walk(m.path):
            for name in files:
                full = os.path.join(dirpath, name)
                found[os.path.relpath(full, m.path)] = full
        assert set(found) == ZARRITA_ARRAYS, sorted(found)
        bad = {}
        for rel, full in sorted(found.items()):
            got = read_file(full)
            if got != want:
                bad[rel] = f"{len(got)} bytes vs {len(want)}"
            assert json.loads(os.getxattr(full, "user.zarr.shape")) == list(shape), rel
            assert os.getxattr(full, "user.zarr.dtype").decode() == "|u1", rel
            assert os.getxattr(full, "user.zarr.format").decode() == "3-draft-root", rel
            assert json.loads(os.getxattr(full, "user.zarr.chunks")) == [100, 100, 1], rel
        assert not bad, bad
        # the same through uncached reads of the last rows
        fd = os.open(found["blosc/lz4"], os.O_RDONLY | os.O_DIRECT)
        try:
            off = len(want) - 5000
            assert os.pread(fd, 6000, off) == want[off:]
        finally:
            os.close(fd)
        m.assert_alive()


def test_draft_without_root_group_document(tmp_path):
    """No ``meta/group.json``: the root is an implicit group (no attributes)."""
    h = v3.build_draft(tmp_path / "noroot.zr3", root_doc=False)
    assert not (tmp_path / "noroot.zr3" / "meta" / "group.json").exists()
    with mounted(h.root, tag="draftnoroot") as m:
        top = {p.split("/")[0] for p in [*h.arrays, *h.groups] if p}
        assert set(os.listdir(m.path)) == top
        assert v3.getxattr_json(m.path, "user.zarr.attributes") == {}
        for path in ("a_gzip", "d_big_F_3d", "explicit/child"):
            case = h.arrays[path]
            assert_bytes_equal(read_file(m.p(path)), case.expected, case.dtype)
