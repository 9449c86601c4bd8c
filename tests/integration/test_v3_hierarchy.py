"""Zarr v3 hierarchy written by zarr-python 3, mounted once: listing, sizes, bytes, xattrs.

Every data type, fill value form, codec and combination, sharding (index at start and end,
partial, edge and nested shards), both chunk key encodings, missing chunks, 0-d and empty
arrays, nested groups, dimension names, conventions. Oracle: zarr-python reading the same
store (``r*`` raw types written by hand: NumPy), see ``helpers/v3_fixtures.py``.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
import zlib

import numpy as np
import pytest
from helpers import common
from helpers import v3_fixtures as v3
from helpers.mounting import mounted, run_cli
from helpers.oracle import REQUIRED_ARRAY_XATTRS, assert_bytes_equal, read_file

pytestmark = pytest.mark.mount

DRY = v3.build_v3_main(None)
ARRAY_PATHS = sorted(DRY.arrays)
GROUP_PATHS = sorted(DRY.groups)
# arrays whose inner structure (shards, transposes, edges) random reads must exercise
RANDOM_READ_PATHS = sorted(
    p
    for p, a in DRY.arrays.items()
    if a.tags & {"shard", "keys"} or "transpose" in p or p.startswith(("raw/", "missing/"))
)


v3_main, v3_mount, live = common.mounted_hierarchy_fixtures(
    v3.build_v3_main, "zarr-v3-main", "data.zarr", "v3main", names=("v3_main", "v3_mount", "live")
)


def test_fixture_covers_what_it_claims(v3_main):
    """The store really holds the layouts the tests rely on (else they prove little)."""
    root = v3_main.root
    assert (root / "keys/default_slash/c/0/0").is_file()
    assert (root / "keys/default_dot/c.0.0").is_file()
    assert (root / "keys/v2_dot/0.0").is_file()
    assert (root / "keys/v2_slash/0/0").is_file()
    assert (root / "keys/default_slash_0d/c").is_file()
    assert (root / "keys/v2_dot_0d/0").is_file()
    assert not (root / "shard/partial/c/1/1").exists()  # a whole shard missing
    assert not (root / "missing/none_written/c").exists()
    assert not (root / "fill/float32_nan/c/0").exists()
    doc = json.loads((root / "shard/index_start/zarr.json").read_text())
    assert doc["codecs"][0]["configuration"]["index_location"] == "start"
    doc = json.loads((root / "shard/nested/zarr.json").read_text())
    inner = doc["codecs"][0]["configuration"]["codecs"]
    assert inner[0]["name"] == "sharding_indexed"
    doc = json.loads((root / "codecs/numcodecs_delta/zarr.json").read_text())
    assert doc["codecs"][0]["name"] == "numcodecs.delta"
    doc = json.loads((root / "fill/float32_hex_nan_payload/zarr.json").read_text())
    assert doc["fill_value"] == "0x7fc00001"
    # partial shard: inner chunks marked missing in the index of shard (0, 0)
    raw = (root / "shard/partial/c/0/0").read_bytes()
    index = np.frombuffer(raw[-(16 * 12 + 4) : -4], "<u8").reshape(12, 2)
    assert (index == 2**64 - 1).all(axis=1).any()
    assert not (index == 2**64 - 1).all(axis=1).all()


def test_listing_matches_hierarchy(live, v3_main):
    common.assert_listing_matches(live.path, v3_main)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_size_and_bytes(live, v3_main, path):
    """Size is prod(shape) * itemsize; the whole file (plain read) equals the oracle."""
    case = v3_main.arrays[path]
    st = common.assert_array_file(live.p(path), case)
    assert st.st_size == int(np.prod(case.shape, dtype=np.int64)) * case.dtype.itemsize


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_xattrs(live, v3_main, path):
    problems = v3.v3_xattr_problems(live.p(path), v3_main.arrays[path])
    assert not problems, f"{path}: " + "; ".join(problems)


@pytest.mark.parametrize("path", RANDOM_READ_PATHS)
def test_uncached_random_reads(live, v3_main, path):
    """O_DIRECT reads of arbitrary ranges (the daemon sees exactly these) equal the oracle."""
    case = v3_main.arrays[path]
    n = case.nbytes
    rng = np.random.default_rng(zlib.crc32(path.encode()))
    ranges = [(0, n), (0, 1), (max(0, n - 1), 1), (n, 10), (n + 5, 3)]
    for _ in range(25):
        off = int(rng.integers(0, n + 1))
        ranges.append((off, int(rng.integers(1, max(2, n - off + 20)))))
    fd = os.open(live.p(path), os.O_RDONLY | os.O_DIRECT)
    try:
        for off, size in ranges:
            got = os.pread(fd, size, off)
            assert_bytes_equal(got, case.expected[off : off + size], None)
    finally:
        os.close(fd)


def test_array_xattrs_are_listed(live, v3_main):
    problems = {}
    for path, case in v3_main.arrays.items():
        names = set(os.listxattr(live.p(path)))
        want = set(REQUIRED_ARRAY_XATTRS)
        if case.shards is not None:
            want.add("user.zarr.shards")
        if case.dimension_names is not None:
            want.add("user.zarr.dimension_names")
        if case.conventions is not None:
            want.add("user.zarr.conventions")
        if want - names:
            problems[path] = sorted(want - names)
    assert not problems, problems
    assert "user.zarrmount.stats" in set(os.listxattr(live.path))


@pytest.mark.parametrize("path", GROUP_PATHS)
def test_group_directory_and_attributes(live, v3_main, path):
    full = live.p(path)
    assert stat.S_ISDIR(os.stat(full).st_mode)
    assert v3.getxattr_json(full, "user.zarr.attributes") == v3_main.groups[path]


def test_nested_groups(live):
    assert sorted(os.listdir(live.p("g1"))) == ["attrs_only", "empty_group", "g2", "partial_dims"]
    assert os.listdir(live.p("g1/empty_group")) == []
    assert os.listdir(live.p("g1/g2")) == ["g3"]
    assert os.listdir(live.p("g1/g2/g3")) == ["leaf"]
    attrs = v3.getxattr_json(live.p("g1/g2"), "user.zarr.attributes")
    assert attrs["uni"] == "漢字 ß é"
    leaf = live.p("g1/g2/g3/leaf")
    assert v3.getxattr_json(leaf, "user.zarr.dimension_names") == ["t", "y", "x"]
    assert v3.getxattr_json(leaf, "user.zarr.attributes") == {"units": "K", "scale": [1.0, 0.5]}
    assert v3.getxattr_json(live.p("g1/partial_dims"), "user.zarr.dimension_names") == [None, "x"]


def test_metadata_documents_are_not_files(live):
    for rel in ("zarr.json", "g1/zarr.json", "codecs/c", "keys/default_slash/zarr.json"):
        with pytest.raises((FileNotFoundError, NotADirectoryError)):
            os.stat(live.p(rel))


def test_zero_d_and_zero_length(live):
    assert os.stat(live.p("zerod/value")).st_size == 8
    assert read_file(live.p("zerod/value")) == struct.pack("<d", 2.75)
    assert read_file(live.p("zerod/missing")) == struct.pack("<i", -9)
    assert read_file(live.p("zerod/big")) == struct.pack(">d", -1.5)
    assert v3.getxattr_json(live.p("zerod/value"), "user.zarr.shape") == []
    for rel in ("zerolen/rows", "zerolen/middle"):
        assert os.stat(live.p(rel)).st_size == 0
        with open(live.p(rel), "rb") as f:
            assert f.read() == b""
            assert os.pread(f.fileno(), 10, 0) == b""


def _bits(hex_text: str, itemsize: int, order: str) -> bytes:
    return int(hex_text, 16).to_bytes(itemsize, "big" if order == ">" else "little")


@pytest.mark.parametrize(
    "path,itemsize,order,pattern",
    [
        ("fill/float32_hex_nan_payload", 4, "<", "0x7fc00001"),
        ("fill/float32_hex_neg_nan", 4, "<", "0xffc00000"),
        ("fill/float64_hex_nan_payload", 8, "<", "0x7ff8000000000123"),
        ("fill/float16_hex_nan", 2, "<", "0x7e01"),
        ("fill/float32_nan", 4, "<", "0x7fc00000"),
        ("fill/float32_neg_zero", 4, "<", "0x80000000"),
        ("fill/float32_hex_be", 4, ">", "0x7fc00001"),
        ("fill/float16_be", 2, ">", "0x3c01"),
        ("fill/complex64_hex_payloads", 8, "<", "0xffc000027fc00001"),  # imag, real (LE pair)
        ("fill/datetime64_nat", 8, "<", "0x8000000000000000"),
        ("fill/timedelta64_nat", 8, "<", "0x8000000000000000"),
    ],
)
def test_fill_value_bit_patterns(live, path, itemsize, order, pattern):
    """Missing chunk 0 (elements 0-2) reads as exactly the fill value's bits (NaN payload,
    sign of zero), in the file's byte order; independent of zarr-python."""
    with open(live.p(path), "rb") as f:
        got = os.pread(f.fileno(), 3 * itemsize, 0)
    assert got == _bits(pattern, itemsize, order) * 3, got.hex()


def test_complex_fill_values(live):
    def first(path, dtype):
        with open(live.p(path), "rb") as f:
            return np.frombuffer(os.pread(f.fileno(), np.dtype(dtype).itemsize, 0), dtype)[0]

    v = first("fill/complex64_pair", "<c8")
    assert v == np.complex64(1.5 - 2j)
    v = first("fill/complex128_nan_inf", "<c16")
    assert np.isnan(v.real) and v.imag == np.inf
    raw = read_file(live.p("fill/complex64_hex_neginf"))[:8]
    assert raw == bytes.fromhex("0000c07f") + struct.pack("<f", -np.inf)
    raw = read_file(live.p("fill/complex128_neg_zero_hex"))[:16]
    assert raw == struct.pack("<d", 0.0) + bytes.fromhex("0000000000000080")
    raw = read_file(live.p("fill/complex128_be"))[:16]
    assert raw == struct.pack(">d", 1.0) + struct.pack(">d", -np.inf)


def test_raw_types_fill_bytes(live):
    """``r*`` fill values are lists of bytes, stored as they are."""
    raw = read_file(live.p("raw/r24"))
    # chunk (0, 1) holds elements (0..2, 2..3); it is missing ((0 + 1) % 3 == 1)
    assert raw[2 * 3 : 3 * 3] == bytes([255, 0, 9])
    label = os.getxattr(live.p("raw/r16"), "user.zarr.dtype").decode()
    assert np.dtype(label) == np.dtype("V2"), label


def test_conventions(live, v3_main):
    g = live.p("conv/valid_group")
    got = v3.getxattr_json(g, "user.zarr.conventions")
    want = v3_main.group_conventions["conv/valid_group"]
    assert sorted(got, key=lambda c: c["uuid"]) == sorted(want, key=lambda c: c["uuid"])
    a = live.p("conv/valid_group/valid_array")
    assert v3.getxattr_json(a, "user.zarr.conventions") == [
        {"uuid": v3.UUID_C, "name": "multiscales", "version": "0.2.0"}
    ]
    # the full attributes stay available as they are
    assert v3.getxattr_json(g, "user.zarr.attributes") == v3_main.groups["conv/valid_group"]
    # no conventions: no attribute
    assert not v3.has_xattr(live.p("conv/plain"), "user.zarr.conventions")
    assert not v3.has_xattr(live.p("g1"), "user.zarr.conventions")


def test_malformed_conventions_warn_but_show(live, v3_main):
    listed = set(os.listdir(live.p("conv")))
    for path in v3_main.malformed_conventions:
        name = path.rsplit("/", 1)[1]
        assert name in listed, (name, listed)
        full = live.p(path)
        if path in v3_main.arrays:
            case = v3_main.arrays[path]
            assert_bytes_equal(read_file(full), case.expected, case.dtype)
            os.getxattr(full, "user.zarr.dtype")
        else:
            assert stat.S_ISDIR(os.stat(full).st_mode)
            assert v3.getxattr_json(full, "user.zarr.attributes") == v3_main.groups[path]
        line = None
        for text in live.read_log().splitlines():
            if path in text and "convention" in text.lower():
                line = text
                break
        if line is None:
            line = live.wait_for_log(path, timeout=3)
        assert line is not None and "convention" in line.lower(), (
            f"no warning naming {path!r}; log:\n{live.read_log()[-3000:]}"
        )
        assert "WARNING" in line.upper(), line


def test_stats_counters(live):
    stats = live.stats()
    for key in ("store_gets", "store_get_bytes", "cache_hits"):
        assert isinstance(stats[key], int) and stats[key] >= 0, stats


def test_inspect_json_describes_every_array(v3_main):
    res = run_cli(["--inspect", str(v3_main.root), "--json"])
    assert res.returncode == 0, res.stderr
    nodes = {n["path"]: n for n in json.loads(res.stdout)["nodes"]}
    problems = []
    for path, case in v3_main.arrays.items():
        n = nodes.get(path)
        if n is None:
            problems.append(f"{path}: not listed")
            continue
        if n.get("type") != "array" or n.get("shown") is not True or "reason" in n:
            problems.append(f"{path}: {n.get('type')!r} shown={n.get('shown')!r}")
        if n.get("shape") != list(case.shape):
            problems.append(f"{path}: shape {n.get('shape')}")
        if n.get("chunks") != list(case.chunks):
            problems.append(f"{path}: chunks {n.get('chunks')} != {list(case.chunks)}")
        if (n.get("shards") or None) != (list(case.shards) if case.shards else None):
            problems.append(f"{path}: shards {n.get('shards')} != {case.shards}")
        why = (
            v3.dtype_label_matches(n.get("dtype", ""), case.dtype)
            if isinstance(n.get("dtype"), str)
            else f"dtype {n.get('dtype')!r}"
        )
        if why:
            problems.append(f"{path}: {why}")
        if str(n.get("format")) != "3":
            problems.append(f"{path}: format {n.get('format')!r}")
        codecs = n.get("codecs")
        if not isinstance(codecs, dict) or v3.normalize_codecs(
            codecs.get("codecs", [])
        ) != v3.normalize_codecs(case.doc["codecs"]):
            problems.append(f"{path}: codecs {codecs!r}")
    for path in v3_main.groups:
        n = nodes.get(path)
        if n is None or n.get("type") != "group" or n.get("shown") is not True:
            problems.append(f"group {path!r}: {n!r}")
    hidden = [p for p, n in nodes.items() if n.get("shown") is not True]
    assert not hidden, f"nodes hidden in a valid hierarchy: {hidden}"
    assert not problems, "\n".join(problems[:40])


def test_read_only(live):
    with pytest.raises(OSError) as e:
        open(live.p("codecs/gzip_1"), "r+b").close()
    assert e.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def test_root_array_store(tmp_path):
    """A v3 store whose root node is an array: the mount root holds one file ``array``."""
    case = v3.build_root_array(tmp_path / "root.zarr")
    with mounted(tmp_path / "root.zarr", tag="v3rootarr") as m:
        assert os.listdir(m.path) == ["array"]
        f = m.p("array")
        assert os.stat(f).st_size == case.nbytes
        assert_bytes_equal(read_file(f), case.expected, case.dtype)
        problems = v3.v3_xattr_problems(f, case)
        assert not problems, problems


def test_concurrent_uncached_reads_of_shards(live, v3_main):
    """Threads reading random ranges of sharded arrays at once (O_DIRECT) all get the
    oracle's bytes: shard indexes and inner chunks shared between requests stay right."""
    import concurrent.futures

    paths = [p for p, a in v3_main.arrays.items() if "shard" in a.tags]

    def worker(seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        errors = []
        for _ in range(30):
            path = paths[int(rng.integers(len(paths)))]
            case = v3_main.arrays[path]
            n = case.nbytes
            if n == 0:
                continue
            off = int(rng.integers(0, n))
            size = int(rng.integers(1, n - off + 1))
            fd = os.open(live.p(path), os.O_RDONLY | os.O_DIRECT)
            try:
                got = os.pread(fd, size, off)
            finally:
                os.close(fd)
            if got != case.expected[off : off + size]:
                errors.append(f"{path} [{off}:{off + size}]")
        return errors

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        errors = [e for found in pool.map(worker, range(8)) for e in found]
    assert not errors, errors[:10]


def test_consolidated_metadata_is_used_for_listing(tmp_path):
    """Listing comes from the root's consolidated metadata, as zarr-python lists it: an
    array added on disk after consolidation is not shown."""
    members = v3.build_consolidated(tmp_path / "c.zarr")
    assert "late" not in members and (tmp_path / "c.zarr" / "late" / "zarr.json").is_file()
    with mounted(tmp_path / "c.zarr", tag="v3cons") as m:
        kinds = {"group": "dir", "array": "file"}
        assert common.listed_kinds(m.path) == {p: kinds[kind] for p, (kind, _) in members.items()}
        for path, (kind, value) in members.items():
            full = m.p(path)
            if kind == "array":
                assert stat.S_ISREG(os.stat(full).st_mode)
                assert read_file(full) == value, path
            else:
                assert v3.getxattr_json(full, "user.zarr.attributes") == value, path
        assert os.getxattr(m.p("b"), "user.zarr.dtype").decode() == ">i2"


def test_huge_sparse_arrays(tmp_path):
    """A 1 TB array with no chunks written (plain and sharded) has the right size and reads
    as its fill value anywhere, near the end included, without reading much."""
    import warnings

    import zarr

    root = tmp_path / "huge.zarr"
    shape = (1_000_000, 1_000_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(
            str(root),
            name="plain",
            shape=shape,
            chunks=(1000, 1000),
            dtype="|u1",
            fill_value=7,
            zarr_format=3,
        )
        s = zarr.create_array(
            str(root),
            name="sharded",
            shape=shape,
            chunks=(1000, 1000),
            shards=(100_000, 100_000),
            dtype="<u2",
            fill_value=513,
            zarr_format=3,
        )
        s[999_999, 999_998:] = [1, 2]  # the very last shard holds two elements
    with mounted(root, tag="v3huge") as m:
        plain, sharded = m.p("plain"), m.p("sharded")
        assert os.stat(plain).st_size == 10**12
        assert os.stat(sharded).st_size == 2 * 10**12
        fd = os.open(plain, os.O_RDONLY | os.O_DIRECT)
        try:
            for off in (0, 5 * 10**11 + 3, 10**12 - 5000):
                assert os.pread(fd, 5000, off) == b"\x07" * 5000
        finally:
            os.close(fd)
        fd = os.open(sharded, os.O_RDONLY | os.O_DIRECT)
        try:
            assert os.pread(fd, 6000, 10**12 + 1) == (np.full(3001, 513, "<u2").tobytes())[1:6001]
            tail = os.pread(fd, 8, 2 * 10**12 - 8)
            assert tail == np.array([513, 513, 1, 2], "<u2").tobytes()
        finally:
            os.close(fd)
        assert m.stats()["store_get_bytes"] < 1 << 20
        m.assert_alive()
