"""Through the kernel: what a server's administrator relies on. systemd's notifications
(to a fake ``NOTIFY_SOCKET``), signals (SIGHUP reloads, SIGUSR1 logs statistics, SIGTERM
stores dirty data and exits 0, others are ignored), ``--stats``, ``--version``,
``file_mode``/``dir_mode``, ``log_level`` and a log file reopened after logrotate moved it.
Expected values come from zarr-python reading the store and from the workload itself."""

from __future__ import annotations

import contextlib
import errno
import importlib.metadata
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import memory_curve, rw_tools
from helpers.mounting import (
    mounted,
    new_mountpoint,
    process_memory,
    remove_mountpoint,
    run_cli,
    wait_until,
    zarrmount_exe,
)

pytestmark = pytest.mark.mount

WAIT_S = 30.0  # for an outcome that comes at once on a quiet machine


@pytest.fixture
def store(tmp_path):
    """A v3 group: ``a`` (4 chunks of 16 rows) and a group ``sub`` holding ``b``."""
    root = str(tmp_path / "data.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    group.create_array("a", shape=(64, 64), chunks=(16, 64), dtype="<f8")[...] = np.arange(
        64 * 64, dtype="<f8"
    ).reshape(64, 64)
    group.create_group("sub").create_array("b", shape=(5,), dtype="<i4")[:] = [1, 2, 3, 4, 5]
    return root


class Notifications:
    """A datagram socket standing for systemd's ``NOTIFY_SOCKET``: every message it gets,
    and whether the mount of ``source`` answered when ``READY=1`` came."""

    def __init__(self, path: str, source: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.path = path
        self.source = source
        self.messages: list[str] = []
        self.answered_when_ready: list[bool] = []
        self._stop = False
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(65536).decode()
            except TimeoutError:
                continue
            if "READY=1" in data.split("\n"):
                self.answered_when_ready.append(_answers(_mountpoint_of(self.source)))
            self.messages.append(data)

    def lines(self) -> list[str]:
        return [line for m in list(self.messages) for line in m.split("\n")]

    def wait_for(self, line: str, after: int = 0) -> int:
        """The index of the first message from ``after`` on holding ``line``."""
        found = wait_until(lambda: self._find(line, after) is not None, WAIT_S)
        assert found, (line, self.messages)
        return self._find(line, after)

    def _find(self, line: str, after: int) -> int | None:
        msgs = list(self.messages)
        return next((i for i in range(after, len(msgs)) if line in msgs[i].split("\n")), None)

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


def _mountpoint_of(source: str) -> str | None:
    """Where the kernel shows a zarrmount mount of ``source``, if anywhere."""
    with open("/proc/self/mounts") as f:
        for line in f:
            what, where, kind = line.split()[:3]
            if kind == "fuse.zarrmount" and what == source:
                return where
    return None


def _answers(mountpoint: str | None) -> bool:
    """The mount at ``mountpoint`` answers a request (it lists its root)."""
    try:
        return (
            mountpoint is not None and os.path.ismount(mountpoint) and bool(os.listdir(mountpoint))
        )
    except OSError:
        return False


@pytest.fixture
def notify(tmp_path, store):
    n = Notifications(str(tmp_path / "notify.sock"), store)
    yield n
    n.close()


def test_notify_ready_once_answering_status_reloading_and_stopping(store, notify):
    env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"}
    with mounted(store, tag="notify", env=env) as m:
        ready = notify.wait_for("READY=1")
        assert notify.answered_when_ready == [True]  # READY=1 only once the mount answers
        assert any(line.startswith("STATUS=") and "arrays" in line for line in notify.lines())
        notify.wait_for("WATCHDOG=1")
        m.proc.send_signal(signal.SIGHUP)
        reloading = notify.wait_for("RELOADING=1", ready + 1)
        notify.wait_for("READY=1", reloading)
        m.proc.send_signal(signal.SIGTERM)
        notify.wait_for("STOPPING=1", reloading)
        assert m.proc.wait(WAIT_S) == 0
        assert not os.path.ismount(m.path)


def test_sighup_shows_added_and_hides_removed_arrays_without_unmounting(store, tmp_path):
    with mounted(store, tag="reload") as m:
        assert sorted(os.listdir(m.p())) == ["a", "sub"]
        os.stat(m.p("sub/b"))  # the kernel now knows sub/b
        group = zarr.open_group(store, mode="a")
        group.create_array("new", shape=(3,), dtype="u1")[:] = [7, 8, 9]
        del group["sub/b"]
        group["a"].attrs["units"] = "m"
        m.proc.send_signal(signal.SIGHUP)
        assert m.wait_for_log("reloaded the hierarchy", WAIT_S)
        assert sorted(os.listdir(m.p())) == ["a", "new", "sub"]
        assert not os.path.exists(m.p("sub/b"))
        assert np.fromfile(m.p("new"), dtype="u1").tolist() == [7, 8, 9]
        assert json.loads(os.getxattr(m.p("a"), "user.zarr.attributes")) == {"units": "m"}
        expected = zarr.open_array(store, path="a", mode="r")[...]
        assert np.array_equal(np.fromfile(m.p("a"), dtype="<f8").reshape(64, 64), expected)
        log = m.read_log()
        assert "1 added (new)" in log and "1 removed (sub/b)" in log
        m.assert_alive()


def test_sigterm_stores_every_dirty_chunk_and_exits_0(store):
    with mounted(store, ["rw", "writeback_delay=600"], tag="sigterm") as m:
        fd = os.open(m.p("a"), os.O_WRONLY)
        try:
            os.write(fd, np.full(64 * 40, -1.0, dtype="<f8").tobytes())  # 3 chunks and a part
            m.proc.send_signal(signal.SIGTERM)  # the file still open: nothing closed or synced
            assert m.proc.wait(WAIT_S) == 0
        finally:
            with contextlib.suppress(OSError):  # the mount is gone
                os.close(fd)
    got = zarr.open_array(store, path="a", mode="r")[...]
    assert (got.reshape(-1)[: 64 * 40] == -1.0).all()
    assert got.reshape(-1)[64 * 40] == 64 * 40


def test_sigusr1_logs_statistics_and_other_signals_are_ignored(store):
    with mounted(store, tag="signals") as m:
        for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
            m.proc.send_signal(sig)
        assert m.wait_for_log("statistics: {", WAIT_S)
        assert m.wait_for_log("received SIGALRM: ignored", WAIT_S)
        assert m.wait_for_log("received SIGUSR2: ignored", WAIT_S)
        m.assert_alive()
        assert sorted(os.listdir(m.p())) == ["a", "sub"]


def test_stats_count_a_known_workload_exactly(store):
    with mounted(store, tag="stats") as m:
        with open(m.p("a"), "rb") as f:
            data = f.read()
        done = run_cli(["--stats", m.path, "--json"], timeout=WAIT_S)
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        assert stats["store_gets"] == 4 and stats["cache_misses"] == 4  # a's 4 chunks, once
        assert stats["read_bytes"] == len(data) == 64 * 64 * 8
        assert stats["requests_open"] >= 1 and stats["store_errors"] == 0
        text = run_cli(["--stats", m.path], timeout=WAIT_S)
        assert text.returncode == 0 and "misses 4" in text.stdout
    refused = run_cli(["--stats", os.path.dirname(m.path)], timeout=WAIT_S)
    assert refused.returncode != 0 and "no zarrmount daemon" in refused.stderr


def test_stats_report_the_daemons_memory(store):
    """What the kernel says of the daemon's resident set, and the allocators' figures."""
    with mounted(store, tag="stats-memory") as m:
        done = run_cli(["--stats", m.path, "--json"], timeout=WAIT_S)
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        rss = process_memory(m.proc.pid, "VmRSS")
        assert abs(stats["memory_rss_bytes"] - rss) < 64 << 20, (stats, rss)
        assert 0 < stats["memory_heap_bytes"] < rss
        assert stats["memory_python_blocks"] > 10_000  # a daemon's modules and objects
        text = run_cli(["--stats", m.path], timeout=WAIT_S)
        assert "memory: " in text.stdout and "rss bytes" in text.stdout, text.stdout
        assert "memory_python_traced_bytes" not in stats
        with pytest.raises(OSError) as e:
            os.getxattr(m.path, memory_curve.HEAP_XATTR)
        assert e.value.errno == errno.ENODATA


def test_a_tracing_daemon_names_its_largest_allocation_sites(store):
    """``PYTHONTRACEMALLOC=1``: what Python traces in the stats, and the lines holding most
    of it in the root's heap attribute (what a leak hunt compares over time)."""
    with mounted(store, tag="stats-heap", env=memory_curve.TRACING) as m:
        assert os.listdir(m.path)
        sites = json.loads(os.getxattr(m.path, memory_curve.HEAP_XATTR))
        traced = rw_tools.stats(m.path)["memory_python_traced_bytes"]
        assert 0 < traced < process_memory(m.proc.pid, "VmRSS")
        assert 0 < len(sites) <= 100
        assert sum(s["bytes"] for s in sites) <= traced
        assert any("/zarrmount/" in s["site"] for s in sites), sites
        assert all(s["site"].rsplit(":", 1)[1].isdigit() and s["blocks"] > 0 for s in sites)


def test_version_is_the_installed_one():
    done = subprocess.run([zarrmount_exe(), "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"zarrmount {importlib.metadata.version('zarrmount')}"


def test_file_and_dir_modes_before_umask(store):
    options = ["rw", "file_mode=664", "dir_mode=775", "umask=002", "sidecars=envi"]
    with mounted(store, options, tag="modes") as m:
        assert stat.S_IMODE(os.stat(m.p("a")).st_mode) == 0o664
        assert stat.S_IMODE(os.stat(m.p("a.hdr")).st_mode) == 0o444  # never writable
        assert stat.S_IMODE(os.stat(m.p("sub")).st_mode) == 0o775
    with mounted(store, ["file_mode=664", "umask=027"], tag="modes-ro") as m:
        assert stat.S_IMODE(os.stat(m.p("a")).st_mode) == 0o440  # read-only: no write bits


def test_log_level_and_a_log_file_reopened_after_logrotate_moved_it(store, tmp_path):
    log_path = tmp_path / "zarrmount.log"
    with mounted(store, [f"log={log_path}", "log_level=warning"], tag="logs") as m:
        os.listdir(m.p())
        assert " INFO " not in log_path.read_text()
    with mounted(store, [f"log={log_path}"], tag="logs") as m:
        log_path.rename(tmp_path / "zarrmount.log.1")  # as logrotate does
        m.proc.send_signal(signal.SIGUSR1)
        assert wait_until(
            lambda: log_path.exists() and "statistics" in log_path.read_text(), WAIT_S
        )
        assert "mounting" in (tmp_path / "zarrmount.log.1").read_text()


def test_start_and_stop_lines_name_version_and_options_never_credentials(store, tmp_path):
    log_path = tmp_path / "z.log"
    with mounted(store, [f"log={log_path}", "so.secret=S3CR3T,cache_size=64M"], tag="lines"):
        pass
    log = log_path.read_text()
    assert f"zarrmount {importlib.metadata.version('zarrmount')}: mounting" in log
    assert "cache_size=67108864" in log and "so.secret=(hidden)" in log
    assert "unmounted" in log and '"uptime_s"' in log
    assert "S3CR3T" not in log


def test_prometheus_endpoint_reports_a_known_workload_exactly(store):
    port = _free_port()
    with mounted(store, [f"metrics={port}"], tag="metrics") as m:
        with open(m.p("a"), "rb") as f:
            f.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S) as r:
            text = r.read().decode()
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["zarrmount_store_gets_total"] == 4  # a's 4 chunks, each read once
    assert values["zarrmount_cache_misses_total"] == 4
    assert values["zarrmount_read_bytes_total"] == 64 * 64 * 8
    assert values["zarrmount_read_seconds_count"] >= 1
    assert values["zarrmount_store_request_seconds_count"] >= 4
    assert 'zarrmount_read_seconds_bucket{le="+Inf"}' in values


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_under_journald_no_timestamps_and_no_line_per_read(store, tmp_path):
    """journald stamps lines itself: with stderr its stream (JOURNAL_STREAM names its
    device and inode) the daemon's lines carry none. Reads log nothing at the default
    level."""
    log_path = tmp_path / "journal.log"
    log_path.touch()
    st = os.stat(log_path)
    env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    with mounted(store, tag="journal", log_path=log_path, env=env) as m:
        assert m.wait_for_log("mounted", WAIT_S)
        before = m.read_log().count("\n")
        for _ in range(20):
            with open(m.p("a"), "rb") as f:
                f.read()
            with open(m.p("sub/b"), "rb") as f:
                f.read()
        assert m.read_log().count("\n") == before
    first = log_path.read_text().splitlines()[0]
    assert first.startswith("INFO zarrmount.cli: zarrmount "), first


def test_final_flush_asks_systemd_for_time_and_a_failed_one_exits_non_zero(store, notify):
    """Dirty data at SIGTERM: EXTEND_TIMEOUT_USEC while it is stored; a chunk that cannot
    be stored (its directory replaced by a file) makes the exit status non-zero, and the
    log names its key."""
    env = {"NOTIFY_SOCKET": notify.path}
    with mounted(store, ["rw", "writeback_delay=600"], tag="flushfail", env=env) as m:
        fd = os.open(m.p("a"), os.O_WRONLY)
        try:
            os.write(fd, b"\x01" * 64 * 8)  # row 0: chunk c/0/0
            blocked = os.path.join(store, "a", "c", "0")
            shutil.rmtree(blocked)
            with open(blocked, "w") as f:
                f.write("not a directory")
            m.proc.send_signal(signal.SIGTERM)
            assert m.proc.wait(WAIT_S) != 0
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        notify.wait_for("STOPPING=1")
        assert any(line.startswith("EXTEND_TIMEOUT_USEC=") for line in notify.lines())
        assert "c/0/0" in m.read_log()


def test_a_journal_replay_asks_systemd_for_time_before_ready(store, notify, tmp_path):
    """A killed daemon's acknowledged writes are replayed before READY=1, with
    EXTEND_TIMEOUT_USEC while that runs: a long replay does not time the start out."""
    journal = f"journal={tmp_path / 'journal'}"
    with mounted(store, ["rw", "writeback_delay=600", journal], tag="replay-kill") as m:
        fd = os.open(m.p("a"), os.O_WRONLY)
        try:
            os.write(fd, b"\x01" * 64 * 8)  # row 0, acknowledged, not stored
            m.proc.send_signal(signal.SIGKILL)
            assert m.proc.wait(WAIT_S) == -signal.SIGKILL
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    env = {"NOTIFY_SOCKET": notify.path}
    with mounted(store, ["rw", journal], tag="replay-ready", env=env):
        ready = notify.wait_for("READY=1")
        extend = next(i for i, m in enumerate(notify.messages) if "EXTEND_TIMEOUT_USEC=" in m)
        assert extend < ready, notify.messages
    row = zarr.open_array(store, path="a", mode="r")[0]
    assert row.tobytes() == b"\x01" * 64 * 8


def test_reload_status_says_what_changed(store, notify):
    with mounted(store, tag="reload-status", env={"NOTIFY_SOCKET": notify.path}) as m:
        first = notify.wait_for("READY=1")
        zarr.open_group(store, mode="a").create_array("more", shape=(2,), dtype="u1")
        m.proc.send_signal(signal.SIGHUP)
        reloading = notify.wait_for("RELOADING=1", first + 1)
        ready = notify.wait_for("READY=1", reloading)
        assert "STATUS=reloaded: 1 added (more)" in notify.messages[ready]


def test_without_syslog_a_background_daemon_logs_to_a_file_it_names(store):
    if os.path.exists("/dev/log"):
        pytest.skip("this machine has syslog: the daemon logs there")
    mnt = new_mountpoint("fallback")
    try:
        done = run_cli([store, mnt], timeout=WAIT_S)
        assert done.returncode == 0, done.stderr
        named = re.search(r"the daemon logs to (\S+)", done.stderr)
        assert named, done.stderr
        log = Path(named.group(1))
        assert "mounting" in log.read_text()
        assert run_cli(["-u", mnt], timeout=WAIT_S).returncode == 0
        assert "unmounted" in log.read_text()
    finally:
        remove_mountpoint(mnt)
