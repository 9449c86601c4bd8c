"""Which store errors are worth retrying, and the backoff between tries.

Object stores fail transiently (timeouts, resets, 5xx, throttling); those are retried
with exponential backoff and full jitter until a deadline. Permanent errors (403, 404,
bad requests, 501 and other things the server cannot do) are not: retrying them only
delays the error the user needs to see.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

BASE_DELAY_S = 0.05
MAX_DELAY_S = 2.0
# Configuration errors of a backend, by class name (no backend is imported here): the
# credentials are missing or half given, and no second try finds them.
PERMANENT_NAMES = {"NoCredentialsError", "PartialCredentialsError", "ProfileNotFound"}
# Errors a backend raises with no status, told by their text: gcsfs's 403 is an OSError
# whose message begins so.
PERMANENT_TEXTS = ("Forbidden",)


class Permanent(Exception):
    """A failure no second try changes: the backend retried it already, or refused it."""


def _status(error: BaseException) -> int | None:
    """The HTTP status an fsspec backend attached to ``error``, or to the error it was
    translated from (s3fs turns a 503 into a plain OSError, the response its cause)."""
    for seen in (error, error.__cause__):
        status = None if seen is None else _own_status(seen)
        if status is not None:
            return status
    return None


def _own_status(error: BaseException) -> int | None:
    for attr in ("status", "status_code", "code"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        meta = response.get("ResponseMetadata", {})
        if isinstance(meta.get("HTTPStatusCode"), int):
            return meta["HTTPStatusCode"]
    return None


def is_transient(error: BaseException) -> bool:
    if isinstance(
        error,
        Permanent
        | FileNotFoundError
        | PermissionError
        | IsADirectoryError
        | NotADirectoryError
        | ValueError
        | TypeError
        | KeyError
        | NotImplementedError,
    ) or any(cls.__name__ in PERMANENT_NAMES for cls in type(error).__mro__):
        return False
    if str(error).startswith(PERMANENT_TEXTS):
        return False
    status = _status(error)
    if status is not None:
        # 501 Not Implemented, 505 HTTP Version Not Supported: the same on every try.
        return (status >= 500 and status not in (501, 505)) or status in (408, 429)
    # Timeouts, resets, refused connections and unknown backend errors: try again.
    return True


def is_unreachable(error: BaseException) -> bool:
    """No answer came: a transient failure with no HTTP status (refused or reset
    connections, timeouts, a name that does not resolve), not a server's error reply."""
    return is_transient(error) and _status(error) is None


def with_retries(
    fn: Callable[[float], T],
    what: str,
    deadline_s: float,
    on_retry: Callable[[], None] = lambda: None,
) -> T:
    """Call ``fn`` until it succeeds, fails permanently, or ``deadline_s`` has passed;
    ``on_retry`` is called before each new try (statistics).

    ``fn`` gets the seconds left, so that a backend that can cancel a request stops it
    at the deadline rather than leaving it to its own, longer, timeouts.
    """
    start = time.monotonic()
    attempt = 0
    while True:
        try:
            return fn(max(deadline_s - (time.monotonic() - start), 0.0))
        except Exception as e:
            attempt += 1
            delay = random.uniform(0, min(MAX_DELAY_S, BASE_DELAY_S * 2**attempt))
            elapsed = time.monotonic() - start
            if not is_transient(e) or elapsed + delay >= deadline_s:
                raise
            log.warning("%s: %s (attempt %d, retrying)", what, e or type(e).__name__, attempt)
            on_retry()
            time.sleep(delay)
