"""Readiness and stop notices: to the parent that spawned the daemon, and to systemd."""

from __future__ import annotations

import logging
import os
import signal
import socket

log = logging.getLogger(__name__)

# ``zarrmount -u`` asks the daemon to stop with this signal, so its log can tell an unmount
# from a kill (SIGTERM, SIGINT); a real-time one, as every classic signal has a meaning of
# its own (fuse/signals.py).
UNMOUNT_SIGNAL = signal.SIGRTMIN + 3


def sd_notify(message: str) -> None:
    """Send ``message`` (e.g. ``READY=1``) to systemd when it supervises us."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(message.encode(), address)
    except OSError as e:
        log.warning("cannot notify systemd: %s", e)


class ReadyPipe:
    """The write end of a pipe the background parent reads: ``ok`` or ``error: ...``."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def _send(self, line: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (line.replace("\n", " ") + "\n").encode())
            os.close(self.fd)
        except OSError:
            pass
        self.fd = None

    def ready(self) -> None:
        self._send("ok")
        sd_notify("READY=1")

    def failed(self, reason: str) -> None:
        self._send(f"error: {reason}")
