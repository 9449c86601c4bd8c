"""Where work nobody waits for runs (prefetch, follow-up loads)."""

from __future__ import annotations

import trio


class Background:
    """Where work nobody waits for runs: the mount session's nursery, once it has one."""

    def __init__(self) -> None:
        self.nursery: trio.Nursery | None = None

    def start_soon(self, fn, *args) -> bool:
        """Start ``fn(*args)`` there; False (and nothing runs) before the session has one."""
        if self.nursery is None:
            return False
        self.nursery.start_soon(fn, *args)
        return True
