"""Which daemon serves which mount: one record per mount, where only its user can write.

``zarrmount -u`` must not trust what a filesystem says about itself (any user can mount a
FUSE filesystem that names another process as its daemon). So the daemon writes a record
of its PID and its mount's ID, read from the kernel's mount table, into a directory owned
by its user with mode 0700; ``-u`` signals a PID only when a record made by its own user
names the mount ID the kernel shows at that mountpoint. Nothing here touches the mount.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat

log = logging.getLogger(__name__)

MOUNTINFO = "/proc/self/mountinfo"
_ESCAPE = re.compile(r"\\([0-7]{3})")


def runtime_dir(uid: int) -> str:
    """Root's records live in /run; a user's in their runtime directory."""
    if uid == 0:
        return "/run/zarrmount"
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}"
    if not os.path.isdir(base):
        base = f"/tmp/zarrmount-{uid}"
    return os.path.join(base, "zarrmount")


def _mounts() -> list[tuple[str, str]]:
    """``(mount ID, mount point)`` of every mount, in the kernel's order."""
    with open(MOUNTINFO) as f:
        rows = [line.split() for line in f]
    return [(r[0], unescape(r[4])) for r in rows]


def unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash octal)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_id(mountpoint: str) -> str | None:
    """The kernel's ID of the mount on top at ``mountpoint``, or None if none is there."""
    found = [ident for ident, point in _mounts() if point == mountpoint]
    return found[-1] if found else None  # later lines are mounted on top of earlier ones


def _prune(directory: str) -> None:
    """Remove the records of mounts that are gone (their daemon was killed)."""
    live = {ident for ident, _ in _mounts()}
    for name in os.listdir(directory):
        if name.endswith(".json") and name[: -len(".json")] not in live:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _private_dir(path: str, create: bool) -> bool:
    """True if ``path`` is a directory of ours that nobody else can write."""
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def write_record(mountpoint: str) -> str | None:
    """Record this process as the daemon of the mount at ``mountpoint``; the record's
    path, or None (logged) where it cannot be written: ``-u`` then only unmounts."""
    directory = runtime_dir(os.geteuid())
    ident = mount_id(mountpoint)
    try:
        if ident is None or not _private_dir(directory, create=True):
            raise OSError(f"{directory} is not a private directory")
        _prune(directory)
        path = os.path.join(directory, f"{ident}.json")
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "mountpoint": mountpoint, "mount_id": ident}, f)
        os.replace(tmp, path)
        return path
    except OSError as e:
        log.warning("no record of this mount for zarrmount -u (it will only unmount): %s", e)
        return None


def remove_record(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def find_daemon(mountpoint: str) -> int | None:
    """The PID of our user's live daemon serving ``mountpoint`` now, else None."""
    ident = mount_id(mountpoint)
    directory = runtime_dir(os.geteuid())
    if ident is None or not _private_dir(directory, create=False):
        return None
    try:
        with open(os.path.join(directory, f"{ident}.json")) as f:
            record = json.load(f)
        pid = int(record["pid"])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("mountpoint") != mountpoint or not any(b"zarrmount" in a for a in argv[:3]):
        return None
    return pid
