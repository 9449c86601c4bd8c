"""A v3 hierarchy of 100,000 arrays in 110 groups, described by the consolidated metadata
of its root's ``zarr.json`` as zarr-python writes it (indented: 89 MB, more than any
document parsed whole may be): mounted and listed whole with ``ls -lR``, every file has
the size NumPy computes from the shape and data type it was written with, the arrays
zarr-python wrote read as it reads them, and the daemon's peak resident set stays within
its cache plus 150 MiB. A root document past what may be read is refused in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers.mounting import mounted, process_memory, run_cli
from helpers.oracle import read_file
from helpers.stores.consolidated import DATA_TYPES, WRITTEN, Wide, build_wide
from helpers.stores.v3 import zarr_oracle

from zarrmount.format.consolidated import MAX_SPLIT_BYTES
from zarrmount.format.jsondoc import MAX_BYTES

pytestmark = pytest.mark.mount

CACHE = 64 << 20
BUDGET = CACHE + (150 << 20)
# 10 groups of 10 groups of 1,000 arrays
GROUPS, SUBGROUPS, PER_GROUP = 10, 10, 1000
# arrays with no chunks but their consolidated document: read as their fill value
FILLED = ("g00/s00/a0000", "g04/s07/a0555", "g09/s09/a0999")


def _listed(mountpoint: str) -> dict[str, tuple[str, int]]:
    """``ls -lRn`` of the mount: each entry's path below it -> (file type, size)."""
    out = subprocess.run(
        ["ls", "-lRn", "--time-style=+%s", mountpoint],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    found, directory = {}, ""
    for line in out.splitlines():
        if line.endswith(":") and line.startswith(mountpoint):
            directory = line[len(mountpoint) : -1].strip("/")
        elif line and not line.startswith("total "):
            mode, _, _, _, size, _, name = line.split(maxsplit=6)
            found[f"{directory}/{name}" if directory else name] = (mode[0], int(size))
    return found


def _expected_sizes(wide: Wide) -> dict[str, int]:
    return {
        path: int(np.prod(shape, dtype=np.int64)) * np.dtype(data_type).itemsize
        for path, (shape, data_type) in wide.arrays.items()
    }


def _expected_bytes(root: Path, wide: Wide) -> dict[str, bytes]:
    """The arrays zarr-python wrote, as it reads them; a few of the others, which have
    no chunks, as their fill value (zarr-python's default: zero) fills them."""
    found = {f"{WRITTEN}/{t}": zarr_oracle(root, f"{WRITTEN}/{t}")[0] for t in DATA_TYPES}
    for path in FILLED:
        shape, data_type = wide.arrays[path]
        found[path] = np.zeros(shape, data_type).tobytes()
    return found


def test_100000_consolidated_arrays_list_whole_within_the_memory_budget(tmp_path):
    root = tmp_path / "wide.zarr"
    wide = build_wide(root, GROUPS, SUBGROUPS, PER_GROUP)
    assert len(wide.arrays) == GROUPS * SUBGROUPS * PER_GROUP + len(DATA_TYPES)
    assert (root / "zarr.json").stat().st_size > MAX_BYTES
    expected = _expected_bytes(root, wide)
    limit = ["prlimit", f"--as={4 << 30}", "--"]
    options = [f"cache_size={CACHE >> 20}M"]
    with mounted(root, options, tag="wide-v3", wrapper=limit, timeout=120) as m:
        listed = _listed(m.path)
        for path, data in expected.items():
            assert read_file(m.p(path)) == data, path
        m.assert_alive()
        peak = process_memory(m.proc.pid)
    files = {path: size for path, (kind, size) in listed.items() if kind == "-"}
    assert files == _expected_sizes(wide)
    assert {path for path, (kind, _) in listed.items() if kind == "d"} == set(wide.groups)
    assert len(listed) == len(files) + len(wide.groups)
    assert peak <= BUDGET, f"peak RSS {peak >> 20} MiB, more than {BUDGET >> 20} MiB"


def test_a_root_document_past_the_size_limit_fails_in_one_line(tmp_path):
    """A sparse file larger than a root document with consolidated metadata may be: the
    mount fails at once with why, having read none of it."""
    root = tmp_path / "huge.zarr"
    root.mkdir()
    with open(root / "zarr.json", "wb") as f:
        f.truncate(MAX_SPLIT_BYTES + 1)
    (tmp_path / "mnt").mkdir()
    done = run_cli([root, tmp_path / "mnt"])
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"zarr.json has {MAX_SPLIT_BYTES + 1} bytes, more than" in done.stderr
