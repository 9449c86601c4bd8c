"""The decoding threads every array of a mount shares, kept warm between reads."""

from __future__ import annotations

import contextlib
import os
import threading
import time

import trio

# How often idle decoding threads are given work, well within trio's idle timeout (10 s).
KEEP_DECODERS_S = 4.0


def usable_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the
    machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 2


class Decoders:
    """A limiter of decoding worker threads (one per usable core, at least two)."""

    def __init__(self, threads: int | None = None) -> None:
        self.limiter = trio.CapacityLimiter(threads or max(2, usable_cores()))
        self.decode_ns = 0  # time chunks took to decode, in any thread (statistics)

    @contextlib.contextmanager
    def timed(self):
        """Count the time of a decode (racing threads may lose a little of it)."""
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.decode_ns += time.perf_counter_ns() - start

    @property
    def threads(self) -> int:
        return int(self.limiter.total_tokens)

    async def run(self, fn, *args):
        """``fn(*args)`` in a decoding thread."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    async def keep_alive(self, period: float = KEEP_DECODERS_S) -> None:
        """Give each decoding thread a moment of work every ``period`` seconds, forever.

        trio ends worker threads idle for about 10 s; a new thread has no scratch buffer
        and its first decode is slow, which a first read after a quiet spell would pay
        (measured: 32 ms instead of 10 ms). The barrier makes the jobs land on distinct
        threads.
        """
        while True:
            await trio.sleep(period)
            if self.limiter.borrowed_tokens:
                continue  # decoding: the threads are alive
            barrier = threading.Barrier(self.threads)
            async with trio.open_nursery() as nursery:
                for _ in range(self.threads):
                    nursery.start_soon(self._meet, barrier)

    async def _meet(self, barrier: threading.Barrier) -> None:
        def meet() -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=0.05)  # a decode started meanwhile: that one is warm

        await self.run(meet)
