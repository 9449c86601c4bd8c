"""Through the kernel: arrays of strings as ``NAME.txt``, one element per line (the default
``sidecars=envi+text``). Every expected element comes from zarr-python (or anndata)
reading the same store; the lines are unescaped here by the rules the README states."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import anndata
import numcodecs
import numpy as np
import pandas as pd
import pytest
import zarr
from helpers.mounting import mounted, process_memory, wait_until, zarrmount_exe
from helpers.text_lines import escape, unescape
from zarr.core.dtype import VariableLengthBytes

pytestmark = pytest.mark.mount

# Elements a line-based reader would get wrong if they were written as they are.
AWKWARD = ["plain", "two\nlines", "cr\rhere", "back\\slash", "", "é ü 漢字 🙂", "\\n as text", "x"]
RAW_BYTES = [b"ok", b"\xff\xfe", b"tab\tbyte", b"\n", b"", b"\\", b"caf\xc3\xa9", b"\x80end"]


def elements_of(path: str) -> list[bytes]:
    """The elements a text file holds: a line each (the file ends with a newline)."""
    data = Path(path).read_bytes()
    assert os.stat(path).st_size == len(data)
    assert data == b"" or data.endswith(b"\n")
    return [unescape(line) for line in data.split(b"\n")[:-1]]


def as_bytes(values) -> list[bytes]:
    return [v if isinstance(v, bytes) else str(v).encode() for v in np.asarray(values).ravel()]


def oracle(root: str, path: str) -> list[bytes]:
    return as_bytes(zarr.open_array(root, path=path, mode="r")[...])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Arrays of strings of each kind, in a v2 and a v3 store."""
    base = tmp_path_factory.mktemp("text")
    roots = {}
    for fmt in (2, 3):
        root = roots[fmt] = str(base / f"v{fmt}.zarr")
        group = zarr.open_group(root, mode="w", zarr_format=fmt)
        group.create_array("words", shape=(8,), chunks=(3,), dtype=str)[:] = AWKWARD
        grid = np.array([f"r{i}c{j}" for i in range(5) for j in range(7)]).reshape(5, 7)
        group.create_array("grid", shape=(5, 7), chunks=(2, 3), dtype=str)[...] = grid
        raw = group.create_array("raw", shape=(8,), chunks=(5,), dtype=VariableLengthBytes())
        raw[:] = np.array(RAW_BYTES, dtype=object)
        sparse = group.create_array("sparse", shape=(9,), chunks=(2,), dtype=str)
        sparse[4:6] = ["only", "these"]  # the rest is never written: fill value
        group.create_array("fixed_u", shape=(4,), dtype="<U5")[:] = ["a", "bé", "", "five5"]
        group.create_array("fixed_s", shape=(3,), dtype="|S3")[:] = [b"ab", b"\xff", b""]
        group.create_array("empty", shape=(0,), chunks=(4,), dtype=str)
        group.create_array("nums", shape=(6,), dtype="<i4")[:] = np.arange(6)
    # a real array named like the text of "label" stays the real node
    v3 = zarr.open_group(roots[3], mode="a")
    v3.create_array("label", shape=(1,), dtype=str)[:] = ["text"]
    v3.create_array("label.txt", shape=(2,), dtype="u1")[:] = [7, 9]
    # strings in shards: inner chunks of 1x2 in shards of 2x4, some absent (fill)
    cells = np.array([f"s{i}\n{j}" for i in range(5) for j in range(7)]).reshape(5, 7)
    sharded = v3.create_array("sharded", shape=(5, 7), chunks=(1, 2), shards=(2, 4), dtype=str)
    sharded[...] = cells
    partly = v3.create_array("partly", shape=(9,), chunks=(2,), shards=(4,), dtype=str)
    partly[5:7] = ["five", "six"]
    return roots


@pytest.fixture(scope="module")
def mounts(store):
    defaults = {"sidecars": None}  # the daemon's own: envi+text
    with (
        mounted(store[2], tag="text-v2", **defaults) as m2,
        mounted(store[3], tag="text-v3", **defaults) as m3,
    ):
        yield {2: m2, 3: m3}


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", ["words", "grid", "raw", "sparse", "fixed_u", "fixed_s", "empty"])
def test_each_line_unescaped_is_zarr_pythons_element(store, mounts, fmt, name):
    assert elements_of(mounts[fmt].p(name + ".txt")) == oracle(store[fmt], name)


@pytest.mark.parametrize("name", ["sharded", "partly"])
def test_strings_in_shards_are_zarr_pythons_elements(store, mounts, name):
    assert elements_of(mounts[3].p(name + ".txt")) == oracle(store[3], name)


def test_a_damaged_shard_of_strings_hides_that_text_alone(store, tmp_path, mount_factory):
    root = tmp_path / "shards.zarr"
    shutil.copytree(store[3], root)
    shard = root / "sharded" / "c" / "1" / "0"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # the index's checksum
    shard.write_bytes(bytes(data))
    mount = mount_factory(root, ["sidecars=text"], tag="text-shard")
    listed = set(os.listdir(mount.p()))
    assert "sharded.txt" not in listed and "partly.txt" in listed
    assert "sharded/c/1/0" in mount.read_log()


def test_an_element_holding_a_newline_stays_one_line(mounts):
    lines = Path(mounts[2].p("words.txt")).read_bytes().split(b"\n")[:-1]
    assert len(lines) == len(AWKWARD)
    assert lines[1] == rb"two\nlines" and lines[2] == rb"cr\rhere"


def test_variable_length_arrays_have_only_their_text_and_fixed_ones_both(mounts):
    listed = set(os.listdir(mounts[2].p()))
    assert {"words.txt", "grid.txt", "raw.txt", "fixed_u", "fixed_u.txt", "nums"} <= listed
    assert not {"words", "grid", "raw", "nums.txt"} & listed


def test_a_real_node_named_like_a_text_file_stays_the_real_node(store, mounts):
    data = np.fromfile(mounts[3].p("label.txt"), dtype="u1")
    assert np.array_equal(data, zarr.open_array(store[3], path="label.txt")[...])
    assert "no text sidecar" in mounts[3].read_log()


def test_text_files_are_read_only_and_reads_at_any_offset_agree(mounts):
    path = mounts[3].p("grid.txt")
    whole = Path(path).read_bytes()
    with open(path, "rb", buffering=0) as f:
        for offset in range(0, len(whole), 7):
            assert os.pread(f.fileno(), 11, offset) == whole[offset : offset + 11]
    with pytest.raises(OSError), open(path, "r+b") as f:
        f.write(b"x")
        f.flush()
    assert Path(path).read_bytes() == whole


def test_text_past_text_max_is_not_shown_and_the_log_says_why(store, mount_factory):
    mount = mount_factory(store[2], ["text_max=40", "sidecars=text"], tag="text-max")
    listed = set(os.listdir(mount.p()))
    assert "words.txt" not in listed and "grid.txt" not in listed  # 70 and 175 bytes
    assert "fixed_u.txt" in listed  # 13 bytes
    assert "longer than text_max" in mount.read_log()


def test_without_text_string_arrays_are_hidden_and_the_log_says_so(store, mount_factory):
    mount = mount_factory(store[2], ["sidecars=none"], tag="text-none")
    listed = set(os.listdir(mount.p()))
    assert not any(name.endswith(".txt") for name in listed)
    assert "nums" in listed and "words" not in listed
    assert "strings" in mount.read_log()


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    """anndata's own files: obs names with awkward ones, and a categorical column."""
    base = tmp_path_factory.mktemp("anndata")
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(["T", "B", "T\nsub", "NK", "B"])},
        index=["c1", "c\\2", "c3\r", "cé4", "c5"],
    )
    var = pd.DataFrame(index=[f"gene{i}" for i in range(4)])
    adata = anndata.AnnData(X=np.ones((5, 4), dtype="f4"), obs=obs, var=var)
    roots = {}
    for fmt in (2, 3):
        roots[fmt] = str(base / f"v{fmt}.zarr")
        with anndata.settings.override(zarr_write_format=fmt):
            adata.write_zarr(roots[fmt])
    return roots, adata


def _strings(root: str, path: str) -> str:
    """Where anndata keeps the strings of a dataframe index: the array itself, or the
    ``values`` of a nullable-string-array group (anndata 0.13 with pandas 3's strings)."""
    found = zarr.open(root, mode="r", path=path)
    return f"{path}/values" if isinstance(found, zarr.Group) else path


@pytest.mark.parametrize("fmt", [2, 3])
def test_anndata_obs_names_and_categories_read_as_lines(annotated, mount_factory, fmt):
    roots, adata = annotated
    mount = mount_factory(roots[fmt], tag=f"text-anndata-v{fmt}", sidecars=None)
    paths = [_strings(roots[fmt], p) for p in ("obs/_index", "var/_index")]
    for path in (*paths, "obs/cell_type/categories"):
        assert elements_of(mount.p(path + ".txt")) == oracle(roots[fmt], path), path
    names = elements_of(mount.p(paths[0] + ".txt"))
    assert names == as_bytes(adata.obs_names)
    categories = elements_of(mount.p("obs/cell_type/categories.txt"))
    codes = np.fromfile(mount.p("obs/cell_type/codes"), dtype="i1")
    assert [categories[c] for c in codes] == as_bytes(adata.obs["cell_type"])


def test_a_root_array_of_strings_is_the_text_file_array_txt(tmp_path, mount_factory):
    root = str(tmp_path / "root.zarr")
    zarr.create_array(root, shape=(3,), chunks=(2,), dtype=str)[:] = ["x", "y\n", "z"]
    mount = mount_factory(root, ["sidecars=text"], tag="text-root")
    assert os.listdir(mount.p()) == ["array.txt"]
    assert elements_of(mount.p("array.txt")) == oracle(root, "")


def test_inspect_says_which_arrays_are_text(store):
    out = subprocess.run(
        [zarrmount_exe(), "--inspect", store[2]], capture_output=True, text=True, check=True
    ).stdout
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert "strings, no raw file" in lines["words"] and "sidecars: text" in lines["words"]
    assert "file MNT/fixed_u" in lines["fixed_u"] and "text" in lines["fixed_u"]
    assert "text" not in lines["nums"]


def test_hostile_string_chunks_hide_their_text_alone_within_a_memory_limit(store, tmp_path):
    """A chunk claiming 2**31 elements, one inflating to 256 MiB and one cut short: each
    array's text is not shown, the log names the key, every other file reads right."""
    root = tmp_path / "hostile.zarr"
    shutil.copytree(store[2], root)
    damage = {
        "words/0": zstd_chunk((2**31).to_bytes(4, "little") + b"\0" * 64),
        "grid/1.0": zstd_chunk(b"\0" * (256 << 20)),
        "raw/1": b"\x28\xb5\x2f\xfd",  # a zstd frame header, then nothing
    }
    for key, data in damage.items():
        (root / key).write_bytes(data)
    limit = ["prlimit", f"--as={3 << 30}", "--"]
    with mounted(root, ["sidecars=text"], tag="text-hostile", wrapper=limit) as mount:
        listed = set(os.listdir(mount.p()))
        assert not {"words.txt", "grid.txt", "raw.txt"} & listed
        log = mount.read_log()
        for key in damage:
            assert f"chunk {key}:" in log, key
        assert elements_of(mount.p("sparse.txt")) == oracle(str(root), "sparse")
        mount.assert_alive()


def zstd_chunk(data: bytes) -> bytes:
    """``data`` coded as zarr-python coded the chunks of the v2 store (zstd)."""
    return numcodecs.Zstd(level=1).encode(data)


def test_more_elements_than_text_max_are_refused_before_anything_is_read(tmp_path, mount_factory):
    root = str(tmp_path / "huge.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    group.create_array("fixed", shape=(10**9,), chunks=(10**6,), dtype="|S1")[:3] = b"abc"
    group.create_array("names", shape=(10**9,), chunks=(10**6,), dtype=str)[:3] = ["a", "b", "c"]
    mount = mount_factory(root, ["sidecars=text"], tag="text-huge")
    assert set(os.listdir(mount.p())) == {"fixed"}
    assert mount.read_log().count("elements are more than text_max") == 2
    assert mount.stats()["store_get_bytes"] == 0


# Text arrays whose slabs, rendered whole when listed, added some 330 MiB to the daemon's
# peak (``names``: 4 x 250,000 variable-length strings, one row of 25 chunks, so a slab is
# the whole array) and 100 MiB (``labels``: 100,000 fixed-size strings of 128 code points
# in 1 MiB chunks, slabs of 65,536 of them); counted a chunk or 1 MiB of elements at a
# time, 6 and 15 MiB (the latter read through the array's file: its cache and read-ahead).
# Reading each whole then added 323 and 8 MiB more (a read rendered a slab: a row of
# chunks, or 1 MiB of fixed-size elements); rendering 1,024 lines at a time, 7 to 10 and
# 4 to 7 MiB.
LARGE = {"names": ((4, 250_000), (4, 10_000), str), "labels": ((100_000,), (2_000,), "<U128")}
LISTING_MIB = 24  # the most listing one may add to the daemon's peak (with an 8 MiB cache)
READING_MIB = 40  # the most reading its text whole may add to the peak after listing
PIECE = 128 << 10  # what cat asks for at a time


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("large") / "large.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=2)
    for name, (shape, chunks, dtype) in LARGE.items():
        count = int(np.prod(shape))
        values = [f"{name} {i} {AWKWARD[i % len(AWKWARD)]}" for i in range(count)]
        array = group.create_group(name).create_array(name, shape=shape, chunks=chunks, dtype=dtype)
        array[...] = np.array(values, dtype=object if dtype is str else dtype).reshape(shape)
    return root


def read_in_pieces(path: str) -> bytes:
    """The file read from start to end, ``PIECE`` bytes a read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return b"".join(iter(lambda: os.read(fd, PIECE), b""))
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", sorted(LARGE))
def test_listing_and_reading_a_large_text_array_hold_a_chunk_not_the_array(large, name):
    path = f"{name}/{name}"
    values = zarr.open_array(large, path=path, mode="r")[...].ravel()
    expected = b"".join(map(escape, values))  # its text by the README's rules
    with mounted(large, ["cache_size=8M"], sidecars="text", tag=f"text-{name}") as mount:
        os.listdir(mount.p())  # the root: the groups alone
        before = process_memory(mount.proc.pid)
        assert f"{name}.txt" in os.listdir(mount.p(name))
        listed = process_memory(mount.proc.pid)
        assert listed - before < LISTING_MIB << 20, f"listing added {(listed - before) >> 20} MiB"
        whole = read_in_pieces(mount.p(path + ".txt"))
        added = process_memory(mount.proc.pid) - listed
        assert added < READING_MIB << 20, f"reading added {added >> 20} MiB to the peak"
        assert [unescape(line) for line in whole.split(b"\n")[:-1]] == as_bytes(values)
        assert whole == expected
        assert_random_reads_agree(mount.p(path + ".txt"), expected)


def assert_random_reads_agree(path: str, expected: bytes) -> None:
    """Reads at random offsets, of random sizes, each asked of the daemon (``O_DIRECT``:
    none served from the pages an earlier read left), are the bytes of ``expected``."""
    random = np.random.default_rng(32)
    offsets = random.integers(0, len(expected) + 10, 300)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        for offset, size in zip(offsets, random.integers(1, 300_000, 300), strict=True):
            got = os.pread(fd, int(size), int(offset))
            assert got == expected[offset : offset + size], (offset, size)
    finally:
        os.close(fd)


def test_a_reload_that_changes_an_array_measures_its_text_again(tmp_path):
    root = str(tmp_path / "changes.zarr")
    zarr.open_group(root, mode="w").create_array("words", shape=(3,), dtype=str)[:] = AWKWARD[:3]
    with mounted(root, sidecars="text", tag="text-reload") as mount:
        path = mount.p("words.txt")
        assert elements_of(path) == oracle(root, "words")
        words = zarr.open_group(root, mode="a").create_array(
            "words", shape=(8,), chunks=(5,), dtype=str, overwrite=True
        )
        words[:] = AWKWARD[::-1]
        mount.proc.send_signal(signal.SIGHUP)

        def shown() -> list[bytes] | None:
            try:
                return elements_of(path)
            except (OSError, AssertionError):  # caught between two versions of the file
                return None

        assert wait_until(lambda: shown() == oracle(root, "words"), 30.0, 0.1), mount.read_log()
        mount.assert_alive()
