"""``zarrmount -u`` and ``--cleanup``: stop the daemon of a mount (it stores dirty data
first) and wait for it, or clear a dead mount a killed daemon left."""

from __future__ import annotations

import os
import subprocess
import time

from zarrmount.errors import CommandError
from zarrmount.fuse import records, stale
from zarrmount.fuse.notify import UNMOUNT_SIGNAL

UNMOUNT_TIMEOUT_S = 300.0  # as long as the unit waits: a final flush to a remote store


def cleanup(mountpoint: str) -> int:
    """Clear a dead zarrmount mount of ours at ``mountpoint``; nothing else is touched."""
    if stale.dead(mountpoint):
        _clear(mountpoint)
    return 0


def _clear(mountpoint: str) -> None:
    try:
        stale.clear(mountpoint)
    except OSError as e:
        raise CommandError(f"cannot clear the dead mount at {mountpoint}: {e}") from None


def unmount(mountpoint: str) -> int:
    """Ask the daemon to flush and unmount, then wait until it has exited. Only a daemon
    our own record names is signalled (the mount itself is never asked); any other mount
    is left to fusermount3, which checks who may unmount it."""
    mountpoint = os.path.abspath(mountpoint)
    if stale.dead(mountpoint):
        _clear(mountpoint)
        return 0
    if records.mount_id(mountpoint) is None:
        raise CommandError(f"{mountpoint} is not mounted")
    pid = records.find_daemon(mountpoint)
    try:
        if pid is not None:
            os.kill(pid, UNMOUNT_SIGNAL)
    except OSError:  # not ours to signal: let fusermount3 decide
        pid = None
    if pid is None:
        done = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True)
        if done.returncode:
            raise CommandError(done.stderr.strip() or f"cannot unmount {mountpoint}")
        return 0
    deadline = time.monotonic() + UNMOUNT_TIMEOUT_S
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        if _is_zombie(pid):
            break
        time.sleep(0.02)
    if os.path.exists(f"/proc/{pid}") and not _is_zombie(pid):
        raise CommandError(f"the daemon (pid {pid}) did not exit within {UNMOUNT_TIMEOUT_S:.0f} s")
    return 0


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
