"""Stores written by xarray, ome-zarr-py, anndata and zarr-python (every ``numcodecs.zarr3``
codec), mounted with the real command and read through the mount.

The oracle is zarr-python reading the same store, never bytes zarrmount produced: for every
array zarr-python reads whose dtype has a raw form, the mount shows a file at the same path
holding ``np.ascontiguousarray(arr[...]).tobytes()`` (in the byte order the array is stored
in). Arrays of strings (variable-length ones have no raw form) are shown as ``PATH.txt``,
one element per line: each line, unescaped by the README's rules, is zarr-python's element.
No array that ``--inspect`` calls healthy may fail to read through the mount. The mounts
show text files alone (``sidecars=text``): headers are tested in ``test_sidecars.py``.

The corpus (``tests/helpers/corpus.py``) is built once for the module, in a few seconds.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from helpers import corpus as corpus_mod
from helpers.mounting import mounted, run_cli
from helpers.oracle import describe_mismatch, read_file
from helpers.text_lines import unescape

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
    with mounted(store.path, ["sidecars=text"], tag=f"corpus-{name}") as m:
        listed = _listing(m.path)
        shown = set()
        for arr in arrays:
            file = _mount_path(arr.path)
            where = f"{writer} {name}: {file}"
            if _is_text(arr):
                shown.add(file + ".txt")
                problems += [(arr.path, p) for p in _text_problems(m, arr, file, listed, where)]
            if not arr.has_raw_form:
                node = nodes.get(arr.path) or {}
                if file in listed or node.get("file") is not None:
                    problems.append(
                        (arr.path, f"{where}: {arr.dtype} has no raw form but is shown")
                    )
                continue
            shown.add(file)
            problems += [(arr.path, p) for p in _raw_problems(m, arr, file, listed, nodes, where)]
        # Nothing listed that zarr-python does not read as an array.
        problems += [
            (None, f"{writer} {name}: {f}: listed, but zarr-python reads no such array")
            for f in sorted(listed - shown)
        ]
        # Nothing --inspect calls healthy that the mount cannot read.
        for path, node in sorted(nodes.items()):
            if node["type"] != "array" or not node["shown"] or node["file"] is None:
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


def _raw_problems(m, arr, file: str, listed: set[str], nodes: dict, where: str) -> list[str]:
    """An array file holds zarr-python's values, C order, and its xattrs describe it."""
    if file not in listed:
        node = nodes.get(arr.path) or {}
        reason = node.get("reason", node.get("shown"))
        return [f"{where} ({arr.dtype}, codecs {_codecs(arr)}) is not shown; --inspect: {reason!r}"]
    try:
        got = read_file(m.p(file))
    except OSError as e:
        return [f"{where} ({arr.dtype}, codecs {_codecs(arr)}): read fails: {e}"]
    expected = arr.expected_bytes()
    problems = []
    if got != expected:
        mismatch = describe_mismatch(got, expected, arr.file_dtype())
        problems.append(f"{where} ({arr.dtype}, codecs {_codecs(arr)}): {mismatch}")
    return problems + _check_xattrs(m.p(file), arr, where)


def _is_text(arr) -> bool:
    """Arrays of strings or bytes, of variable or fixed size: shown as text."""
    return not arr.has_raw_form or np.dtype(arr.dtype).kind in "US"


def _text_problems(m, arr, file: str, listed: set[str], where: str) -> list[str]:
    """``file.txt``: a line per element, each unescaped equal to zarr-python's element."""
    if file + ".txt" not in listed:
        return [f"{where}.txt ({arr.dtype}, codecs {_codecs(arr)}) is not shown"]
    try:
        data = read_file(m.p(file + ".txt"))
    except OSError as e:
        return [f"{where}.txt: read fails: {e}"]
    got = [unescape(line) for line in data.split(b"\n")[:-1]]
    values = np.asarray(arr.array[...]).ravel().tolist()
    expected = [v if isinstance(v, bytes) else str(v).encode() for v in values]
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
        return [
            f"{where}.txt: {len(got)} lines for {len(expected)} elements, first differs at {at}"
        ]
    return []


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
            f"{other} of strings, compared as text)"
        )
    lines += [f"  skipped {line}" for line in corpus.skipped]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(raw for raw, _ in counts.values()), counts
