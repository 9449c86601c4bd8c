"""Broken metadata, codecs, chunks and names: the mount stays up, bad nodes are hidden,
broken chunks give EIO while the rest of the array reads, the log names the chunk key."""

from __future__ import annotations

import errno
import os

import pytest
from helpers.common import (
    assert_not_found,
    hidden_node_problems,
    inspect_nodes,
    shown_node_problems,
)
from helpers.oracle import assert_bytes_equal, read_file

pytestmark = pytest.mark.mount

FAULTS = [
    "bad/corrupt",
    "bad/truncated",
    "bad/wrongsize",
    "bad/raw_wrongsize",
    "bad/raw_toolong",
    "bad/corrupt_blosc",
    "bad/empty_chunk_file",
]


def test_good_siblings_read(live_bad, bad_hierarchy):
    for path, case in bad_hierarchy.good.arrays.items():
        assert os.stat(live_bad.p(path)).st_size == case.nbytes, path
        assert_bytes_equal(read_file(live_bad.p(path)), case.expected, case.dtype)


def test_listing_hides_bad_nodes(live_bad, bad_hierarchy):
    root = set(os.listdir(live_bad.path))
    assert {"ok", "good", "bad"} <= root, root
    assert "bad_group" not in root
    listed = set(os.listdir(live_bad.p("bad")))
    shown = {"good_sibling"} | {p.split("/", 1)[1] for p in FAULTS}
    assert shown <= listed, sorted(shown - listed)
    hidden = set(bad_hierarchy.hidden_names["bad"])
    assert not (listed & hidden), sorted(listed & hidden)
    assert listed == shown, f"unexpected entries: {sorted(listed - shown)!r}"


def test_hidden_nodes_cannot_be_looked_up(live_bad, bad_hierarchy):
    assert_not_found(live_bad, [*bad_hierarchy.hidden, "bad_group/child"])


def test_unsafe_names_were_created(bad_hierarchy):
    """The data really holds unsafe names (else the hiding tests prove little about them)."""
    if "new\nline" not in bad_hierarchy.unsafe_names_created:
        pytest.skip("this filesystem does not allow a newline in a file name")
    assert os.path.isdir(bad_hierarchy.root / "bad" / "new\nline")


@pytest.mark.parametrize("path", FAULTS)
def test_broken_chunk_gives_eio_other_chunks_read(live_bad, bad_hierarchy, path):
    fault = bad_hierarchy.faults[path]
    full = live_bad.p(path)
    assert os.stat(full).st_size == len(fault.expected)
    # good chunks first: chunk 0.2 (never shares a page or read-ahead with 0.1), then 0.0
    with open(full, "rb") as f:
        fd = f.fileno()
        for start, stop in reversed(fault.good_ranges):
            got = os.pread(fd, stop - start, start)
            assert_bytes_equal(got, fault.expected[start:stop], None)
    with open(full, "rb") as f:
        start, stop = fault.bad_range
        with pytest.raises(OSError) as e:
            os.pread(f.fileno(), stop - start, start)
        assert e.value.errno == errno.EIO, e.value
        # the error is not sticky: good chunks of the same file still read on this handle
        start, stop = fault.good_ranges[-1]
        assert_bytes_equal(os.pread(f.fileno(), 4096, start), fault.expected[start : start + 4096])
    # uncached (O_DIRECT): the daemon sees exactly the bad range; still EIO
    fd = os.open(full, os.O_RDONLY | os.O_DIRECT)
    try:
        with pytest.raises(OSError) as e:
            os.pread(fd, 100, fault.bad_range[0] + 3)
        assert e.value.errno == errno.EIO
        start, stop = fault.good_ranges[0]
        assert_bytes_equal(os.pread(fd, 1000, start + 7), fault.expected[start + 7 : start + 1007])
    finally:
        os.close(fd)
    line = live_bad.wait_for_log(fault.bad_key)
    assert line is not None, (
        f"no log line names {fault.bad_key!r}; log tail:\n{live_bad.read_log()[-3000:]}"
    )


def test_whole_file_read_of_broken_array_fails_with_eio(live_bad):
    with open(live_bad.p("bad/corrupt"), "rb") as f, pytest.raises(OSError) as e:
        f.read()
    assert e.value.errno == errno.EIO


def test_mount_survives_everything(live_bad, bad_hierarchy):
    """After all the broken reads the daemon still serves good data."""
    case = bad_hierarchy.good.arrays["good/a"]
    assert_bytes_equal(read_file(live_bad.p("good/a")), case.expected, case.dtype)


def test_inspect_json_lists_hidden_nodes_with_reason(bad_hierarchy):
    nodes = inspect_nodes(bad_hierarchy.root)
    problems = hidden_node_problems(nodes, bad_hierarchy.hidden)
    problems += shown_node_problems(
        nodes, ["", "ok", "good", "good/a", "bad", "bad/good_sibling", *FAULTS]
    )
    assert not problems, "\n".join(problems)


def test_inspect_json_types_are_group_or_array(bad_hierarchy):
    """``type`` is "group" or "array" for every node, hidden ones included (the kind of a
    node with an unsafe name is known from its metadata document)."""
    nodes = inspect_nodes(bad_hierarchy.root)
    problems = []
    for path, node in nodes.items():
        if node.get("type") not in ("group", "array"):
            problems.append(f"{path!r}: type {node.get('type')!r} is neither group nor array")
    for path, kind in bad_hierarchy.hidden.items():
        if path in nodes and nodes[path].get("type") != kind:
            problems.append(f"{path!r}: type {nodes[path].get('type')!r}, expected {kind!r}")
    assert not problems, "\n".join(problems)
