"""Whether a remote store answers, known once for the whole mount.

Without it every kernel request finds out for itself that the store is down, each after
a whole deadline of retries, and a shell or a unit on the mount hangs for minutes. Once
a request found no answer (``Unreachable``), the store is *unreachable*: requests that
need it fail within a probe's deadline at most (at once between probes) while one probe
every ``PROBE_S`` asks whether it is back, and what is already held is served past its
TTLs (``docs/cache.md``). Any answer, a probe's or a request's still under way, ends the
outage.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

import trio

from zarrmount.store.failures import Unreachable

log = logging.getLogger(__name__)

PROBE_S = 2.0  # seconds between probes of an unreachable store
PROBE_DEADLINE_S = 1.0  # the most a probe waits for an answer


class Health:
    """Reachable, or unreachable since a time; told by every remote request's outcome.

    While unreachable, a request that needs the store waits for the probe under way, or
    starts one if none ended in the last ``every`` seconds, else fails at once: a store
    that was only slow for one request (a stalled object) is found answering by the
    next request's probe, one that is down costs each request no more than a probe, and
    the store is asked no more than once every ``every`` seconds.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.down_since: float | None = None  # monotonic time the outage began
        self.down_since_ns = 0  # the same, wall clock (statistics)
        self.outages = 0
        self.every = PROBE_S  # between probes
        # ``probe(deadline_s)``: the smallest request that shows the store answers, which
        # bypasses ``check`` (AsyncStore gives it)
        self.probe: Callable[[float], Awaitable[object]] | None = None
        self._down = trio.Event()  # set while unreachable: wakes the prober
        self._probing: trio.Event | None = None  # set when the probe under way ends
        self._probed_at = -math.inf  # monotonic time the last probe ended

    @property
    def reachable(self) -> bool:
        return self.down_since is None

    async def check(self) -> None:
        """Return once the store is known to answer; raise Unreachable while it is down
        (after the probe under way or one begun now, or at once: see the class)."""
        if self.down_since is None:
            return
        if self._probing is not None:
            await self._probing.wait()
        elif self._probe_due():
            await self._probe_now()
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

    def _probe_due(self) -> bool:
        """No probe under way, and none ended in the last ``every`` seconds."""
        return self._probing is None and time.monotonic() - self._probed_at >= self.every

    async def _probe_now(self) -> None:
        """One probe; those who ask meanwhile wait for its outcome."""
        self._probing = probing = trio.Event()
        try:
            await self.probe(PROBE_DEADLINE_S)
        except Exception as e:  # only a value (or a missing key) says it is back
            log.debug("probe of %s: %s", self.url, e)
            return
        finally:
            self._probed_at = time.monotonic()
            self._probing = None
            probing.set()
        self.answered()

    async def watch(self) -> None:
        """Probe an unreachable store every ``every`` seconds until it answers, so reads
        come back on their own; forever, as a session task."""
        while True:
            await self._down.wait()
            await trio.sleep(max(self._probed_at + self.every - time.monotonic(), 0.01))
            if self.down_since is not None and self._probe_due():
                await self._probe_now()

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
