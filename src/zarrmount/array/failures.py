"""A read that meets a store or decoding failure: EIO for it, one log line with the key."""

from __future__ import annotations

import errno
import logging

from zarrmount.errors import FsError

log = logging.getLogger(__name__)


def failed(key: str, error: Exception) -> FsError:
    """The EIO of a read that met ``error`` at store key ``key``, logged once."""
    log.error("chunk %s: %s", key, error)
    return FsError(errno.EIO, f"chunk {key}: {error}")
