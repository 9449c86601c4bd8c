"""A mount that runs for months: reloads that add and remove arrays leave no node behind
once the kernel has forgotten them, and memory stays within the cache's budget + 150 MiB.

``ZARRMOUNT_RELOADS`` sets the rounds (each: an array added by zarr-python, a reload, the
array looked up and read, the array deleted, a reload); 10,000 for the issue's figure,
fewer by default so the suite stays short.
"""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import zarr
from helpers.mounting import mounted, process_memory, run_cli, wait_until

pytestmark = pytest.mark.mount

ROUNDS = int(os.environ.get("ZARRMOUNT_RELOADS", "150"))
CACHE_MIB = 64
RELOADED = "reloaded the hierarchy"
DEADLINE_S = 30.0  # for an outcome that comes within a second on a quiet machine


def _stats(path: str) -> dict[str, int]:
    done = run_cli(["--stats", path, "--json"], timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _values(path: str) -> list[float] | None:
    try:
        with open(path, "rb") as f:
            return np.frombuffer(f.read(), "<f4").tolist()
    except FileNotFoundError:
        return None


def _reload(mount, done: int) -> int:
    """SIGHUP, and wait for the reload's log line: the ``done + 1``\\ th."""
    mount.proc.send_signal(signal.SIGHUP)
    if not wait_until(lambda: mount.read_log().count(RELOADED) > done, DEADLINE_S):
        raise AssertionError(f"reload {done + 1} not logged: {mount.read_log()[-2000:]}")
    return done + 1


def test_reloads_that_add_and_remove_arrays_leave_no_node_behind(tmp_path):
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array("stays", shape=(8,), dtype="<i4")[...] = np.arange(8)
    options = [f"cache_size={CACHE_MIB}M"]
    with mounted(root, options, sidecars="envi+netcdf+text", tag="reloads") as m:
        os.listdir(m.path)
        start = _stats(m.path)["inodes"]
        reloads = 0
        for k in range(ROUNDS):
            name = f"brief{k}"  # a name of its own: cached chunks of a path stay a period
            group.create_array(name, shape=(16, 16), dtype="<f4")[...] = k
            reloads = _reload(m, reloads)
            # the kernel drops the names it was told are stale on its own time
            path, want = m.p(name), [float(k)] * 256
            assert wait_until(lambda p=path, w=want: _values(p) == w, DEADLINE_S)
            os.listdir(m.path)  # the entries, the sidecars and the .nc listed
            del group[name]
            reloads = _reload(m, reloads)
            assert wait_until(lambda n=name: n not in os.listdir(m.path), DEADLINE_S)
        assert wait_until(lambda: _stats(m.path)["inodes"] == start, DEADLINE_S, 0.2), (
            _stats(m.path)["inodes"],
            start,
        )
        assert process_memory(m.proc.pid) <= (CACHE_MIB + 150) << 20
