"""Hostile names and keys, in consolidated metadata and in directory listings: whatever the
metadata names, the mount lists only safe names, serves nothing from outside the store root,
stays up, and the healthy arrays beside each hostile name read what zarr-python reads.

Each store is written by zarr-python (v2 with ``.zmetadata``, v3 with consolidated metadata
in the root ``zarr.json``, and both without consolidation), one group per case, each group
with a healthy ``ok`` array; then the JSON is edited (or directories are made) by hand. A
tree outside every store holds a sentinel (an array whose chunk is the sentinel, and
``etc/passwd``) that no file of a mount may ever contain.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.arrays import write_array
from helpers.mounting import mounted, run_cli
from helpers.oracle import assert_bytes_equal, read_file
from helpers.outside import assert_nothing_outside_served

pytestmark = pytest.mark.mount

SENTINEL = b"SENTINEL:outside-the-store-root:" * 2 + bytes(range(0xF0, 0x100))  # 80 bytes
NFC, NFD = "\u00e9", "e\u0301"  # "é" composed and decomposed: two names on Linux
LONG_255 = "\u00e9" * 127 + "x"  # 255 UTF-8 bytes: the longest name there is
ARRAY, GROUP, OUTSIDE, NARROW = "array", "group", "outside", "narrow"


@dataclass(frozen=True)
class Case:
    """One group of a store, ``c_<name>``, beside its healthy ``ok`` array.

    The test first writes ``arrays`` with zarr-python. Then, in consolidated stores, it adds
    the keys of ``add`` (``{g}`` is the group's path) with a document (``array``: a copy of
    ``ok``'s, ``group``, ``outside``: the sentinel array's, ``narrow``: ``ok``'s with a
    one-byte dtype) and renames the keys of ``move``; in plain stores it makes each name of
    ``raw`` with ``os.mkdir`` and fills it with a valid array or group. ``link`` is a symlink
    in the group to the outside tree.

    Expected: ``hidden`` names (kind) are not listed and --inspect gives the reason the
    daemon logs; ``served`` arrays read what zarr-python read; ``eio`` files are listed and
    fail with EIO; ``groups`` are listed directories. Anything else the case adds is not
    listed at all, neither by the mount nor by --inspect.
    """

    outcome: str  # for the reader: what the hostile names become
    add: dict[str, str] = field(default_factory=dict)
    move: dict[str, str] = field(default_factory=dict)
    arrays: tuple[str, ...] = ()
    raw: dict[bytes, str] = field(default_factory=dict)
    link: str | None = None
    hidden: dict[str, str] = field(default_factory=dict)
    served: tuple[str, ...] = ()
    eio: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


def v2_key(path: str, kind: str) -> str:
    return f"{path}/.zgroup" if kind == GROUP else f"{path}/.zarray"


def _unsafe_name_cases(key) -> dict[str, Case]:
    """The cases that read the same in both formats; ``key(path, kind)`` is the key of a
    node's document in consolidated metadata."""

    def names(kinds: dict[str, str], outcome="hidden", **kw) -> Case:
        return Case(
            outcome,
            add={key(f"{{g}}/{n}", k): ARRAY if k == ARRAY else GROUP for n, k in kinds.items()},
            hidden=kinds,
            **kw,
        )

    return {
        "dotdot": Case("hidden", add={key("{g}/..", ARRAY): OUTSIDE}, hidden={"..": ARRAY}),
        "dot": names({".": ARRAY}),
        "nul": names({"a\x00b": ARRAY, "\x00": GROUP}),
        "newline": names({"a\nb": ARRAY, "\n": GROUP}),
        "carriage_return": names({"a\rb": ARRAY, "ok\r": ARRAY}),
        "control": names({"\t": ARRAY, "a\x01b": ARRAY, "\x1b[2J": ARRAY, "del\x7f": GROUP}),
        "c1_control": names({"a\x85b": ARRAY, "\x9b": GROUP}),
        "surrogate": names({"\udcff": ARRAY, "a\ud800b": ARRAY, "\udcfe\udcff": GROUP}),
        "over_255_bytes": names(
            {"x" * 256: ARRAY, "\u00e9" * 128: GROUP},
            outcome="hidden; 255 bytes served",
            arrays=(LONG_255,),
            served=(LONG_255,),
        ),
        "unicode_forms": Case("served, distinct", arrays=(NFC, NFD), served=(NFC, NFD)),
    }


def _symlink_out_case(key) -> Case:
    """A symlink ``out`` in the group to the outside tree, named in consolidated metadata as
    a group holding the sentinel array (``key`` as in :func:`_unsafe_name_cases`): the group
    is listed, but its array fails with EIO instead of serving what lies outside."""
    return Case(
        "EIO",
        link="out",
        add={key("{g}/out", GROUP): GROUP, key("{g}/out/arr", ARRAY): OUTSIDE},
        groups=("out",),
        eio=("out/arr",),
    )


V2_CONSOLIDATED = {
    **_unsafe_name_cases(v2_key),
    "double_slash": Case(
        "not listed", add={"{g}//x/.zarray": ARRAY, "{g}//.zarray": ARRAY, "{g}/y//.zarray": ARRAY}
    ),
    "leading_slash": Case(
        "not listed",
        arrays=("arr",),
        add={"/.zgroup": GROUP},
        move={"{g}/arr/.zarray": "/{g}/arr/.zarray"},
    ),
    "passwd": Case(
        "not listed",
        add={
            "{g}/../../etc/passwd": OUTSIDE,
            "{g}/../../outside/v2/arr/.zarray": OUTSIDE,
            "../etc/passwd/.zarray": OUTSIDE,
            "{g}/sub/.zgroup": GROUP,
            "{g}/sub/../../../outside/v2/arr/.zarray": OUTSIDE,
        },
        groups=("sub",),
    ),
    "collision": Case(
        "canonical served, other not listed",
        arrays=("twin",),
        add={"{g}//twin/.zarray": NARROW},
        served=("twin",),
    ),
    "symlink_out": _symlink_out_case(v2_key),
}

V3_CONSOLIDATED = {
    **_unsafe_name_cases(lambda path, kind: path),
    "double_slash": Case("not listed", add={"{g}//x": ARRAY, "{g}/y//z": ARRAY}),
    # zarrmount strips "/" from the ends of consolidated keys: "/g/arr" is "g/arr"
    "leading_slash": Case("served", arrays=("arr",), move={"{g}/arr": "/{g}/arr"}, served=("arr",)),
    "passwd": Case(
        "not listed",
        add={
            "{g}/../../etc/passwd": OUTSIDE,
            "../etc/passwd": OUTSIDE,
            "/../outside/v3/arr": OUTSIDE,
            "{g}/../../outside/v3/arr": OUTSIDE,
        },
    ),
    "collision": Case(
        "hidden", arrays=("twin",), add={"/{g}/twin": NARROW}, hidden={"twin": ARRAY}
    ),
    "symlink_out": _symlink_out_case(lambda path, kind: path),
}

LISTED = {  # plain directory listings (no consolidated metadata)
    "non_utf8": Case(
        "hidden",
        raw={b"\xff\xfe": ARRAY, b"g\xff": GROUP},
        hidden={"\udcff\udcfe": ARRAY, "g\udcff": GROUP},
    ),
    "c1_control": Case(
        "hidden",
        raw={"a\x85b".encode(): ARRAY, "\x9b".encode(): GROUP},
        hidden={"a\x85b": ARRAY, "\x9b": GROUP},
    ),
    "unicode_forms": Case("served, distinct", arrays=(NFC, NFD), served=(NFC, NFD)),
}

STORES = {
    "v2-consolidated": (2, True, V2_CONSOLIDATED),
    "v3-consolidated": (3, True, V3_CONSOLIDATED),
    "v2-listing": (2, False, LISTED),
    "v3-listing": (3, False, LISTED),
}


# -- building the stores ------------------------------------------------------------------


def _write_array(group, name: str, values: np.ndarray) -> None:
    """``values`` in uncompressed chunks of 4 (several chunks, the last one partial)."""
    write_array(group, name, values, chunks=(4,), compressors=None)


def _outside(tmp: Path) -> Path:
    """The tree no mount may serve from: ``outside/v2/arr``, ``outside/v3/arr`` (arrays
    whose one chunk is the sentinel) and ``outside/etc/passwd``."""
    outside = tmp / "outside"
    for fmt in (2, 3):
        g = zarr.open_group(outside / f"v{fmt}", mode="w", zarr_format=fmt)
        sentinel = np.frombuffer(SENTINEL, np.uint8)
        write_array(g, "arr", sentinel, chunks=sentinel.shape, compressors=None)
    (outside / "etc").mkdir()
    (outside / "etc" / "passwd").write_bytes(SENTINEL)
    chunks = [outside / "v2" / "arr" / "0", outside / "v3" / "arr" / "c" / "0"]
    assert all(c.read_bytes() == SENTINEL for c in chunks)
    return outside


def _move_into(src: Path, dst: bytes) -> None:
    """Make ``dst`` with os.mkdir and move the node zarr-python wrote at ``src`` into it."""
    os.mkdir(dst)
    for entry in os.listdir(os.fsencode(src)):
        os.rename(os.path.join(os.fsencode(src), entry), os.path.join(dst, entry))
    os.rmdir(src)


def _documents(root: Path, fmt: int) -> tuple[dict, dict]:
    """The consolidated metadata mapping (edited in place) and the whole document."""
    if fmt == 2:
        doc = json.loads((root / ".zmetadata").read_text())
        return doc["metadata"], doc
    doc = json.loads((root / "zarr.json").read_text())
    return doc["consolidated_metadata"]["metadata"], doc


def _document(kind: str, fmt: int, ok: dict, outside: Path) -> dict:
    if kind == ARRAY:
        return copy.deepcopy(ok)
    if kind == NARROW:
        return {**ok, "dtype": "|u1"} if fmt == 2 else {**ok, "data_type": "uint8"}
    if kind == GROUP:
        return (
            {"zarr_format": 2}
            if fmt == 2
            else {"zarr_format": 3, "node_type": "group", "attributes": {}}
        )
    assert kind == OUTSIDE
    name = ".zarray" if fmt == 2 else "zarr.json"
    return json.loads((outside / f"v{fmt}" / "arr" / name).read_text())


@dataclass
class Corpus:
    root: Path
    cases: dict[str, Case]
    expected: dict[str, bytes]  # path of every array that must read right -> zarr-python's bytes


def build(tmp: Path, label: str) -> Corpus:
    fmt, consolidated, cases = STORES[label]
    outside = tmp / "outside"
    root = tmp / f"{label}.zarr"
    top = zarr.open_group(root, mode="w", zarr_format=fmt)
    rng = np.random.default_rng(sum(map(ord, label)))
    written: list[str] = []
    for name, case in cases.items():
        group = top.create_group(f"c_{name}")
        for array in ("ok", *case.arrays):
            _write_array(group, array, rng.integers(0, 60000, 6, dtype="<u2"))
            written.append(f"c_{name}/{array}")
        for i, (raw, kind) in enumerate(case.raw.items()):
            placeholder = f"placeholder{i}"
            if kind == ARRAY:
                _write_array(group, placeholder, np.arange(6, dtype="<u2"))
            else:
                _write_array(group.create_group(placeholder), "inner", np.arange(6, dtype="<u2"))
            parent = root / f"c_{name}"
            _move_into(parent / placeholder, os.fsencode(parent) + b"/" + raw)
        if case.link:
            os.symlink(outside / f"v{fmt}", root / f"c_{name}" / case.link)
    expected = {
        p: zarr.open_array(root / p, mode="r", zarr_format=fmt)[:].tobytes() for p in written
    }
    if consolidated:
        with warnings.catch_warnings():  # "consolidated metadata is not in the v3 spec"
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(root)
        metadata, doc = _documents(root, fmt)
        for name, case in cases.items():
            g = f"c_{name}"
            ok = metadata[v2_key(f"{g}/ok", ARRAY) if fmt == 2 else f"{g}/ok"]
            for key, kind in case.add.items():
                metadata[key.format(g=g)] = _document(kind, fmt, ok, outside)
            for key, new in case.move.items():
                metadata[new.format(g=g)] = metadata.pop(key.format(g=g))
        (root / (".zmetadata" if fmt == 2 else "zarr.json")).write_text(json.dumps(doc))
    return Corpus(root, cases, expected)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    _outside(tmp)
    return {label: build(tmp, label) for label in STORES}


# -- what every case checks ---------------------------------------------------------------


def is_safe_listed_name(name: bytes) -> bool:
    """The test's own idea of a name a mount may list: one UTF-8 path component of at most
    255 bytes, not ``.`` or ``..``, without control characters (C0, DEL, C1)."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return (
        text not in ("", ".", "..")
        and len(name) <= 255
        and "/" not in text
        and not any(unicodedata.category(c) == "Cc" for c in text)
    )


def listed_below(directory: str) -> set[str]:
    """Every path below ``directory`` the mount lists, relative to it."""
    found = set()
    for dirpath, dirs, files in os.walk(directory):
        for name in (*dirs, *files):
            found.add(os.path.relpath(os.path.join(dirpath, name), directory))
    return found


def inspect_nodes(root: Path) -> dict[str, dict]:
    shown = run_cli(["--inspect", root, "--json"])
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    nodes = {}
    for node in json.loads(shown.stdout)["nodes"]:
        assert node["path"] not in nodes, f"--inspect lists {node['path']!r} twice"
        nodes[node["path"]] = node
    return nodes


def check_case(m, corpus: Corpus, nodes: dict[str, dict], name: str) -> list[str]:
    """The problems of one case, as sentences (empty: all as expected)."""
    case, g = corpus.cases[name], f"c_{name}"
    problems = []
    shown = {"ok", *case.served, *case.eio, *case.groups}
    listed = listed_below(m.p(g))
    if listed != shown:
        problems.append(f"lists {sorted(listed)!r}, expected {sorted(shown)!r}")
    for array in ("ok", *case.served):
        path = f"{g}/{array}"
        try:
            assert_bytes_equal(read_file(m.p(path)), corpus.expected[path])
        except (AssertionError, OSError) as e:
            problems.append(f"{array!r} does not read what zarr-python reads: {e}")
    for path in case.eio:
        try:
            read_file(m.p(f"{g}/{path}"))
            problems.append(f"{path!r} was read, expected EIO")
        except OSError as e:
            if e.errno != errno.EIO:
                problems.append(f"{path!r}: {e}, expected EIO")
        if not m.wait_for_log("leads outside the store root"):
            problems.append("no log line says a key leads outside the store root")
    for child, kind in case.hidden.items():
        node = nodes.get(f"{g}/{child}")
        reason = node.get("reason") if node else None
        if node is None or node["shown"] or node["type"] != kind or not reason:
            problems.append(f"{child!r}: --inspect says {node!r}, expected a hidden {kind}")
        elif not m.wait_for_log(reason, timeout=1):
            problems.append(f"{child!r}: the log does not give --inspect's reason {reason!r}")
    inspected = {p.removeprefix(f"{g}/") for p in nodes if p.startswith(f"{g}/")}
    if inspected != shown | set(case.hidden):
        problems.append(
            f"--inspect lists {sorted(inspected)!r}, expected {sorted(shown | set(case.hidden))!r}"
        )
    return problems


@pytest.mark.parametrize("label", list(STORES))
def test_hostile_names_are_harmless(stores, label):
    corpus = stores[label]
    nodes = inspect_nodes(corpus.root)  # before the mount: a traceback fails here
    with mounted(corpus.root, tag="names") as m, rw_tools.RssSampler(m.proc.pid) as rss:
        assert set(os.listdir(m.path)) == {f"c_{name}" for name in corpus.cases}
        problems = {name: check_case(m, corpus, nodes, name) for name in corpus.cases}
        problems = {name: p for name, p in problems.items() if p}
        assert not problems, "\n".join(
            f"{n} (expected {corpus.cases[n].outcome}): {p}"
            for n, ps in problems.items()
            for p in ps
        )
        unsafe = [
            os.path.join(d, n)
            for d, dirs, files in os.walk(os.fsencode(m.path))
            for n in (*dirs, *files)
            if not is_safe_listed_name(n)
        ]
        assert not unsafe, unsafe
        eio = {f"c_{name}/{p}" for name, case in corpus.cases.items() for p in case.eio}
        assert_nothing_outside_served(m.path, SENTINEL, skip=eio)
        first = next(iter(corpus.expected))  # after everything, the daemon still answers
        assert read_file(m.p(first)) == corpus.expected[first]
        m.assert_alive()
    assert rss.peak_kib << 10 <= (512 << 20) + (150 << 20)  # the default cache + 150 MiB
