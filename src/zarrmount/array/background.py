"""Where work nobody waits for runs (prefetch, follow-up loads)."""

from __future__ import annotations

import trio

from zarrmount.store import deadline


class Background:
    """Where work nobody waits for runs: the mount session's nursery, once it has one."""

    def __init__(self) -> None:
        self.nursery: trio.Nursery | None = None

    def start_soon(self, fn, *args) -> bool:
        """Start ``fn(*args)`` there; False (and nothing runs) before the session has one."""
        if self.nursery is None:
            return False
        self.nursery.start_soon(_detached, fn, *args)
        return True


async def _detached(fn, *args) -> None:
    """``fn(*args)``, bound by no request's deadline: nobody waits for it (a read-ahead
    started by a request near its deadline would otherwise fail with it)."""
    deadline.detach()
    await fn(*args)
