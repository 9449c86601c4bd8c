"""Metadata written to hurt: the node is hidden with a logged reason that --inspect repeats,
the mount stays up and a healthy sibling still reads what zarr-python reads."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
from helpers.mounting import mounted, run_cli
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
