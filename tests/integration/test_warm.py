"""``zarrmount warm MNT/PATH...`` through real mounts of a moto S3 server behind a proxy:
the arrays named, or every array below a group, end up in the mount's disk cache, so a
fresh mount reads them whole without fetching a chunk, and while the store is down; a
warm that cannot fetch says what it missed, and a path on no mount of ours is refused.

The expected bytes are zarr-python's, read through s3fs.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted, zarrmount_exe
from helpers.remote_servers import (  # noqa: F401 - fixtures
    expected_bytes,
    read_all,
    s3_data_fixture,
    s3_fixture,
)

pytestmark = pytest.mark.mount

WARM_TIMEOUT_S = 120  # the most a warm may take here (outcomes only: never timed)
DOCUMENTS = re.compile(r"(zarr\.json|\.zarray|\.zgroup|\.zattrs|\.zmetadata)$")

proxy = fault_proxy_fixture()
fault = fault_fixture()

# (hierarchy, paths warmed, arrays read afterwards): v2 without consolidated metadata
# (groups listed), v3 with it and shards (an index and inner chunks per shard)
CASES = {
    "v2": ("v2", ["ints", "grp"], ["ints", "grp/sub/floats"]),
    "v3": ("v3", ["sub"], ["sub/sharded", "sub/sparse_sharded"]),
}


def _options(fault, disk, *more: str) -> list[str]:
    return [f"so.endpoint_url={fault.url}", "timeout=4", f"disk_cache={disk}", *more]


def _warm(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [zarrmount_exe(), "warm", *paths], capture_output=True, text=True, timeout=WARM_TIMEOUT_S
    )


def _chunk_gets(fault) -> list[str]:
    """Paths of the stored objects fetched but documents and listings: chunks and shards
    (an absent shard's index is asked for: no listing tells the reader it is absent)."""
    return [
        r.path
        for r in fault.requests
        if r.method == "GET"
        and "?" not in r.path
        and not DOCUMENTS.search(r.path)
        and r.outcome != "404"
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_warmed_arrays_are_read_by_a_fresh_mount_without_a_chunk_fetched(
    s3_data, fault, tmp_path, case
):
    kind, warmed, read = CASES[case]
    url = getattr(s3_data, kind)
    oracle = s3_data.oracle(url)
    options = _options(fault, tmp_path / "disk")
    with mounted(url, options, tag=f"warm{case}") as m:
        done = _warm(*(m.p(p) for p in warmed))
        assert done.returncode == 0, done.stderr
        assert "warmed" in done.stdout and "failed" not in done.stdout, done.stdout
        assert "\r" not in done.stdout  # no bar where stdout is no terminal
        units = int(re.search(r"of (\d+) units", done.stdout).group(1))
        assert units > 0 and m.stats()["disk_cache_stored"] >= units
        expected = {p: expected_bytes(oracle, kind, p, m.p(p)) for p in read}
    fault.clear()
    with mounted(url, options, tag=f"warm{case}2") as m:
        for path in read:
            assert read_all(m.p(path)) == expected[path], path
        assert m.stats()["disk_cache_hits"] >= units
    assert not _chunk_gets(fault), _chunk_gets(fault)


def test_a_fresh_mount_comes_up_and_reads_warmed_arrays_while_the_store_is_down(
    s3_data, fault, tmp_path
):
    """The metadata documents and group listings the mount needs were kept on disk too
    (no consolidated metadata here): the mount comes up through the outage."""
    url, path = s3_data.v2, "grp/sub/floats"
    options = _options(fault, tmp_path / "disk")
    with mounted(url, options, tag="warmdown1") as m:
        assert _warm(m.p("grp")).returncode == 0
        expected = expected_bytes(s3_data.oracle(url), "v2", path, m.p(path))
    fault.down("drop")
    with mounted(url, options, tag="warmdown2") as m:
        assert m.stats()["store_reachable"] == 0  # known at start: no read waits to learn it
        before = len(fault.requests)
        assert sorted(os.listdir(m.p("grp/sub"))) == ["floats"]
        assert read_all(m.p(path)) == expected
        assert m.stats()["store_reachable"] == 0 and m.stats()["store_outages"] == 1
        assert m.wait_for_log("mounting what the disk cache kept") is not None
        asked = {r.path for r in fault.requests[before:]}
        assert not any("floats" in p for p in asked), asked  # only the probes' root asks


def test_a_warm_with_the_store_down_fails_naming_what_it_missed(s3_data, fault, tmp_path):
    with mounted(s3_data.v2, _options(fault, tmp_path / "disk"), tag="warmfail") as m:
        os.listdir(m.p(""))
        fault.down("drop")
        done = _warm(m.p("ints"))
        assert done.returncode != 0
        assert "failed" in done.stdout, done.stdout
        assert "not fetched: ints" in done.stderr, done.stderr
        m.assert_alive()


def test_a_path_on_no_mount_of_ours_or_without_a_disk_cache_is_refused(s3_data, fault, tmp_path):
    done = _warm(os.fspath(tmp_path))
    assert done.returncode != 0
    assert "not on a zarrmount mount" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    with mounted(s3_data.v2, [f"so.endpoint_url={fault.url}"], tag="warmnodisk") as m:
        done = _warm(m.p("ints"))
        assert done.returncode != 0
        assert "no disk cache" in done.stderr, done.stderr
