"""Whether a remote store answers, known once for the whole mount.

Without it every kernel request finds out for itself that the store is down, each after
a whole deadline of retries, and a shell or a unit on the mount hangs for minutes. Once
a request found no answer (``Unreachable``), the store is *unreachable*: requests that
need it fail at once while one probe every ``PROBE_S`` asks whether it is back, and what
is already held is served past its TTLs (``docs/cache.md``). Any answer, a probe's or a
request's still under way, ends the outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio

from zarrmount.store.failures import Unreachable

log = logging.getLogger(__name__)

PROBE_S = 2.0  # seconds between probes of an unreachable store
PROBE_DEADLINE_S = 2.0  # the most a probe waits for an answer


class Health:
    """Reachable, or unreachable since a time; told by every remote request's outcome."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down_since: float | None = None  # monotonic time the outage began
        self.down_since_ns = 0  # the same, wall clock (statistics)
        self.outages = 0
        self.every = PROBE_S  # between probes
        self._down = trio.Event()  # set while unreachable: wakes the prober

    @property
    def reachable(self) -> bool:
        return self.down_since is None

    def check(self) -> None:
        """Raise Unreachable at once while the store is down: no request waits for it."""
        if self.down_since is not None:
            since = time.monotonic() - self.down_since
            raise Unreachable(f"{self.url} is unreachable (for {since:.0f} s)")

    def failed(self, error: Unreachable) -> None:
        """A request got no answer: the outage begins (said once)."""
        if self.down_since is not None:
            return
        self.down_since, self.down_since_ns = time.monotonic(), time.time_ns()
        self.outages += 1
        self._down.set()
        log.error("store unreachable: %s; requests fail at once until it answers", error)

    def answered(self) -> None:
        """The store answered (a value, a missing key, an error of its own)."""
        if self.down_since is None:
            return
        length = time.monotonic() - self.down_since
        self.down_since, self.down_since_ns = None, 0
        self._down = trio.Event()
        log.warning("store reachable again after %.1f s: %s", length, self.url)

    async def watch(self, probe: Callable[[float], Awaitable[object]]) -> None:
        """Probe an unreachable store every PROBE_S (``probe(deadline_s)``, a small
        request that bypasses ``check``) until it answers; forever, as a session task."""
        while True:
            await self._down.wait()
            await trio.sleep(self.every)
            if self.reachable:
                continue  # a request under way got an answer meanwhile
            try:
                await probe(PROBE_DEADLINE_S)
            except Unreachable:
                continue
            except Exception as e:  # an answer, if an error: the store is there
                log.debug("probe of %s: %s", self.url, e)
            self.answered()

    def statistics(self) -> dict[str, int]:
        return {
            "store_reachable": int(self.reachable),
            "store_unreachable_since_s": self.down_since_ns // 1_000_000_000,
            "store_outages": self.outages,
        }

    def status(self) -> str:
        """For systemd's STATUS= line."""
        if self.down_since is None:
            return "store reachable"
        since = time.strftime("%H:%M:%S", time.localtime(self.down_since_ns / 1e9))
        return f"store UNREACHABLE since {since}"
