"""Arrays fetched into the disk cache ahead of need (``zarrmount warm``): a batch job
then reads them at local speed, and through an outage.

One job per mount at a time, in the background: the arrays' stored units are listed with
their validators (the listing their revalidation uses, so the next read finds the
entries), and each unit the disk cache does not hold for its validator is fetched, many
at once within the store's limit, and kept as reads will ask for it (a chunk whole; a
shard's index and each inner chunk). Nothing is decoded, nothing enters the memory
cache. Arrays asked for while a job runs join it.
"""

from __future__ import annotations

import errno
import json
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

import trio

from zarrmount.array import Arrays
from zarrmount.array.grid import Coords
from zarrmount.array.source import ChunkSource, whole_object
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayNode
from zarrmount.store import StoreError

log = logging.getLogger(__name__)

# Failures named in the progress at most (the count goes on): an attribute's value is
# at most 64 KiB.
FAILED_SHOWN = 20
# The most bytes of stored units held at once, fetched and not yet on disk.
IN_FLIGHT_BYTES = 256 << 20
# Arrays listed at once (a listing is a request per thousand keys).
LISTINGS = 8

Resolve = Callable[[], Awaitable[list[ArrayNode]]]  # the arrays at and below a node


@dataclass
class Progress:
    """What a job has done so far, as ``zarrmount warm`` shows it."""

    arrays: int = 0
    units: int = 0  # stored units listed so far
    done: int = 0  # of those: fetched, found on disk already, or failed
    held: int = 0  # found on disk already
    bytes: int = 0  # fetched and kept
    failures: int = 0
    failed: list[str] = field(default_factory=list)  # the first FAILED_SHOWN, with why
    finished: bool = False

    def fail(self, what: str, why: Exception) -> None:
        self.failures += 1
        if len(self.failed) < FAILED_SHOWN:
            self.failed.append(f"{what}: {why}")


@dataclass
class _Array:
    """One array of a job: its chunk source, and how many of its units may be in flight."""

    source: ChunkSource
    limiter: trio.CapacityLimiter


class Warming:
    """The mount's warm job: arrays asked for while it runs join it (their units
    fetched once the ones before are), a new one starts once it finished. ``refused``:
    why this mount has nothing to warm (no disk cache, a local store)."""

    def __init__(self, arrays: Arrays, refused: str | None) -> None:
        self.arrays = arrays
        self.refused = refused
        self.progress: Progress | None = None
        self._pending: list[tuple[str, Resolve]] = []
        self._seen: set[str] = set()  # arrays the job has taken already

    def add(self, name: str, resolve: Resolve) -> bytes:
        """Warm the arrays ``resolve()`` gives (those at and below ``name``)."""
        if self.refused is not None:
            raise FsError(errno.EOPNOTSUPP, self.refused)
        self._pending.append((name, resolve))
        if self.progress is not None and not self.progress.finished:
            return b"joined"
        progress = Progress()
        if not self.arrays.shared.background.start_soon(self._run, progress):
            self._pending.clear()
            raise FsError(errno.EAGAIN, "the mount is not serving yet")
        self.progress, self._seen = progress, set()
        return b"started"

    def report(self) -> bytes:
        """The last job's progress as JSON (``refused``: why there can be none)."""
        found = asdict(self.progress) if self.progress is not None else {"finished": True}
        return json.dumps({**found, "refused": self.refused}).encode()

    async def _run(self, progress: Progress) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                log.info("warm: %s", ", ".join(name or "/" for name, _ in batch))
                nodes = await self._nodes(batch, progress)
                progress.arrays += len(nodes)
                await self._fetch_all(nodes, progress)
        except Exception as e:  # nobody waits for it: the progress says it
            log.exception("warm: failed")
            progress.fail("warm", e)
        finally:
            self._pending.clear()
            progress.finished = True
        mib = progress.bytes / (1 << 20)
        log.info(
            "warm: %d units, %.1f MiB fetched, %d failed", progress.done, mib, progress.failures
        )

    async def _nodes(self, batch: list[tuple[str, Resolve]], progress: Progress) -> list[ArrayNode]:
        """The arrays of ``batch`` the job has not taken yet."""
        found: dict[str, ArrayNode] = {}
        for name, resolve in batch:
            try:
                found.update((node.path, node) for node in await resolve())
            except FsError as e:
                progress.fail(name or "/", e)
        new = [node for path, node in found.items() if path not in self._seen]
        self._seen.update(found)
        return new

    async def _fetch_all(self, nodes: list[ArrayNode], progress: Progress) -> None:
        """Each array listed (a few at once), its units fetched by workers as many as the
        store's limit."""
        store = self.arrays.shared.store
        send, receive = trio.open_memory_channel(store.concurrency)
        listings = trio.CapacityLimiter(LISTINGS)
        async with trio.open_nursery() as nursery:
            for _ in range(store.concurrency):
                nursery.start_soon(self._worker, receive.clone(), progress)
            async with send, receive, trio.open_nursery() as listing:
                for node in nodes:
                    listing.start_soon(self._list, node, send.clone(), listings, progress)

    async def _list(
        self, node: ArrayNode, send: trio.MemorySendChannel, listings, progress: Progress
    ) -> None:
        async with send:
            try:
                async with listings:
                    array = self._array(node)
                    units = await array.source.revalidation.listed(
                        array.source.path, array.source.grid
                    )
                if units is None:
                    raise StoreError("too many stored units to list, or a store that lists none")
            except (FsError, StoreError) as e:
                progress.fail(node.path or "/", e)
                return
            progress.units += len(units)
            missing = await trio.to_thread.run_sync(_missing, array.source, units)
            progress.held += len(units) - len(missing)
            progress.done += len(units) - len(missing)
            for unit, validator in missing:
                await send.send((array, unit, validator))

    def _array(self, node: ArrayNode) -> _Array:
        shared = self.arrays.shared
        source = ChunkSource(node, self.arrays.pipeline(node), shared)
        per_unit = math.prod(source.grid.per_unit) * node.meta.chunk_nbytes
        width = min(shared.store.concurrency, max(1, IN_FLIGHT_BYTES // max(per_unit, 1)))
        return _Array(source, trio.CapacityLimiter(width))

    async def _worker(self, receive: trio.MemoryReceiveChannel, progress: Progress) -> None:
        async with receive:
            async for array, unit, validator in receive:
                async with array.limiter:
                    await self._unit(array.source, unit, validator, progress)
                progress.done += 1

    async def _unit(
        self, source: ChunkSource, unit: Coords, validator: str, progress: Progress
    ) -> None:
        """Keep ``unit`` on disk as of ``validator``."""
        store, key = source.store, source.grid.key(unit)
        sharded = source.grid.sharding is not None
        try:
            raw = await store.get(key)
        except StoreError as e:
            progress.fail(key, e)
            return
        if raw is None:
            return  # gone since the listing: nothing to keep
        await store.write_through(
            key, validator, raw, source.shards.pieces if sharded else whole_object
        )
        progress.bytes += len(raw)


def _missing(source: ChunkSource, units: dict[Coords, str]) -> list[tuple[Coords, str]]:
    """The units of ``units`` (with their validators) the disk cache does not hold as of
    those validators: looked at in one go, before any is fetched (blocking)."""
    sharded = source.grid.sharding is not None
    start, length = source.shards.index_range() if sharded else (0, None)
    key, holds = source.grid.key, source.store.holds
    return [(u, v) for u, v in units.items() if not holds(key(u), start, length, v)]
