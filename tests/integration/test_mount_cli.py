"""The command line: background mode, -u, -o options, failures, --inspect."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest
from helpers import rw_tools, zarrdata
from helpers.mounting import (
    background_mount,
    find_daemon_pid,
    find_daemon_pids,
    force_unmount,
    is_mounted,
    kernel_mounts,
    kill_pid_if_ours,
    new_mountpoint,
    pid_alive,
    remove_mountpoint,
    run_cli,
    wait_until,
    zarrmount_exe,
)
from helpers.oracle import assert_bytes_equal, compare_codecs, read_file

pytestmark = pytest.mark.mount


# --------------------------------------------------------------------------- background mode


def test_background_mount_returns_when_live_and_u_unmounts(main_hierarchy, tmp_path):
    log = tmp_path / "daemon.log"
    with background_mount(main_hierarchy.root, [f"log={log}"]) as bg:
        res = bg.result
        assert res.returncode == 0, f"rc={res.returncode} stderr={res.stderr!r}"
        # live the moment the command returned, no polling
        assert os.path.ismount(bg.path), "zarrmount returned 0 before the mount was live"
        assert bg.pid is not None and pid_alive(bg.pid)
        case = main_hierarchy.arrays["multi/m1"]
        assert_bytes_equal(read_file(os.path.join(bg.path, "multi/m1")), case.expected)

        un = run_cli(["-u", bg.path], timeout=60)
        assert un.returncode == 0, un.stderr
        assert not is_mounted(bg.path)
        # -u waits until the daemon exited (a zombie waiting for init counts as exited)
        assert not pid_alive(bg.pid), f"daemon {bg.pid} still running after -u returned"
    assert log.exists(), "-o log=PATH: the daemon wrote no log file"


def test_background_daemon_logs_to_log_option(bad_hierarchy, tmp_path):
    """``-o log=PATH``: the background daemon's log names a broken chunk's key."""
    log = tmp_path / "bad.log"
    fault = bad_hierarchy.faults["bad/truncated"]
    with background_mount(bad_hierarchy.root, [f"log={log}"]) as bg:
        assert bg.result.returncode == 0, bg.result.stderr
        fd = os.open(os.path.join(bg.path, fault.path), os.O_RDONLY | os.O_DIRECT)
        try:
            with pytest.raises(OSError) as e:
                os.pread(fd, 64, fault.bad_range[0])
            assert e.value.errno == errno.EIO
        finally:
            os.close(fd)
        found = wait_until(
            lambda: log.exists() and fault.bad_key in log.read_text("utf-8", "replace"), 5
        )
        un = run_cli(["-u", bg.path])
        assert un.returncode == 0, un.stderr
    assert found, (
        f"{fault.bad_key!r} not in {log}: {log.read_text() if log.exists() else '<missing>'}"
    )


def test_background_mount_does_not_hold_callers_pipes(main_hierarchy, scratch_mountpoint):
    """``out=$(zarrmount SRC MNT)`` must return: the daemon may not keep stdout/stderr open."""
    mnt = scratch_mountpoint
    proc = subprocess.Popen(
        [zarrmount_exe(), str(main_hierarchy.root), mnt],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        hung = True
        err = b""
        if proc.poll() is None:
            os.kill(proc.pid, 9)  # the command we started (by PID); the daemon: fixture
        # do not read to EOF again: the daemon still holds the write ends
        proc.stdout.close()
        proc.stderr.close()
        proc.wait(timeout=10)
    else:
        hung = False
    assert not hung, (
        "reading the command's stdout/stderr to EOF did not finish within 30 s: "
        f"the background daemon kept the pipes open (command rc={proc.returncode})"
    )
    assert proc.returncode == 0, err
    assert os.path.ismount(mnt)


def test_background_mount_with_relative_paths(main_hierarchy, tmp_path):
    """Relative SOURCE, MOUNTPOINT and log=PATH are relative to the caller's directory."""
    work = tmp_path / "cwd"
    work.mkdir()
    os.symlink(main_hierarchy.root, work / "src.zarr")
    (work / "mnt").mkdir()
    mnt = str(work / "mnt")
    pid = None
    try:
        res = run_cli(["src.zarr", "mnt", "-o", "log=rel.log"], cwd=str(work), timeout=60)
        if os.path.ismount(mnt):
            pid = int(os.getxattr(mnt, "user.zarrmount.pid"))
        assert res.returncode == 0, res.stderr
        assert os.path.ismount(mnt)
        case = main_hierarchy.arrays["multi/m4"]
        assert_bytes_equal(read_file(os.path.join(mnt, "multi/m4")), case.expected)
        un = run_cli(["-u", "mnt"], cwd=str(work), timeout=60)
        assert un.returncode == 0, un.stderr
        assert not is_mounted(mnt)
        assert (work / "rel.log").exists(), sorted(os.listdir(work))
    finally:
        pid = pid or find_daemon_pid(mnt)
        if is_mounted(mnt):
            force_unmount(mnt)
        if pid is not None:
            wait_until(lambda: not pid_alive(pid), 5)
            kill_pid_if_ours(pid, mnt)


def test_u_on_a_foreground_mount(mount_factory, main_hierarchy):
    m = mount_factory(main_hierarchy.root, tag="fgu")
    un = run_cli(["-u", m.path], timeout=60)
    assert un.returncode == 0, un.stderr
    assert not is_mounted(m.path)
    # -u waits until the daemon exited: it is already gone (a zombie we can reap)
    assert wait_until(lambda: m.proc.poll() is not None, 0.5), "daemon still running after -u"
    assert m.proc.returncode == 0, m.read_log()[-2000:]
    log = m.read_log()
    assert "unmount requested (zarrmount -u)" in log, log[-2000:]
    assert "SIG" not in log, log[-2000:]  # an unmount, not a kill


# --------------------------------------------------------------------------- failures


@pytest.fixture
def scratch_mountpoint():
    """A fresh empty dir under /tmp; afterwards: nothing mounted there, no daemon left."""
    mnt = new_mountpoint("fail")
    try:
        yield mnt
    finally:
        pid = find_daemon_pid(mnt)
        if is_mounted(mnt):
            force_unmount(mnt)
        if pid is not None:
            wait_until(lambda: not pid_alive(pid), 5)
            kill_pid_if_ours(pid, mnt)
        remove_mountpoint(mnt)


def assert_failed_cleanly(res, mnt: str, *, mention: str | None = None) -> None:
    assert res.returncode != 0, f"expected failure, got rc=0 (stderr={res.stderr!r})"
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected a one-line reason on stderr, got {res.stderr!r}"
    if mention is not None:
        assert mention in lines[0], f"{mention!r} not named in {lines[0]!r}"
    assert not is_mounted(mnt), "a failed zarrmount left a mount behind"
    assert wait_until(lambda: find_daemon_pid(mnt) is None, 5), "a daemon is still running"


@pytest.mark.parametrize("foreground", [False, True], ids=["background", "foreground"])
def test_unknown_option_fails_naming_it(main_hierarchy, scratch_mountpoint, foreground):
    args = [main_hierarchy.root, scratch_mountpoint, "-o", "ro,frobnicate_xyz=3"]
    if foreground:
        args.append("-f")
    res = run_cli(args, timeout=20)
    assert res.returncode != 0, res.stderr
    assert "frobnicate_xyz" in res.stderr, res.stderr
    assert not is_mounted(scratch_mountpoint)


def test_bad_cache_size_value_fails(main_hierarchy, scratch_mountpoint):
    res = run_cli([main_hierarchy.root, scratch_mountpoint, "-o", "cache_size=lots"], timeout=20)
    assert res.returncode != 0
    # the contract asks unknown options to be named; for a bad value, naming the option or
    # the value is enough
    assert "cache_size" in res.stderr or "lots" in res.stderr, res.stderr
    assert not is_mounted(scratch_mountpoint)


def test_nonexistent_source_fails_one_line(scratch_mountpoint, tmp_path):
    res = run_cli([tmp_path / "does-not-exist.zarr", scratch_mountpoint], timeout=30)
    assert_failed_cleanly(res, scratch_mountpoint)


def test_source_without_zarr_metadata_fails(scratch_mountpoint, tmp_path):
    (tmp_path / "empty").mkdir()
    res = run_cli([tmp_path / "empty", scratch_mountpoint], timeout=30)
    assert_failed_cleanly(res, scratch_mountpoint)


def test_unreadable_root_metadata_fails(scratch_mountpoint, tmp_path):
    src = tmp_path / "broken.zarr"
    src.mkdir()
    (src / ".zgroup").write_text('{"zarr_format": ')
    res = run_cli([src, scratch_mountpoint], timeout=30)
    assert_failed_cleanly(res, scratch_mountpoint)


def test_missing_mountpoint_fails(main_hierarchy, tmp_path):
    mnt = str(tmp_path / "no-such-dir")
    res = run_cli([main_hierarchy.root, mnt], timeout=30)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert not os.path.exists(mnt) or not is_mounted(mnt)


def test_mountpoint_is_a_file_fails(main_hierarchy, tmp_path):
    f = tmp_path / "plain-file"
    f.write_text("x")
    res = run_cli([main_hierarchy.root, f], timeout=30)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert not is_mounted(f)


def test_busy_mountpoint_fails(mount_factory, main_hierarchy):
    m = mount_factory(main_hierarchy.root, tag="busy")
    res = run_cli([main_hierarchy.root, m.path], timeout=30)
    try:
        assert res.returncode != 0, "mounting over a live zarrmount mount succeeded"
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        assert len(lines) == 1, res.stderr
        m.assert_alive()
        # the original mount still serves data
        case = main_hierarchy.arrays["multi/m1"]
        assert_bytes_equal(read_file(m.p("multi/m1")), case.expected)
    finally:
        # if it (wrongly) stacked a second mount, take that one down, and its daemon
        stacked = [pid for pid in find_daemon_pids(m.path) if pid != m.proc.pid]
        if len([mp for mp, _ in kernel_mounts() if mp == os.path.realpath(m.path)]) > 1:
            subprocess.run(["fusermount3", "-u", m.path], check=False, capture_output=True)
        for pid in stacked:
            wait_until(lambda pid=pid: not pid_alive(pid), 5)
            kill_pid_if_ours(pid, m.path)


# --------------------------------------------------------------------------- -o options


def test_small_cache_reads_large_arrays(mount_factory, main_hierarchy):
    m = mount_factory(main_hierarchy.root, ["ro", "cache_size=1M"], tag="small")
    for path in ("big/many_chunks", "big/one_chunk", "cache/probe"):
        case = main_hierarchy.arrays[path]
        assert case.nbytes > (1 << 20) or path == "cache/probe"
        assert_bytes_equal(read_file(m.p(path)), case.expected, case.dtype)
    # and again, uncached by the kernel, in an order that defeats any LRU
    case = main_hierarchy.arrays["big/many_chunks"]
    fd = os.open(m.p("big/many_chunks"), os.O_RDONLY | os.O_DIRECT)
    try:
        step = 300_001
        for off in list(range(0, case.nbytes, step))[::-1]:
            assert_bytes_equal(os.pread(fd, 70_000, off), case.expected[off : off + 70_000])
    finally:
        os.close(fd)
    m.assert_alive()


def test_uid_gid_umask(mount_factory, main_hierarchy):
    m = mount_factory(
        main_hierarchy.root, ["uid=1234", "gid=2345", "umask=027", "allow_other"], tag="owner"
    )
    with open("/proc/self/mountinfo") as f:
        info = [ln for ln in f if f" {m.path} " in ln]
    assert info and "allow_other" in info[0], info
    st = os.stat(m.p("multi/m1"))
    assert (st.st_uid, st.st_gid) == (1234, 2345)
    assert stat.S_IMODE(st.st_mode) == 0o444 & ~0o027 == 0o440, oct(st.st_mode)
    for d in ("", "g1", "g1/g2/g3"):
        st = os.stat(m.p(d))
        assert stat.S_ISDIR(st.st_mode)
        assert (st.st_uid, st.st_gid) == (1234, 2345), d
        assert stat.S_IMODE(st.st_mode) & 0o027 == 0, (d, oct(st.st_mode))
        assert stat.S_IMODE(st.st_mode) & 0o500 == 0o500, (d, oct(st.st_mode))


def test_foreground_debug_flag(mount_factory, main_hierarchy):
    """``-f -d`` mounts too, and logs (to stderr) while serving requests."""
    m = mount_factory(main_hierarchy.root, debug=True, tag="debug")
    case = main_hierarchy.arrays["edge/3d"]
    assert_bytes_equal(read_file(m.p("edge/3d")), case.expected)
    assert wait_until(lambda: len(m.read_log().strip()) > 0, 5), "-d: nothing logged"


def test_default_owner_and_mode(live_main):
    st = os.stat(live_main.p("multi/m1"))
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert stat.S_IMODE(st.st_mode) == 0o444


# --------------------------------------------------------------------------- --inspect


def test_inspect_json_matches_hierarchy(main_hierarchy):
    res = run_cli(["--inspect", main_hierarchy.root, "--json"], timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert isinstance(doc, dict) and isinstance(doc.get("nodes"), list)
    nodes = {n["path"]: n for n in doc["nodes"]}
    assert len(nodes) == len(doc["nodes"]), "duplicate paths"
    expected = {p: "group" for p in main_hierarchy.groups} | {
        p: "array" for p in main_hierarchy.arrays
    }
    assert set(nodes) == set(expected), (
        sorted(set(expected) - set(nodes))[:10],
        sorted(set(nodes) - set(expected))[:10],
    )
    problems = []
    for path, node in nodes.items():
        if node.get("type") != expected[path]:
            problems.append(f"{path}: type {node.get('type')!r}")
        if node.get("shown") is not True or "reason" in node:
            problems.append(f"{path}: shown={node.get('shown')!r} reason={node.get('reason')!r}")
        if expected[path] != "array":
            continue
        case = main_hierarchy.arrays[path]
        z = case.zarray
        if node.get("shape") != z["shape"]:
            problems.append(f"{path}: shape {node.get('shape')!r} != {z['shape']!r}")
        if node.get("chunks") != z["chunks"]:
            problems.append(f"{path}: chunks {node.get('chunks')!r} != {z['chunks']!r}")
        dt = node.get("dtype")
        try:
            if isinstance(dt, str) and dt.startswith("["):
                dt = json.loads(dt)  # structured: a descr list, possibly as JSON text
            ok = zarrdata.dtype_from_json(dt) == case.dtype
            if case.dtype.fields is None:
                ok = ok and dt == case.dtype.str
        except Exception:  # noqa: BLE001
            ok = False
        if not ok:
            problems.append(f"{path}: dtype {node.get('dtype')!r} != {case.dtype.str!r}")
        fv = node.get("fill_value", "<absent>")
        if fv != z["fill_value"] and not (
            isinstance(z["fill_value"], float)
            and isinstance(fv, int | float)
            and float(fv) == z["fill_value"]
        ):
            problems.append(f"{path}: fill_value {fv!r} != {z['fill_value']!r}")
        problems += compare_codecs(node.get("codecs"), z, f"{path}: codecs")
    assert not problems, "\n".join(problems[:40])


def _contains_run(seq: list[int], run: list[int], start: int = 0) -> int:
    """Index just after the first occurrence of ``run`` in ``seq[start:]``, or -1."""
    for i in range(start, len(seq) - len(run) + 1):
        if seq[i : i + len(run)] == run:
            return i + len(run)
    return -1


def test_inspect_text_shows_shape_dtype_chunks(main_hierarchy):
    res = run_cli(["--inspect", main_hierarchy.root], timeout=60)
    assert res.returncode == 0, res.stderr
    problems = []
    for path in ("multi/m1", "multi/m3", "big/one_chunk", "sep/slash_2d", "g1/g2/g3/leaf"):
        case = main_hierarchy.arrays[path]
        lines = [ln for ln in res.stdout.splitlines() if path in ln]
        if not lines:
            problems.append(f"{path}: not in the output")
            continue
        line = lines[0].replace(path, " ")
        names = {case.dtype.str, str(case.dtype), case.dtype.name}
        if not any(n in line for n in names):
            problems.append(f"{path}: dtype {case.dtype.str} not in {lines[0]!r}")
        for n in names:
            line = line.replace(n, " ")
        nums = [int(x) for x in re.findall(r"\d+", line)]
        after_shape = _contains_run(nums, list(case.shape))
        if after_shape < 0:
            problems.append(f"{path}: shape {case.shape} not in {lines[0]!r}")
        elif _contains_run(nums, list(case.chunks), after_shape) < 0:
            problems.append(f"{path}: chunks {case.chunks} not after the shape in {lines[0]!r}")
    assert not problems, "\n".join(problems)


def test_inspect_root_array(tmp_path):
    case = zarrdata.build_root_array(tmp_path / "r.zarr")
    res = run_cli(["--inspect", case.root, "--json"], timeout=60)
    assert res.returncode == 0, res.stderr
    nodes = json.loads(res.stdout)["nodes"]
    assert len(nodes) == 1
    node = nodes[0]
    assert node["path"] == "" and node["type"] == "array" and node["shown"] is True
    assert node["shape"] == [9, 10] and node["chunks"] == [4, 4] and node["dtype"] == ">f4"
    assert np.isnan(np.frombuffer(case.expected, ">f4")[-1])
    assert node["file"] == "array"
    # The text says where the mount shows it: the root array is the file MNT/array.
    text = run_cli(["--inspect", case.root], timeout=60)
    assert text.returncode == 0, text.stderr
    (line,) = text.stdout.splitlines()
    assert line.startswith("/ ") and " MNT/array " in line, line


def test_inspect_text_names_each_array_file(main_hierarchy):
    res = run_cli(["--inspect", main_hierarchy.root], timeout=60)
    assert res.returncode == 0, res.stderr
    lines = {ln.split("  ", 1)[0]: ln for ln in res.stdout.splitlines()}
    missing = [p for p in main_hierarchy.arrays if f" MNT/{p} " not in lines.get(p, "")]
    assert not missing, [lines.get(p) for p in missing[:5]]


def test_inspect_nonexistent_source_fails(tmp_path):
    res = run_cli(["--inspect", tmp_path / "nope.zarr", "--json"], timeout=30)
    assert res.returncode != 0
    assert res.stderr.strip()


# --------------------------------------------------------------------------- credentials


def test_credentials_appear_in_no_command_line_mount_table_or_log(main_hierarchy, tmp_path):
    secret = "S3CR3T-d0-not-leak"
    log = tmp_path / "daemon.log"
    options = [f"so.key={secret}", f"so.secret={secret}", f"log={log}"]
    with background_mount(main_hierarchy.root, options) as bg:
        assert bg.result.returncode == 0, bg.result.stderr
        with open(f"/proc/{bg.pid}/cmdline", "rb") as f:
            assert secret.encode() not in f.read()
        with open("/proc/self/mountinfo") as f:
            assert secret not in f.read()
        un = run_cli(["-u", bg.path], timeout=60)
        assert un.returncode == 0, un.stderr
    assert secret not in log.read_text()


def test_urls_lose_user_info_and_query_in_the_mount_table():
    from zarrmount.fuse.session import fuse_options
    from zarrmount.options import MountOptions

    opts = fuse_options("https://me:S3CR3T@host:9000/d.zarr?X-Amz-Signature=S3CR3T", MountOptions())
    fsname = next(o for o in opts if o.startswith("fsname="))
    assert "S3CR3T" not in fsname and "host:9000/d.zarr" in fsname, fsname


def test_u_signals_no_process_a_filesystem_names(tmp_path):
    """A FUSE filesystem anyone could mount claims an unrelated process as its daemon:
    -u must not signal it, and still unmounts."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "zarrmount"])
    mnt = new_mountpoint("liar")
    fake = os.path.join(os.path.dirname(zarrdata.__file__), "fake_fuse.py")
    liar = subprocess.Popen([sys.executable, fake, mnt, str(victim.pid)], stdout=subprocess.PIPE)
    try:
        assert liar.stdout.readline() == b"mounted\n"
        assert os.getxattr(mnt, "user.zarrmount.pid") == str(victim.pid).encode()
        res = run_cli(["-u", mnt], timeout=60)
        assert res.returncode == 0, res.stderr
        assert not is_mounted(mnt)
        assert victim.poll() is None, "zarrmount -u signalled the process the mount named"
    finally:
        victim.kill()
        victim.wait()
        if is_mounted(mnt):
            force_unmount(mnt)
        liar.kill()
        liar.wait()
        remove_mountpoint(mnt)


# --------------------------------------------------------------------------- mount(8)

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _zarrmount_on_root_path() -> None:
    """mount.fuse3 runs ``zarrmount`` from the standard PATH (scripts/setup-env links it
    there as root): skip unless that is this checkout's."""
    found = shutil.which("zarrmount", path=SAFE_PATH)
    if found is None or os.path.realpath(found) != os.path.realpath(zarrmount_exe()):
        pytest.skip(f"zarrmount on root's PATH is {found}, not this checkout's")


def _through_mount(source, mnt, options: str) -> subprocess.CompletedProcess:
    """``mount -t fuse.zarrmount``, as fstab and systemd .mount units do."""
    _zarrmount_on_root_path()
    return subprocess.run(
        ["mount", "-t", "fuse.zarrmount", str(source), mnt, "-o", options],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_fstab_line_mounts_and_umount_stores_what_was_written(tmp_path, scratch_mountpoint):
    """``mount -T FSTAB MOUNTPOINT``, as ``mount MOUNTPOINT`` does with /etc/fstab; the
    options systemd and mount(8) add pass; ``umount`` ends the daemon cleanly."""
    _zarrmount_on_root_path()
    store = rw_tools.make_store(tmp_path, "v3", rw_tools.SPECS["v3"])
    expected = store.read_bytes()
    options = "writable,writeback_delay=600,nofail,_netdev,x-systemd.automount,noatime"
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{store.root} {scratch_mountpoint} fuse.zarrmount {options} 0 0\n")
    done = subprocess.run(
        ["mount", "-T", str(fstab), scratch_mountpoint], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    path = os.path.join(scratch_mountpoint, "v3")
    pid = int(os.getxattr(scratch_mountpoint, "user.zarrmount.pid"))
    with open(path, "r+b") as f:
        f.seek(1000)
        f.write(b"\x11" * 3000)
    expected[1000:4000] = 0x11
    un = subprocess.run(["umount", scratch_mountpoint], capture_output=True, text=True)
    assert un.returncode == 0, un.stderr
    assert wait_until(lambda: not pid_alive(pid), 30), "the daemon outlived its mount"
    assert np.array_equal(store.read_bytes(), expected)


@pytest.mark.parametrize(
    "options,writable",
    [("cache_size=64M", False), ("rw", False), ("writable,cache_size=64M", True)],
)
def test_through_mount8_rw_needs_writable(tmp_path, scratch_mountpoint, options, writable):
    """mount(8) adds "rw" whenever "ro" is not given: only "writable" makes a mount so."""
    store = rw_tools.make_store(tmp_path, "v3", rw_tools.SPECS["v3"])
    done = _through_mount(store.root, scratch_mountpoint, options)
    assert done.returncode == 0, done.stderr
    try:
        path = os.path.join(scratch_mountpoint, "v3")
        if writable:
            os.close(os.open(path, os.O_RDWR))
        else:
            with pytest.raises(OSError) as e:
                os.open(path, os.O_RDWR)
            assert e.value.errno == errno.EROFS
            assert "read-write needs -o writable" in done.stderr
    finally:
        un = subprocess.run(["umount", scratch_mountpoint], capture_output=True, text=True)
        assert un.returncode == 0, un.stderr
