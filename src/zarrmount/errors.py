"""The one exception the FUSE adapter turns into an errno reply, and the command's."""

from __future__ import annotations

import errno
import os


class FsError(Exception):
    """A request fails with ``errno``; anything else escaping a handler is a bug (EIO)."""

    def __init__(self, err: int, message: str = "") -> None:
        super().__init__(message or os.strerror(err))
        self.errno = err


class Unavailable(FsError):
    """EIO for want of an answer from the store (an outage): whoever holds an earlier
    answer (a listing, metadata) serves it instead."""

    def __init__(self, message: str = "") -> None:
        super().__init__(errno.EIO, message)


def enoent(what: str = "") -> FsError:
    return FsError(errno.ENOENT, what)


class CommandError(Exception):
    """A one-line reason the command failed."""
