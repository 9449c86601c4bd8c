"""Sets the kernel read-ahead of our own mount: 1 MiB reads instead of 128 KiB ones.

The mount's device number comes from /proc/self/mountinfo, never from a stat of the
mountpoint, which would be a FUSE request to this very process.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal ``\\NNN``."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_device(mountpoint: str, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """``major:minor`` of the last mount at ``mountpoint``, or ``None``."""
    found = None
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and _unescape(fields[4]) == mountpoint:
                found = fields[2]
    return found


def set_read_ahead(mountpoint: str, kib: int) -> None:
    """Write ``kib`` to the mount's bdi ``read_ahead_kb``; without permission, log once."""
    try:
        device = mount_device(os.path.abspath(mountpoint))
        if device is None:
            log.warning("read_ahead_kb: %s not found in mountinfo", mountpoint)
            return
        with open(f"/sys/class/bdi/{device}/read_ahead_kb", "w") as f:
            f.write(str(kib))
        log.debug("read_ahead_kb of %s (%s) set to %d", mountpoint, device, kib)
    except OSError as e:
        log.warning("cannot set read_ahead_kb=%d (%s); reads stay at the kernel default", kib, e)
