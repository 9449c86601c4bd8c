"""One deadline for everything a kernel request waits for.

A read may revalidate a listing, load metadata and fetch several chunks, each retried:
with a deadline of its own each, a request could wait ``timeout`` several times over.
The FUSE adapter opens a request's deadline; every store call made on its behalf (in
its task, and in the worker threads it runs, which inherit the context) takes what is
left of it, never more than its own. Work nobody waits for (read-ahead) has none.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

# monotonic time by which the current kernel request must be answered (None: no request)
_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "zarrmount_request_deadline", default=None
)


@contextlib.contextmanager
def request(seconds: float | None) -> Iterator[None]:
    """Everything awaited inside shares one deadline ``seconds`` from now (None: none)."""
    token = _UNTIL.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _UNTIL.reset(token)


def detach() -> None:
    """The current task waits for no request (background work): no request's deadline."""
    _UNTIL.set(None)


def left(own_s: float) -> float:
    """Seconds a store call may take: its own deadline, or what is left of the request's
    if that is shorter (never below zero)."""
    until = _UNTIL.get()
    if until is None:
        return own_s
    return max(min(own_s, until - time.monotonic()), 0.0)
