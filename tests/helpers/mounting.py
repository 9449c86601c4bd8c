"""Start, watch and tear down real ``zarrmount`` processes.

Rules kept here so that no test has to remember them:

* the daemon is the ``zarrmount`` console script next to ``sys.executable`` (the venv);
* mountpoints are fresh directories under ``/tmp``;
* teardown always runs ``fusermount3 -u``, then ``fusermount3 -uz`` if the kernel still has
  the mount, then reaps the daemon and kills it *by its PID* only if it is still alive;
* "is it still mounted" is decided from ``/proc/self/mountinfo``, not ``os.path.ismount``:
  a FUSE mount whose daemon died answers ``lstat`` with ENOTCONN and ``ismount`` says False
  although the kernel still holds the mount.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MOUNT_TIMEOUT = 20.0
UNMOUNT_TIMEOUT = 15.0
FUSERMOUNT = shutil.which("fusermount3") or "fusermount3"
# Where daemon logs go; conftest points this at a pytest temporary directory.
LOG_DIR: str | None = None


class MountFailed(AssertionError):
    """The daemon exited or did not mount in time; the message carries its log."""


def zarrmount_exe() -> str:
    """The ``zarrmount`` console script of the interpreter running the tests."""
    # Do not resolve symlinks: .venv/bin/python links to the system interpreter.
    return str(Path(sys.executable).parent / "zarrmount")


def fuse_available() -> str | None:
    """``None`` when real mounts can be tried here, else the reason they cannot."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    if not os.path.exists(zarrmount_exe()):
        return f"{zarrmount_exe()} does not exist (project not installed in the venv?)"
    return None


def _unescape_mountinfo(field_text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field_text):
        c = field_text[i]
        if c == "\\" and i + 4 <= len(field_text) and field_text[i + 1 : i + 4].isdigit():
            out.append(chr(int(field_text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def kernel_mounts() -> list[tuple[str, str]]:
    """``(mountpoint, fstype)`` for every mount this process sees."""
    result = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mnt = _unescape_mountinfo(left.split()[4])
            fstype = right.split()[0] if right else ""
            result.append((mnt, fstype))
    return result


def is_mounted(path: str | os.PathLike) -> bool:
    """True while the kernel still has a mount at ``path`` (even a dead FUSE mount)."""
    p = os.path.realpath(os.fspath(path))
    return any(m == p for m, _ in kernel_mounts())


def fuse_mounts() -> list[str]:
    return [m for m, t in kernel_mounts() if t.startswith("fuse")]


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def _tail(path: str | os.PathLike, limit: int = 4000) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return f"<cannot read log {path}: {e}>"
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else "...\n" + text[-limit:]


def force_unmount(mountpoint: str | os.PathLike) -> None:
    """``fusermount3 -u``; if the kernel still has the mount, ``fusermount3 -uz``."""
    mnt = os.fspath(mountpoint)
    # (subprocess.run kills the fusermount3 it started if it hangs on a stuck daemon)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run([FUSERMOUNT, "-u", mnt], capture_output=True, timeout=15, check=False)
    if is_mounted(mnt):
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([FUSERMOUNT, "-uz", mnt], capture_output=True, timeout=15, check=False)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def pid_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def kill_pid_if_ours(pid: int, mountpoint: str) -> None:
    """SIGKILL ``pid`` only if it is alive and its command line names our mountpoint."""
    if pid <= 1 or not pid_alive(pid):
        return
    if mountpoint not in pid_cmdline(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), 5)


# Every mountpoint this process made: the end-of-session safety net touches only these
# (another test session may be running its own mounts at the same time).
_CREATED: list[str] = []


def new_mountpoint(tag: str = "mnt") -> str:
    mnt = tempfile.mkdtemp(prefix=f"zarrmount-it-{tag}-", dir="/tmp")
    _CREATED.append(mnt)
    return mnt


def cleanup_created_mountpoints() -> list[str]:
    """Unmount and remove what this process mounted and left behind; returns those paths."""
    leftovers = []
    for mnt in _CREATED:
        if is_mounted(mnt):
            leftovers.append(mnt)
            pids = find_daemon_pids(mnt)
            force_unmount(mnt)
            for pid in pids:
                wait_until(lambda pid=pid: not pid_alive(pid), 5)
                kill_pid_if_ours(pid, mnt)
        remove_mountpoint(mnt)
    return leftovers


def remove_journals_of(base: str | os.PathLike) -> list[str]:
    """Delete the default journals (rw mounts of local stores) of stores under ``base``:
    daemons the tests killed leave theirs for a next mount that never comes."""
    from zarrmount.journal import default_root  # where the daemon keeps them

    removed = []
    for directory in default_root().glob("*"):
        try:
            store = (directory / "store").read_text().strip()
        except OSError:
            continue
        if store.startswith(os.fspath(base) + os.sep):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(os.fspath(directory))
    return removed


def remove_mountpoint(mnt: str) -> None:
    if not is_mounted(mnt):
        with contextlib.suppress(OSError):
            os.rmdir(mnt)


@dataclass
class Mount:
    """A live foreground ``zarrmount -f`` process and its mount."""

    path: str
    log_path: str
    proc: subprocess.Popen
    source: str
    options: list[str] = field(default_factory=list)

    def __fspath__(self) -> str:
        return self.path

    def __iter__(self):
        """``mountpoint, log_path, proc = mount`` also works."""
        return iter((self.path, self.log_path, self.proc))

    def p(self, rel: str = "") -> str:
        """Absolute path of ``rel`` (a node path like ``a/b``) inside the mount."""
        return os.path.join(self.path, rel) if rel else self.path

    def read_log(self) -> str:
        return Path(self.log_path).read_bytes().decode("utf-8", "replace")

    def wait_for_log(self, needle: str, timeout: float = 5.0) -> str | None:
        """The first log line containing ``needle`` (waits a little for it), else None."""
        found: list[str] = []

        def check() -> bool:
            for line in self.read_log().splitlines():
                if needle in line:
                    found.append(line)
                    return True
            return False

        wait_until(check, timeout, 0.05)
        return found[0] if found else None

    def alive(self) -> bool:
        return self.proc.poll() is None and os.path.ismount(self.path)

    def assert_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"zarrmount daemon exited with {self.proc.returncode}; log:\n{_tail(self.log_path)}"
            )
        if not os.path.ismount(self.path):
            raise AssertionError(f"{self.path} is no longer mounted; log:\n{_tail(self.log_path)}")

    def stats(self) -> dict:
        import json

        return json.loads(os.getxattr(self.path, "user.zarrmount.stats"))

    def group_lists(self) -> int:
        """Listings of the store but those that revalidate an array's chunks (one each on
        an object store): what finding the hierarchy cost."""
        stats = self.stats()
        return stats["store_lists"] - stats["cache_revalidations"]


def stop_mount(mnt: str, proc: subprocess.Popen | None) -> None:
    """Teardown used by every mount: unmount, lazy-unmount if needed, reap, kill by PID."""
    try:
        force_unmount(mnt)
    finally:
        if proc is not None:
            try:
                proc.wait(timeout=UNMOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                # Only the process we started, by its PID.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        if is_mounted(mnt):
            force_unmount(mnt)
        remove_mountpoint(mnt)


@contextlib.contextmanager
def mounted(
    source: str | os.PathLike,
    options: Sequence[str] = (),
    *,
    debug: bool = False,
    log_path: str | os.PathLike | None = None,
    tag: str = "mnt",
    timeout: float = MOUNT_TIMEOUT,
    wrapper: Sequence[str] = (),
    sidecars: str | None = "none",
    env: dict[str, str] | None = None,
) -> Iterator[Mount]:
    """Run ``zarrmount SOURCE MNT -f [-d] [-o ...]`` until the mount is live; always tear down.
    ``wrapper`` prefixes the command (``prlimit --as=... --``: a limit for hostile data).
    ``sidecars``: the ``-o sidecars`` added unless ``options`` name one; ``none`` by default,
    as most tests compare the tree with zarr-python's members (None: the daemon's default).
    ``env``: variables added to the daemon's environment."""
    if sidecars is not None and not any(o.startswith("sidecars=") for o in options):
        options = [*options, f"sidecars={sidecars}"]
    mnt = new_mountpoint(tag)
    if log_path is None:
        fd, log_path = tempfile.mkstemp(
            prefix=f"zarrmount-it-{tag}-", suffix=".log", dir=LOG_DIR or tempfile.gettempdir()
        )
        os.close(fd)
    log_path = os.fspath(log_path)
    args = [*wrapper, zarrmount_exe(), os.fspath(source), mnt, "-f"]
    if debug:
        args.append("-d")
    if options:
        args += ["-o", ",".join(options)]
    proc = None
    with open(log_path, "ab") as logf:
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,
                env=None if env is None else {**os.environ, **env},
            )
            ok = wait_until(lambda: os.path.ismount(mnt) or proc.poll() is not None, timeout)
            if not os.path.ismount(mnt):
                why = (
                    f"exited with status {proc.returncode}"
                    if proc.poll() is not None
                    else f"did not mount within {timeout:.0f} s"
                    if not ok
                    else "did not mount"
                )
                raise MountFailed(f"zarrmount {' '.join(args[1:])} {why}; log:\n{_tail(log_path)}")
            yield Mount(mnt, log_path, proc, os.fspath(source), list(options))
        finally:
            stop_mount(mnt, proc)


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_cli(
    args: Sequence[str], timeout: float = 60.0, env: dict | None = None, cwd: str | None = None
) -> CliResult:
    """Run ``zarrmount ARGS`` with output to files, not pipes.

    A background daemon that (wrongly) kept our pipes open would make ``communicate`` hang;
    with files the command's own exit is what we wait for.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [zarrmount_exe(), *map(os.fspath, args)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return CliResult(
            rc,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
        )


@dataclass
class BackgroundMount:
    path: str
    pid: int | None
    result: CliResult


@contextlib.contextmanager
def background_mount(
    source: str | os.PathLike, options: Sequence[str] = (), *, tag: str = "bg"
) -> Iterator[BackgroundMount]:
    """``zarrmount SOURCE MNT [-o ...]`` without -f; tears down whatever it left behind."""
    mnt = new_mountpoint(tag)
    pid = None
    try:
        args = [os.fspath(source), mnt]
        if options:
            args += ["-o", ",".join(options)]
        res = run_cli(args, timeout=60)
        if os.path.ismount(mnt):
            with contextlib.suppress(OSError, ValueError):
                pid = int(os.getxattr(mnt, "user.zarrmount.pid").decode().strip())
        if pid is None:
            pid = find_daemon_pid(mnt)
        yield BackgroundMount(mnt, pid, res)
    finally:
        if pid is None:
            pid = find_daemon_pid(mnt)
        force_unmount(mnt)
        if pid is not None:
            wait_until(lambda: not pid_alive(pid), UNMOUNT_TIMEOUT)
            kill_pid_if_ours(pid, mnt)
        if is_mounted(mnt):
            force_unmount(mnt)
        remove_mountpoint(mnt)


def find_daemon_pids(mountpoint: str) -> list[int]:
    """PIDs of processes whose command line names this (unique, test-made) mountpoint."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        argv = pid_cmdline(int(entry))
        if mountpoint in argv and any("zarrmount" in a for a in argv[:3]) and pid_alive(int(entry)):
            found.append(int(entry))
    return sorted(found)


def find_daemon_pid(mountpoint: str) -> int | None:
    pids = find_daemon_pids(mountpoint)
    return pids[0] if pids else None


@contextlib.contextmanager
def mounted_formats(roots: dict[int, str], sidecars: str, tag: str) -> Iterator[dict[int, Mount]]:
    """One mount of each store in ``roots`` (Zarr format -> store), all live at once."""
    with contextlib.ExitStack() as stack:
        yield {
            fmt: stack.enter_context(mounted(root, sidecars=sidecars, tag=f"{tag}-v{fmt}"))
            for fmt, root in roots.items()
        }


def process_memory(pid: int, field: str = "VmHWM") -> int:
    """A ``/proc/PID/status`` memory figure (``VmHWM``: the peak resident set so far,
    ``VmRSS``: now) of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no {field} in /proc/{pid}/status")
