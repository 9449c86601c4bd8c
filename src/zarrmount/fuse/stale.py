"""Mounts left dead by a killed daemon (the kernel answers ENOTCONN at the mountpoint).
Found in the kernel's mount table by their type, ``fuse.zarrmount``, and their owner (a
mount of another user is never touched, nor asked anything), and cleared with a lazy
unmount, so that the next start (``Restart=on-failure``) can mount there again."""

from __future__ import annotations

import errno
import logging
import os
import subprocess

from zarrmount.fuse.records import MOUNTINFO, unescape

log = logging.getLogger(__name__)


def _ours(mountpoint: str) -> bool:
    """The mount on top at ``mountpoint`` is a zarrmount mount of this user."""
    found = False
    with open(MOUNTINFO) as f:
        for line in f:
            fields = line.split()
            if unescape(fields[4]) != mountpoint:
                continue
            tail = fields[fields.index("-") + 1 :]  # type, source, super options
            owner = f"user_id={os.geteuid()}"
            found = tail[0] == "fuse.zarrmount" and owner in tail[2].split(",")
    return found


def dead(mountpoint: str) -> bool:
    """A zarrmount mount of ours is at ``mountpoint`` and its daemon is gone."""
    if not _ours(mountpoint):
        return False
    try:  # opening asks the daemon (a stat may be answered from the kernel's cache)
        os.close(os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY))
    except OSError as e:
        return e.errno == errno.ENOTCONN
    return False


def clear(mountpoint: str) -> None:
    """Detach the dead mount at ``mountpoint`` (lazily: a process may still hold it)."""
    done = subprocess.run(["fusermount3", "-uz", mountpoint], capture_output=True, text=True)
    if done.returncode:
        raise OSError(done.stderr.strip() or f"fusermount3 -uz {mountpoint} failed")
    log.warning("cleared a dead zarrmount mount at %s (its daemon had gone)", mountpoint)
