"""Stores written by xarray, ome-zarr-py, anndata and zarr-python (every ``numcodecs.zarr3``
codec), mounted with the real command and read through the mount.

The oracle is zarr-python reading the same store, never bytes zarrmount produced: for every
array zarr-python reads whose dtype has a raw form, the mount shows a file at the same path
holding ``np.ascontiguousarray(arr[...]).tobytes()`` (in the byte order the array is stored
in). Arrays of variable-length strings have no raw form: they are not listed, and
``zarrmount --inspect --json`` lists them as hidden with a reason. No array that
``--inspect`` calls healthy may fail to read through the mount.

The corpus (``tests/helpers/corpus.py``) is built once for the module, in a few seconds.
"""

from __future__ import annotations

import json
import os

import pytest
from helpers import corpus as corpus_mod
from helpers.mounting import mounted, run_cli
from helpers.oracle import describe_mismatch, read_file

pytestmark = pytest.mark.mount

ROOT_ARRAY_NAME = "array"  # the file a root array is shown as


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_mod.build(tmp_path_factory.mktemp("interop") / "corpus")


def _mount_path(node_path: str) -> str:
    return node_path or ROOT_ARRAY_NAME


def _inspect(store) -> dict[str, dict]:
    res = run_cli(["--inspect", store.path, "--json"], timeout=120)
    assert res.returncode == 0, f"--inspect {store.name} failed: {res.stderr}"
    nodes = json.loads(res.stdout)["nodes"]
    return {n["path"]: n for n in nodes}


def _listing(mnt: str) -> set[str]:
    """Every file path below the mountpoint (relative, ``/``-separated)."""
    found = set()
    for dirpath, _dirs, files in os.walk(mnt):
        rel = os.path.relpath(dirpath, mnt)
        for name in files:
            found.add(name if rel == "." else f"{rel}/{name}")
    return found


@pytest.mark.parametrize(
    ("writer", "name"), corpus_mod.STORES, ids=[n for _, n in corpus_mod.STORES]
)
def test_store_reads_as_zarr_python_reads_it(corpus, writer, name):
    store = corpus.stores.get(name)
    if store is None:
        pytest.skip(
            f"{writer} did not write {name}: "
            + "; ".join(s for s in corpus.skipped if s.startswith(name))
        )
    arrays = corpus_mod.oracle_arrays(store.path)
    assert arrays, f"zarr-python sees no array in {name}"
    nodes = _inspect(store)
    problems: list[tuple[str | None, str]] = []  # (array path, what is wrong)
    with mounted(store.path, tag=f"corpus-{name}") as m:
        listed = _listing(m.path)
        raw_files = set()
        for arr in arrays:
            file = _mount_path(arr.path)
            where = f"{writer} {name}: {file}"
            if not arr.has_raw_form:
                if file in listed:
                    problems.append(
                        (arr.path, f"{where}: {arr.dtype} has no raw form but is listed")
                    )
                node = nodes.get(arr.path)
                if node is None or node.get("shown") is not False or not node.get("reason"):
                    problems.append(
                        (
                            arr.path,
                            f"{where}: --inspect should list it hidden "
                            f"with a reason, says {node!r}",
                        )
                    )
                continue
            raw_files.add(file)
            if file not in listed:
                node = nodes.get(arr.path) or {}
                problems.append(
                    (
                        arr.path,
                        f"{where} ({arr.dtype}, codecs {_codecs(arr)}) is "
                        f"not shown; --inspect: "
                        f"{node.get('reason', node.get('shown'))!r}",
                    )
                )
                continue
            try:
                got = read_file(m.p(file))
            except OSError as e:
                problems.append(
                    (arr.path, f"{where} ({arr.dtype}, codecs {_codecs(arr)}): read fails: {e}")
                )
                continue
            expected = arr.expected_bytes()
            if got != expected:
                problems.append(
                    (
                        arr.path,
                        f"{where} ({arr.dtype}, codecs {_codecs(arr)}): "
                        + describe_mismatch(got, expected, arr.file_dtype()),
                    )
                )
            problems += [(arr.path, p) for p in _check_xattrs(m.p(file), arr, where)]
        # Nothing listed that zarr-python does not read as an array.
        problems += [
            (None, f"{writer} {name}: {f}: listed, but zarr-python reads no such array")
            for f in sorted(listed - raw_files)
        ]
        # Nothing --inspect calls healthy that the mount cannot read.
        for path, node in sorted(nodes.items()):
            if node["type"] != "array" or not node["shown"]:
                continue
            file = node.get("file", _mount_path(path))
            try:
                size = len(read_file(m.p(file)))
            except OSError as e:
                problems.append(
                    (
                        path,
                        f"{writer} {name}: --inspect shows {path!r} but reading {file} fails: {e}",
                    )
                )
                continue
            if size != node["size"]:
                problems.append(
                    (path, f"{writer} {name}: {file}: {size} bytes, --inspect says {node['size']}")
                )
        m.assert_alive()
    _verdict(name, problems)


def _verdict(name: str, problems: list[tuple[str | None, str]]) -> None:
    assert not problems, f"{name}: {len(problems)} problem(s):\n" + "\n".join(
        msg for _, msg in problems
    )


def _codecs(arr) -> str:
    meta = arr.array.metadata
    if meta.zarr_format == 2:
        names = [f.codec_id for f in meta.filters or ()]
        if meta.compressor is not None:
            names.append(meta.compressor.codec_id)
        return "+".join(names) or "raw"
    return "+".join(type(c).__name__ for c in meta.codecs)


def _check_xattrs(path: str, arr, where: str) -> list[str]:
    """The shape, and for v3 the dimension names (xarray keeps them only there)."""
    problems = []
    shape = json.loads(os.getxattr(path, "user.zarr.shape"))
    if shape != list(arr.array.shape):
        problems.append(f"{where}: user.zarr.shape {shape} != {list(arr.array.shape)}")
    names = getattr(arr.array.metadata, "dimension_names", None)
    if names is not None:
        try:
            got = json.loads(os.getxattr(path, "user.zarr.dimension_names"))
        except OSError as e:
            problems.append(f"{where}: user.zarr.dimension_names: {e}")
        else:
            if got != list(names):
                problems.append(f"{where}: user.zarr.dimension_names {got} != {list(names)}")
    return problems


def test_every_numcodecs_zarr3_codec_was_written_or_skipped_with_a_reason(corpus):
    written = set(corpus.codec_arrays.get("numcodecs-zarr3", {}).values())
    skipped = {
        line.split(": ")[1] for line in corpus.skipped if line.startswith("numcodecs-zarr3: ")
    }
    names = set(corpus_mod.numcodecs_zarr3_names())
    assert names, "numcodecs.zarr3 exports no codec"
    assert names == written | skipped, sorted(names - written - skipped)


def test_corpus_summary(corpus, capsys):
    """Prints the arrays per writer and what could not be written (the closing note)."""
    counts = corpus_mod.count_arrays(corpus)
    lines = [f"interop corpus: {len(corpus.stores)} stores"]
    for writer, (raw, other) in counts.items():
        lines.append(
            f"  {writer}: {raw + other} arrays ({raw} compared byte for byte, "
            f"{other} without a raw form)"
        )
    lines += [f"  skipped {line}" for line in corpus.skipped]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(raw for raw, _ in counts.values()), counts
