"""The typed failures of stores, and which keys failed a moment ago.

A store that answered with an error (``StoreError``) and one that did not answer at all
(``Unreachable``: refused or reset connections, timeouts, an endpoint whose name does not
resolve) call for different things above: the second is an outage, during which what was
known is served (``store/health.py``, ``docs/cache.md``).

With the page cache the kernel sends a failed read again straight away; a key whose
fetch just ran into the deadline would make it wait a whole deadline a second time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FRESH_S = 5.0  # how long a failure counts as fresh


class StoreError(Exception):
    """A store operation failed for a reason other than a missing key."""


class Unreachable(StoreError):
    """The store gave no answer within the deadline: it is down, or the way to it is."""


class RecentFailures:
    """Keys whose fetch failed less than ``fresh_s`` seconds ago."""

    def __init__(
        self, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fresh_s = fresh_s
        self._clock = clock
        self._failed: dict[str, float] = {}  # key -> when it failed, oldest first

    def note(self, key: str) -> None:
        now = self._clock()
        self._failed.pop(key, None)
        self._failed[key] = now
        while self._failed:  # oldest first: drop the stale ones, stop at the first fresh
            old, at = next(iter(self._failed.items()))
            if now - at < self.fresh_s:
                break
            del self._failed[old]

    def is_fresh(self, key: str) -> bool:
        at = self._failed.get(key)
        return at is not None and self._clock() - at < self.fresh_s

    def forget(self, key: str) -> None:
        self._failed.pop(key, None)

    def __len__(self) -> int:
        return len(self._failed)
