"""Metadata written to hurt: the node is hidden with a logged reason that --inspect repeats,
the mount stays up and a healthy sibling still reads what zarr-python reads."""

from __future__ import annotations

import json
import os
import shutil
import stat

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted, process_memory, run_cli
from helpers.oracle import read_file

pytestmark = pytest.mark.mount

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture
def deep_store(tmp_path):
    root = tmp_path / "deep.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=2)
    healthy = group.create_array("healthy", shape=(50,), dtype="<i4", compressors=None)
    healthy[:] = np.arange(50)
    group.create_group("nested")
    group.create_array("arr", shape=(4,), dtype="u1")
    (root / "nested" / ".zattrs").write_bytes(b'{"x": ' + DEEP + b"}")
    (root / "arr" / ".zattrs").write_bytes(DEEP)
    return root


def test_attributes_nested_100000_deep_hide_only_their_node(deep_store):
    expected = zarr.open_array(deep_store / "healthy", mode="r")[:].tobytes()
    with mounted(deep_store, tag="deep") as m:
        assert set(os.listdir(m.path)) == {"healthy"}
        assert read_file(m.p("healthy")) == expected
        assert m.wait_for_log("nests deeper"), m.read_log()[-2000:]
        m.assert_alive()
    shown = run_cli(["--inspect", deep_store])
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    assert shown.stdout.count("nests deeper") == 2, shown.stdout


def test_root_attributes_nested_100000_deep_fail_with_one_line(deep_store, tmp_path):
    (deep_store / ".zattrs").write_bytes(DEEP)
    for args in (["--inspect", deep_store], [deep_store, tmp_path]):
        done = run_cli(args)
        assert done.returncode != 0
        assert done.stderr.count("\n") == 1 and "nests deeper" in done.stderr, done.stderr


# -- a corpus of .zarray documents written to hurt ----------------------------------------


def _set(**changes):
    return lambda doc: json.dumps({**doc, **changes}).encode()


ZARRAYS = {
    "invalid-json": lambda doc: b'{"zarr_format": 2, "shape": [4',
    "not-an-object": lambda doc: b"[1, 2, 3]",
    "negative-shape": _set(shape=[-4]),
    "fractional-shape": _set(shape=[4.5]),
    "shape-of-strings": _set(shape=["4"]),
    "elements-overflow-int64": _set(shape=[1 << 40, 1 << 40], chunks=[1, 1]),
    "bytes-overflow-int64": _set(shape=[1 << 62], chunks=[1 << 20], dtype="<f8"),
    "zero-chunks": _set(chunks=[0]),
    "negative-chunks": _set(chunks=[-1]),
    "chunks-of-other-rank": _set(chunks=[1, 1]),
    "unknown-dtype": _set(dtype="<x9"),
    "unknown-compressor": _set(compressor={"id": "no-such-codec"}),
    "compressor-not-an-object": _set(compressor=[1]),
    "filter-not-an-object": _set(filters=[None]),  # found by fuzzing
    "unknown-order": _set(order="Z"),
    "unknown-separator": _set(dimension_separator="x"),
    "unknown-format": _set(zarr_format=7),
    "fill-of-wrong-type": _set(fill_value="forty-two"),
    "over-64-MiB": lambda doc: json.dumps({**doc, "pad": "x" * (70 << 20)}).encode(),
}
# Valid, only large: served, within the memory budget.
LARGE = {"large-document": lambda doc: json.dumps({**doc, "pad": "x" * (50 << 20)}).encode()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus") / "c.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=2)
    for name in ("healthy", *ZARRAYS, *LARGE):
        a = group.create_array(name, shape=(4,), chunks=(2,), dtype="<u2", compressors=None)
        a[:] = np.arange(4)
    for name, mutate in {**ZARRAYS, **LARGE}.items():
        path = root / name / ".zarray"
        path.write_bytes(mutate(json.loads(path.read_text())))
    (root / "large-attributes").mkdir()
    (root / "large-attributes" / ".zgroup").write_text('{"zarr_format": 2}')
    (root / "large-attributes" / ".zattrs").write_text(json.dumps({"pad": "y" * (50 << 20)}))
    return root


def test_hostile_zarray_corpus_hides_each_node_with_a_reason(corpus):
    expected = zarr.open_array(corpus / "healthy", mode="r")[:].tobytes()
    shown = run_cli(["--inspect", corpus, "--json"])
    assert shown.returncode == 0, shown.stderr
    nodes = {n["path"]: n for n in json.loads(shown.stdout)["nodes"]}
    for name in ZARRAYS:
        assert not nodes[name]["shown"] and nodes[name]["reason"], nodes[name]
    assert nodes["large-document"]["shown"] and nodes["large-attributes"]["shown"]
    with mounted(corpus, tag="corpus", wrapper=["prlimit", f"--as={4 << 30}", "--"]) as m:
        with rw_tools.RssSampler(m.proc.pid) as rss:
            assert set(os.listdir(m.path)) == {"healthy", "large-document", "large-attributes"}
            for name in ("healthy", "large-document"):
                assert read_file(m.p(name)) == expected
            for name in ZARRAYS:
                assert m.wait_for_log(f"{name!r}"), (name, m.read_log()[-3000:])
        m.assert_alive()
    assert rss.peak_kib << 10 <= (512 << 20) + (150 << 20)  # the default cache + 150 MiB


def test_a_chain_of_1000_nested_groups_mounts_and_reads(tmp_path):
    root = tmp_path / "n.zarr"
    zarr.open_group(root, mode="w", zarr_format=2)
    path = root
    for _ in range(1000):  # by hand: zarr-python walks every parent of each new node
        path = path / "g"
        path.mkdir()
        (path / ".zgroup").write_text('{"zarr_format": 2}')
    deep = zarr.open_group(path, mode="a", zarr_format=2)
    deep.create_array("a", shape=(3,), dtype="u1", fill_value=5)
    expected = zarr.open_array(path / "a", mode="r")[:].tobytes()
    try:
        shown = run_cli(["--inspect", root])
        assert shown.returncode == 0 and shown.stdout.count("\n") == 1002, shown.stderr
        with mounted(root, tag="nested") as m:
            assert read_file(os.path.join(m.path, *["g"] * 1000, "a")) == expected
            m.assert_alive()
    finally:  # Python's rmtree recurses a level a call: pytest's could not remove it
        shutil.rmtree(root.joinpath(*["g"] * 500))


# -- a group of 100,000 sibling arrays -----------------------------------------------------

WIDE = 100_000
WIDE_CACHE = 256 << 20


def test_a_group_of_100000_arrays_lists_within_the_memory_budget():
    # A tmpfs: 100,000 directories are made in seconds and gone at once with it.
    with rw_tools.tmpfs("1G", tag="wide") as fs_dir:
        root = os.path.join(fs_dir, "w.zarr")
        group = zarr.open_group(root, mode="w", zarr_format=2)
        group.create_array("a000000", shape=(4,), dtype="<i4", fill_value=7)[:] = [1, 2, 3, 4]
        zarray = read_file(os.path.join(root, "a000000", ".zarray"))
        # By hand: zarr-python takes minutes for 100,000 arrays.
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i in range(1, WIDE):
                os.mkdir(f"a{i:06d}", dir_fd=fd)
                out = os.open(f"a{i:06d}/.zarray", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(out, zarray)
                os.close(out)
        finally:
            os.close(fd)
        zarr.open_array(os.path.join(root, "a054321"), mode="r+")[:] = [-5, 6, -7, 8]
        expected = {  # zarr-python opens the documents written by hand
            name: zarr.open_array(os.path.join(root, name), mode="r")[:].tobytes()
            for name in ("a000000", "a054321", "a099999")
        }
        assert expected["a099999"] == np.full(4, 7, "<i4").tobytes()
        limit = ["prlimit", f"--as={4 << 30}", "--"]
        with mounted(root, [f"cache_size={WIDE_CACHE >> 20}M"], tag="wide", wrapper=limit) as m:
            shown = {}
            with os.scandir(m.path) as entries:  # ls -l
                for entry in entries:
                    st = entry.stat(follow_symlinks=False)
                    shown[entry.name] = (stat.S_IFMT(st.st_mode), st.st_size)
            assert len(shown) == WIDE
            assert set(shown.values()) == {(stat.S_IFREG, 16)}
            for name, data in expected.items():
                assert read_file(m.p(name)) == data
            assert json.loads(os.getxattr(m.p("a099999"), "user.zarr.shape")) == [4]
            m.assert_alive()
            assert m.stats()["inodes"] == WIDE + 1  # still answering
            peak = process_memory(m.proc.pid)
    assert peak < WIDE_CACHE + (150 << 20), f"peak RSS {peak >> 20} MiB"
