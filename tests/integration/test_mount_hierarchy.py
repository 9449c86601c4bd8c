"""The big Zarr v2 hierarchy, mounted once: listing, sizes, bytes and xattrs of every array.

Oracle: zarr-python reading the same store (hand-written cases: NumPy on the source data).
"""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest
from helpers import zarrdata
from helpers.common import assert_listing_matches
from helpers.oracle import (
    REQUIRED_ARRAY_XATTRS,
    assert_array_xattrs,
    assert_bytes_equal,
    getxattr_text,
    read_file,
)

pytestmark = pytest.mark.mount

DRY = zarrdata.build_main(None)
# many/ (a directory of 200 tiny arrays) is checked by its own test, not one test per array
ARRAY_PATHS = sorted(p for p, a in DRY.arrays.items() if "many" not in a.tags)
GROUP_PATHS = sorted(DRY.groups)


def test_listing_matches_hierarchy(live_main, main_hierarchy):
    """Groups are directories, arrays are regular files; nothing missing, nothing extra."""
    assert_listing_matches(live_main.path, main_hierarchy)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_size_and_mode(live_main, main_hierarchy, path):
    case = main_hierarchy.arrays[path]
    st = os.stat(live_main.p(path))
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == int(np.prod(case.shape, dtype=np.int64)) * case.dtype.itemsize
    assert st.st_size == case.nbytes
    assert stat.S_IMODE(st.st_mode) == 0o444, oct(st.st_mode)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_bytes(live_main, main_hierarchy, path):
    """The whole file through the kernel (plain open/read) equals zarr-python's C-order bytes."""
    case = main_hierarchy.arrays[path]
    got = read_file(live_main.p(path))
    if case.defined_ranges is not None:
        # fill_value null and missing chunks: only the written part is defined
        assert len(got) == case.nbytes
        for start, stop in case.defined_ranges:
            assert_bytes_equal(got[start:stop], case.expected[start:stop], case.dtype)
    else:
        assert_bytes_equal(got, case.expected, case.dtype)


@pytest.mark.parametrize("path", ARRAY_PATHS)
def test_array_xattrs(live_main, main_hierarchy, path):
    assert_array_xattrs(live_main.p(path), main_hierarchy.arrays[path])


def test_array_xattrs_are_listed(live_main, main_hierarchy):
    """``listxattr`` (what ``getfattr -d`` uses) names every documented attribute."""
    problems = {}
    for path in ARRAY_PATHS:
        names = set(os.listxattr(live_main.p(path)))
        missing = REQUIRED_ARRAY_XATTRS - names
        if missing:
            problems[path] = sorted(missing)
    assert not problems, problems
    names = set(os.listxattr(live_main.path))
    assert {"user.zarrmount.stats", "user.zarrmount.pid"} <= names, names


@pytest.mark.parametrize("path", GROUP_PATHS)
def test_group_directory_and_attributes(live_main, main_hierarchy, path):
    full = live_main.p(path)
    assert stat.S_ISDIR(os.stat(full).st_mode)
    attrs = json.loads(getxattr_text(full, "user.zarr.attributes"))
    assert attrs == main_hierarchy.groups[path].zattrs


def test_group_without_zattrs_has_empty_attributes(live_main, main_hierarchy):
    assert not (main_hierarchy.root / "g1" / "bare" / ".zattrs").exists()
    assert json.loads(getxattr_text(live_main.p("g1/bare"), "user.zarr.attributes")) == {}
    assert json.loads(getxattr_text(live_main.p("g1/bare/noattrs"), "user.zarr.attributes")) == {}


def test_nested_groups_three_levels(live_main):
    assert sorted(os.listdir(live_main.p("g1"))) == ["bare", "g2", "sibling"]
    assert os.listdir(live_main.p("g1/g2")) == ["g3"]
    assert os.listdir(live_main.p("g1/g2/g3")) == ["leaf"]
    attrs = json.loads(getxattr_text(live_main.p("g1/g2/g3"), "user.zarr.attributes"))
    assert attrs["nested"]["uni"] == "漢字"


def test_root_stats_and_pid(live_main):
    stats = json.loads(getxattr_text(live_main.path, "user.zarrmount.stats"))
    assert isinstance(stats, dict)
    for key in ("store_gets", "cache_hits"):
        assert key in stats, stats
        assert isinstance(stats[key], int) and not isinstance(stats[key], bool), stats
        assert stats[key] >= 0
    for key, value in stats.items():
        # other entries (e.g. an uptime) may be any JSON number, but numbers
        assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
    pid = int(getxattr_text(live_main.path, "user.zarrmount.pid"))
    assert pid == live_main.proc.pid


def test_zero_length_and_zero_d(live_main, main_hierarchy):
    for path in ("special/zerolen", "special/zerolen_mid", "special/zerolen_1d"):
        assert os.stat(live_main.p(path)).st_size == 0
        with open(live_main.p(path), "rb") as f:
            assert f.read() == b""
            assert os.pread(f.fileno(), 10, 0) == b""
    assert os.stat(live_main.p("special/zerod")).st_size == 8
    assert read_file(live_main.p("special/zerod")) == np.array(123456789, "<i8").tobytes()
    assert read_file(live_main.p("special/zerod_missing")) == np.array(7.5, "<f4").tobytes()
    assert json.loads(getxattr_text(live_main.p("special/zerod"), "user.zarr.shape")) == []


def test_big_endian_stays_big_endian(live_main):
    got = np.frombuffer(read_file(live_main.p("special/zerod_be_f8")), dtype=">f8")
    assert got[0] == -2.5
    assert getxattr_text(live_main.p("special/zerod_be_f8"), "user.zarr.dtype") == ">f8"


def test_read_only(live_main):
    path = live_main.p("compressors/zlib")
    with pytest.raises(OSError) as e:
        open(path, "r+b").close()
    assert e.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    with pytest.raises(OSError) as e:
        open(live_main.p("new_file"), "wb").close()
    assert e.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSYS)
    with pytest.raises(OSError):
        os.mkdir(live_main.p("new_dir"))


def test_missing_entry_is_enoent(live_main):
    with pytest.raises(FileNotFoundError):
        os.stat(live_main.p("no_such_node"))
    with pytest.raises(FileNotFoundError):
        os.stat(live_main.p("g1/no_such_node"))
    # metadata documents are not part of the view
    with pytest.raises(FileNotFoundError):
        os.stat(live_main.p(".zgroup"))
    with pytest.raises(FileNotFoundError):
        os.stat(live_main.p("compressors/.zattrs"))
    with pytest.raises(NotADirectoryError):  # an array is a file, not a directory
        os.stat(live_main.p("compressors/zlib/.zarray"))


def test_mmap_read(live_main, main_hierarchy):
    import mmap

    case = main_hierarchy.arrays["multi/m3"]
    with (
        open(live_main.p("multi/m3"), "rb") as f,
        mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED) as m,
    ):
        assert m[:] == case.expected


def test_root_array_store(mount_factory, tmp_path_factory):
    """A store whose root is an array shows a single file named ``array``."""
    case = zarrdata.build_root_array(tmp_path_factory.mktemp("rootarr") / "r.zarr")
    m = mount_factory(case.root, tag="rootarr")
    assert os.listdir(m.path) == ["array"]
    f = m.p("array")
    assert stat.S_ISREG(os.stat(f).st_mode)
    assert os.stat(f).st_size == case.nbytes
    assert_bytes_equal(read_file(f), case.expected, case.dtype)
    assert_array_xattrs(f, case)


def test_large_directory_listing(live_main, main_hierarchy):
    """More entries than one readdir reply holds: every one listed once, each readable."""
    many = sorted(p.split("/", 1)[1] for p, a in main_hierarchy.arrays.items() if "many" in a.tags)
    listed = os.listdir(live_main.p("many"))
    assert len(listed) == len(set(listed)), "duplicate entries"
    assert sorted(listed) == many
    with os.scandir(live_main.p("many")) as it:
        assert sorted(e.name for e in it if e.is_file()) == many
    for name in many:
        case = main_hierarchy.arrays[f"many/{name}"]
        assert read_file(live_main.p(f"many/{name}")) == case.expected, name


def test_unknown_xattr_is_enodata(live_main):
    for path in ("multi/m1", "g1", ""):
        with pytest.raises(OSError) as e:
            os.getxattr(live_main.p(path), "user.zarr.no_such_attribute")
        assert e.value.errno == errno.ENODATA, (path, e.value)


def test_concurrent_readers(live_main, main_hierarchy):
    """Eight threads reading different arrays at once (uncached) all get the right bytes."""
    from concurrent.futures import ThreadPoolExecutor

    paths = [
        "big/many_chunks",
        "big/one_chunk",
        "multi/m2",
        "multi/m3",
        "compressors/bz2",
        "compressors/lzma",
        "filters/chain_partial",
        "order/F_f8_3d",
    ]

    def work(i: int) -> list[str]:
        rng = np.random.default_rng(i)
        errors = []
        path = paths[i % len(paths)]
        case = main_hierarchy.arrays[path]
        fd = os.open(live_main.p(path), os.O_RDONLY | os.O_DIRECT)
        try:
            for _ in range(40):
                off = int(rng.integers(0, case.nbytes))
                size = int(rng.integers(1, 300_000))
                if os.pread(fd, size, off) != case.expected[off : off + size]:
                    errors.append(f"{path} @{off}+{size}")
        finally:
            os.close(fd)
        return errors

    with ThreadPoolExecutor(8) as pool:
        errors = [e for errs in pool.map(work, range(16)) for e in errs]
    assert not errors, errors[:10]
