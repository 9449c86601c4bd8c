"""An S3 store that goes away and comes back, through a proxy on loopback (moto behind it).

The store is down in two ways: connections reset at once (``drop``: a server that is
gone) and requests that never get an answer (``stall``: a server or a path that hangs).
Through the kernel: the first request that needs the store fails with EIO and the
outage begins (one log line); while it lasts, requests that need the store fail without
sending anything (the proxy's log shows none for them), what was listed and read before
is served past its TTLs, and the statistics say the store is unreachable; once the store
answers again, reads succeed on their own (a probe finds it back) and the log says how
long the outage was. Expected bytes are zarr-python's.
"""

from __future__ import annotations

import errno
import os
import time

import pytest
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted, wait_until
from helpers.remote_servers import (  # noqa: F401 - fixtures
    expected_bytes,
    read_all,
    s3_data_fixture,
    s3_fixture,
)

pytestmark = pytest.mark.mount

TTL = 1  # seconds: the listings and chunks read before the outage are past it during it
BACK_S = 30  # the most a test waits for reads to come back once the store is there


proxy = fault_proxy_fixture()
fault = fault_fixture()


@pytest.fixture(scope="module")
def oracle(s3_data):
    return s3_data.oracle(s3_data.v2)


def _options(fault, *more: str) -> list[str]:
    return [f"so.endpoint_url={fault.url}", "timeout=4", f"metadata_ttl={TTL}", *more]


def _read_error(path: str) -> int | None:
    """The errno a whole read of ``path`` fails with (None: it succeeded)."""
    try:
        read_all(path)
    except OSError as e:
        return e.errno
    return None


def _past_ttl() -> None:
    """Let every TTL of the mount run out (an outcome, not a race: nothing waits on it)."""
    time.sleep(TTL + 0.5)


@pytest.mark.parametrize("down", ["drop", "stall"])
def test_outage_serves_what_is_known_and_ends_on_its_own(s3_data, fault, oracle, tmp_path, down):
    with mounted(s3_data.v2, _options(fault), tag=f"out{down}") as m:
        ints = expected_bytes(oracle, "v2", "ints", m.p("ints"))
        listed = sorted(os.listdir(m.p("grp/sub")))
        assert read_all(m.p("ints")) == ints  # held in the chunk cache from now on
        assert m.stats()["store_reachable"] == 1

        fault.down(down)
        assert _read_error(m.p("fortran")) == errno.EIO  # the request that finds it down
        assert m.wait_for_log("store unreachable") is not None
        _past_ttl()
        before = len(fault.requests)

        # known: listings and cached chunks, past their TTLs
        assert sorted(os.listdir(m.p("grp/sub"))) == listed
        with open(m.p("ints"), "rb") as f:  # no page cache: the daemon answers
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            assert f.read() == ints
        # unknown: fails at once, nothing sent for it
        assert _read_error(m.p("bigend")) == errno.EIO
        sent = [r for r in fault.requests[before:] if "bigend" in r.path]
        assert not sent, sent
        stats = m.stats()
        assert stats["store_reachable"] == 0 and stats["store_outages"] == 1, stats
        assert stats["store_unreachable_since_s"] > 0
        assert stats["cache_served_stale"] >= 1, stats

        fault.set("pass")
        assert wait_until(lambda: _read_error(m.p("bigend")) is None, BACK_S, 0.2)
        assert read_all(m.p("bigend")) == expected_bytes(oracle, "v2", "bigend", m.p("bigend"))
        assert m.stats()["store_reachable"] == 1
        back = m.wait_for_log("store reachable again after")
        assert back is not None, m.read_log()[-3000:]
        assert len([ln for ln in m.read_log().splitlines() if "store unreachable:" in ln]) == 1
        m.assert_alive()


def test_disk_cache_serves_a_fresh_mount_through_an_outage(s3_data, fault, oracle, tmp_path):
    """Chunks a first mount kept on disk are read by a second one while the store is down
    (whatever their version: nothing can be checked), and equal zarr-python's."""
    options = _options(fault, f"disk_cache={tmp_path / 'disk'}")
    with mounted(s3_data.v2, options, tag="outdisk1") as m:
        floats = read_all(m.p("grp/sub/floats"))
    with mounted(s3_data.v2, options, tag="outdisk2") as m:
        os.listdir(m.p("grp/sub"))  # listed while the store is there
        fault.down("drop")
        assert read_all(m.p("grp/sub/floats")) == floats
        assert floats == expected_bytes(oracle, "v2", "grp/sub/floats", m.p("grp/sub/floats"))
        assert _read_error(m.p("ints")) == errno.EIO  # never kept: fails
        assert m.stats()["disk_cache_hits"] > 0
