"""Where the daemon's log goes: stderr in the foreground (without timestamps under
journald, which adds its own), a file with ``-o log=PATH`` (reopened when logrotate moves
it), syslog otherwise; with no syslog either, a file in the runtime directory that the
command names when it starts the daemon. A log is never dropped in silence."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from zarrmount.fuse.records import runtime_dir
from zarrmount.options import MountOptions

SYSLOG_SOCKET = "/dev/log"
_STAMPED = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PLAIN = "%(levelname)s %(name)s: %(message)s"
_SYSLOG = "zarrmount[%(process)d]: %(levelname)s %(name)s: %(message)s"


def fallback_path(mountpoint: str) -> str:
    """The log of a background daemon on a machine without syslog."""
    name = mountpoint.strip("/").replace("/", "-") or "root"
    return os.path.join(runtime_dir(os.getuid()), f"{name}.log")


def needs_fallback(options: MountOptions) -> bool:
    """A background daemon with no ``log=`` and no syslog logs to :func:`fallback_path`."""
    return options.log_file is None and not os.path.exists(SYSLOG_SOCKET)


def _under_journald() -> bool:
    """stderr is journald's stream (systemd sets JOURNAL_STREAM to its device:inode)."""
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return os.environ.get("JOURNAL_STREAM") == f"{st.st_dev}:{st.st_ino}"


def setup(options: MountOptions, debug: bool, foreground: bool, mountpoint: str) -> str:
    """Send the log where it belongs; returns where that is."""
    handler: logging.Handler
    fmt = _STAMPED
    if options.log_file:
        handler, where = logging.handlers.WatchedFileHandler(options.log_file), options.log_file
    elif foreground:
        handler, where = logging.StreamHandler(sys.stderr), "stderr"
        fmt = _PLAIN if _under_journald() else _STAMPED
    elif not needs_fallback(options):
        handler, where, fmt = logging.handlers.SysLogHandler(SYSLOG_SOCKET), "syslog", _SYSLOG
    else:
        where = fallback_path(mountpoint)
        os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
        handler = logging.handlers.WatchedFileHandler(where)
    handler.setFormatter(logging.Formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else getattr(logging, options.log_level.upper()))
    if not debug:
        logging.getLogger("pyfuse3").setLevel(logging.WARNING)
    return where
