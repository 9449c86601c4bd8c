"""Open local files read straight into the caller's buffers (direct reads of chunks
stored as they are read): from the page cache on the caller's own thread, with
``RWF_NOWAIT``, so a read that would wait for the disk goes to a worker thread instead."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Sequence

from zarrmount.store.base import StoreError

log = logging.getLogger(__name__)

NOWAIT = getattr(os, "RWF_NOWAIT", 0)
# preadv takes at most this many buffers (IOV_MAX on Linux)
MOST_BUFFERS = 1024


class LocalFile:
    """One open regular file of a local store, its size when opened."""

    __slots__ = ("fd", "size", "key", "_nowait")

    def __init__(self, fd: int, size: int, key: str) -> None:
        self.fd, self.size, self.key = fd, size, key
        self._nowait = NOWAIT  # 0 once the file system has refused it

    def read_into(self, buffers: Sequence, offset: int, wait: bool) -> int | None:
        """Fill ``buffers`` with bytes from ``offset``; the count read (short at the
        file's end). Without ``wait``: None where that would wait for the disk (part of
        them may then hold the file's bytes)."""
        if not wait and not self._nowait:
            return None
        try:
            return os.preadv(self.fd, buffers, offset, 0 if wait else self._nowait)
        except BlockingIOError:
            return None
        except OSError as e:
            if not wait and e.errno == errno.EOPNOTSUPP:
                self._nowait = 0
                return None
            raise StoreError(f"{self.key}: {e.strerror}") from e

    def will_need(self) -> None:
        """The kernel starts reading the whole file from disk."""
        try:
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError as e:
            log.debug("%s: no read-ahead: %s", self.key, e)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
