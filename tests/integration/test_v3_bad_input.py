"""Bad Zarr v3 input: unknown codecs / data types / grids / key encodings, variable-length
strings, unknown must-understand fields, storage transformers, malformed zarr.json are
hidden (``--inspect --json`` says why); corrupt shard indexes, inner chunks and chunks fail
only the reads that touch them with EIO, and the log names the store key. Siblings read,
the mount stays alive."""

from __future__ import annotations

import errno
import os

import pytest
from helpers import common
from helpers import v3_fixtures as v3
from helpers.mounting import background_mount, is_mounted
from helpers.oracle import assert_bytes_equal, read_file

pytestmark = pytest.mark.mount

DRY = v3.build_v3_bad(None)
FAULTS = sorted(DRY.faults)
SHOWN = sorted(DRY.arrays)


# (``bad_mount`` overrides the conftest's v2 fixture of that name in this module)
bad, bad_mount, live = common.mounted_hierarchy_fixtures(
    v3.build_v3_bad, "zarr-v3-bad", "bad.zarr", "v3bad", names=("bad", "bad_mount", "live")
)


def test_listing_hides_exactly_the_bad_nodes(live, bad):
    listed = set(os.listdir(live.p("bad")))
    hidden = {p.split("/", 1)[1] for p in bad.hidden}
    shown = {p.split("/", 1)[1] for p in bad.arrays if p.startswith("bad/")}
    assert not (listed & hidden), sorted(listed & hidden)
    assert listed == shown, f"missing {sorted(shown - listed)}, extra {sorted(listed - shown)}"
    assert set(os.listdir(live.p("faults"))) == {p.split("/", 1)[1] for p in bad.faults}
    assert set(os.listdir(live.path)) == {"good", "bad", "faults"}


def test_hidden_nodes_cannot_be_looked_up(live, bad):
    common.assert_not_found(live, [*bad.hidden, "bad/must_understand_group/child"])


@pytest.mark.parametrize("path", SHOWN)
def test_shown_siblings_read(live, bad, path):
    case = bad.arrays[path]
    assert os.stat(live.p(path)).st_size == case.nbytes
    assert_bytes_equal(read_file(live.p(path)), case.expected, case.dtype)
    problems = v3.v3_xattr_problems(live.p(path), case)
    assert not problems, problems


def test_hidden_arrays_are_logged(live, bad):
    os.listdir(live.p("bad"))
    for path in bad.hidden:
        assert live.wait_for_log(path, timeout=3) is not None, (
            f"no log line names {path!r}; log tail:\n{live.read_log()[-3000:]}"
        )


@pytest.mark.parametrize("path", FAULTS)
def test_fault_gives_eio_only_where_it_is(live, bad, path):
    fault = bad.faults[path]
    full = live.p(path)
    assert os.stat(full).st_size == len(fault.expected)
    # uncached (O_DIRECT): the daemon sees exactly these ranges
    fd = os.open(full, os.O_RDONLY | os.O_DIRECT)
    try:
        for start, stop in fault.good_ranges:
            assert_bytes_equal(os.pread(fd, stop - start, start), fault.expected[start:stop])
        for start, stop in fault.bad_ranges:
            with pytest.raises(OSError) as e:
                os.pread(fd, stop - start, start)
            assert e.value.errno == errno.EIO, e.value
        # not sticky: good data still reads on the same handle afterwards
        start, stop = fault.good_ranges[0]
        assert_bytes_equal(os.pread(fd, stop - start, start), fault.expected[start:stop])
    finally:
        os.close(fd)
    # a whole-file read through the page cache fails too
    with open(full, "rb") as f, pytest.raises(OSError) as e:
        f.read()
    assert e.value.errno == errno.EIO
    line = live.wait_for_log(fault.bad_key)
    assert line is not None, (
        f"no log line names {fault.bad_key!r}; log tail:\n{live.read_log()[-3000:]}"
    )


def test_mount_survives_everything(live, bad):
    case = bad.arrays["good/a"]
    assert_bytes_equal(read_file(live.p("good/a")), case.expected, case.dtype)


def test_inspect_json_gives_reasons(bad):
    nodes = common.inspect_nodes(bad.root)
    problems = common.hidden_node_problems(nodes, bad.hidden)
    for path, kind in bad.hidden.items():
        n = nodes.get(path)
        if n is not None and kind != "unknown" and n.get("type") != kind:
            problems.append(f"{path!r}: type {n.get('type')!r} != {kind!r}")
    problems += common.shown_node_problems(nodes, [*bad.arrays, *bad.faults])
    assert not problems, "\n".join(problems)
    # the reasons say what is wrong
    reasons = {p: nodes[p]["reason"].lower() for p in bad.hidden if p in nodes}
    assert "frobnicate" in reasons["bad/unknown_codec"]
    assert "future_thing" in reasons["bad/must_understand"]
    assert "storage" in reasons["bad/storage_transformers"]
    assert "float8_e4m3fn" in reasons["bad/unknown_data_type"]


@pytest.mark.parametrize(
    "text",
    [
        '{"zarr_format": 3, "node_type": "group", "attributes": ',
        '{"zarr_format": 3, "node_type": "group", "unknown_required": {"x": 1}}',
        '{"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "string", '
        '"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, '
        '"chunk_key_encoding": {"name": "default"}, "fill_value": "", '
        '"codecs": [{"name": "bytes"}]}',
    ],
    ids=["malformed", "must_understand", "strings_root_array_without_vlen_codec"],
)
def test_unreadable_root_document_fails_the_mount_cleanly(tmp_path, text):
    """Without -f: non-zero exit with a one-line reason, nothing left mounted."""
    src = tmp_path / "src.zarr"
    src.mkdir()
    (src / "zarr.json").write_text(text)
    with background_mount(src, (f"log={tmp_path / 'log'}",), tag="v3badroot") as bg:
        assert bg.result.returncode != 0
        assert bg.result.stderr.strip(), bg.result
        assert not is_mounted(bg.path)
