"""Runs blocking store calls in worker threads so the trio loop never waits on I/O."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import trio

from zarrmount.counters import Counters
from zarrmount.store import deadline as request_deadline
from zarrmount.store.base import OpenFile, Store, StoreError
from zarrmount.store.diskcache import DiskCache, Part
from zarrmount.store.failures import RecentFailures, Unreachable
from zarrmount.store.health import Health
from zarrmount.store.kept_documents import offline

# The deadline of a fetch of a key that failed a moment ago: long enough for a store
# that is back, short enough that the kernel's immediate re-send of a failed read (page
# cache) does not wait a whole deadline again. At most a twentieth of the store's
# deadline, as the slack below: a stalled read fails within 1.2x the deadline.
RETRY_DEADLINE_S = 1.0
RETRY_SHARE = 0.05
# A hung call is abandoned this long after its deadline: the store's own deadline, which
# names the cause, fires first where the backend can cancel the request.
SLACK_S = 1.0
SLACK_SHARE = 0.05
# How long a check that the store's root is there counts (absent keys read as fill values
# only from a store that is there); a failed check counts for nothing.
ROOT_CHECK_S = 1.0

log = logging.getLogger(__name__)

T = TypeVar("T")
# ``read(offset, length)``: bytes of one stored value, in a worker thread.
PartReader = Callable[[int, int], bytes]
# ``read_parts(key, use)``: ``use(size, read)`` over ``key``'s value, None when missing.
PartsReader = Callable[[str, Callable[[int, PartReader], T]], T | None]


class StoreStats(Counters):
    # synced: keys made durable by fsync (local stores)
    names = ("gets", "get_bytes", "errors", "sets", "set_bytes", "deletes", "synced")
    __slots__ = names


class AsyncStore:
    """Awaitable wrapper of a :class:`Store`; at most ``concurrency`` calls at once (the
    store's own default unless given). The one interface every layer above ``store/`` uses:
    what differs between local and object stores is decided here."""

    def __init__(
        self, store: Store, concurrency: int | None = None, disk: DiskCache | None = None
    ) -> None:
        self.store = store
        self.disk = disk  # fetched objects kept on local disk (remote stores, -o disk_cache)
        self.stats = StoreStats()
        self._limiter = trio.CapacityLimiter(concurrency or store.concurrency)
        # seconds each request took, retries included (the metrics observe it)
        self.latency: Callable[[float], None] = lambda _seconds: None
        self._failed = RecentFailures()
        self._root_seen: float | None = None  # trio time the root was last found
        self.health = Health(store.url)  # remote stores: whether it answers
        self.health.probe = self._probe
        if store.unanswered is not None:  # opened from documents kept on disk
            self.health.failed(store.unanswered)

    async def _run(
        self,
        fn,
        *args,
        deadline_s: float | None = None,
        limiter: trio.CapacityLimiter | None = None,
        probe: bool = False,
        telling: bool = True,
    ):
        """Run ``fn`` in a thread (under the store's limiter unless given another); for
        remote stores never wait past the deadline (the request's, if shorter), and not
        at all while the store is unreachable (but for the ``probe`` that asks). A call
        not ``telling`` (a short try) does not begin an outage when it gets no answer."""
        if not self.store.remote:
            return await self._run_local(fn, *args, limiter=limiter)
        own = self.store.deadline_s if deadline_s is None else deadline_s
        deadline = request_deadline.left(own)
        start = time.perf_counter()
        try:
            if not (probe or self.health.reachable):  # no coroutine on the usual path
                await self.health.check()
            if deadline <= 0:
                raise StoreError(f"{self.store.url}: the request's deadline has passed")
            # A hung request is abandoned (its thread finishes on its own) after the deadline.
            with trio.fail_after(deadline + min(SLACK_S, deadline * SLACK_SHARE)):
                found = await trio.to_thread.run_sync(
                    fn, *args, limiter=limiter or self._limiter, abandon_on_cancel=True
                )
        except trio.TooSlowError:
            self.stats.errors += 1
            error = Unreachable(f"no answer from {self.store.url} within {deadline:g} s")
            if telling and deadline >= own / 2:  # not a request's deadline running out
                self.health.failed(error)
            raise error from None
        except Unreachable as e:
            self.stats.errors += 1
            if telling:
                self.health.failed(e)
            raise
        except Exception:
            self.stats.errors += 1
            raise
        finally:
            self.latency(time.perf_counter() - start)
        self.health.answered()
        return found

    async def _run_local(self, fn, *args, limiter: trio.CapacityLimiter | None = None):
        start = time.perf_counter()
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=limiter or self._limiter)
        except Exception:
            self.stats.errors += 1
            raise
        finally:
            self.latency(time.perf_counter() - start)

    async def _fetch(self, fn, key: str, *args) -> bytes | None:
        """``fn(key, *args)``, a get of a remote store: with a short deadline while an
        earlier fetch of ``key`` failed a moment ago, the store's own otherwise."""
        if not self.store.remote:
            return await self._run(fn, key, *args)
        retry = self._failed.is_fresh(key)
        short = min(RETRY_DEADLINE_S, self.store.deadline_s * RETRY_SHARE)
        deadline = short if retry else None
        try:
            value = await self._run(
                functools.partial(fn, deadline_s=deadline),
                key,
                *args,
                deadline_s=deadline,
                telling=not retry,  # the key alone may be stalled: the store said so once
            )
        except StoreError as e:
            if retry:  # the first failure's time is kept: a whole try again once it is stale
                raise type(e)(f"{e} (a short try: {key} failed a moment ago)") from e
            self._failed.note(key)
            raise
        self._failed.forget(key)
        return value

    async def watch_health(self) -> None:
        """Probe the store while it is unreachable (a session task; remote stores)."""
        if self.store.remote:
            await self.health.watch()

    async def _probe(self, deadline_s: float) -> None:
        """The smallest request that shows the store answers: a byte of the root's
        metadata (a missing key is an answer too)."""
        marker = self.store.root_marker
        if marker is None:
            await self._run(self.store.root_exists, deadline_s=deadline_s, probe=True)
            return
        fetch = functools.partial(self.store.get_range, deadline_s=deadline_s)
        await self._run(fetch, marker, 0, 1, deadline_s=deadline_s, probe=True)

    async def check_root(self) -> None:
        """Raise StoreError unless the store's root metadata is there (checked at most
        every ROOT_CHECK_S while it is)."""
        marker = self.store.root_marker
        now = trio.current_time()
        if marker is None or (self._root_seen is not None and now - self._root_seen < ROOT_CHECK_S):
            return
        if await self._fetch(self.store.get_range, marker, 0, 1) is None:  # not from disk
            raise StoreError(f"the store's root ({marker}) is gone: {self.store.url}")
        self._root_seen = now

    async def _fetch_counted(self, fn, key: str, *args):
        value = await self._fetch(fn, key, *args)
        self._count_get(None if value is None else len(value))
        return value

    async def get(self, key: str) -> bytes | None:
        return await self._fetch_counted(self.store.get, key)

    async def get_range_with(
        self,
        key: str,
        start: int,
        length: int,
        use: Callable[[bytes | None], T],
        limiter: trio.CapacityLimiter,
        validator: str | None = None,
    ) -> T:
        """``use(range)`` (None: the key is missing) in a worker thread under ``limiter``:
        for a local store the same thread that reads it (one hop, as ``get_with``)."""
        if self.store.remote or self._on_disk(validator):
            raw = await self.get_range(key, start, length, validator)
            return await trio.to_thread.run_sync(use, raw, limiter=limiter)
        found, nbytes = await self._run(self._range_use, key, start, length, use, limiter=limiter)
        self._count_get(nbytes)
        return found

    def _range_use(self, key: str, start: int, length: int, use) -> tuple[object, int | None]:
        raw = self.store.get_range(key, start, length)
        return use(raw), None if raw is None else len(raw)

    async def get_range(
        self, key: str, start: int, length: int, validator: str | None = None
    ) -> bytes | None:
        """``length`` bytes from ``start`` (negative: from the end); from the disk cache
        where it holds them as of ``validator`` (the object's, as last listed)."""
        part = Part(key, start, length)
        if self._on_disk(validator):
            found = await trio.to_thread.run_sync(self._disk_get, part, validator, bytearray)
            if found is not None:
                return bytes(found)
        fetch = functools.partial(self._fetch_counted, self.store.get_range, key, start, length)
        fetched, value = await self._fetched_or_kept(part, fetch, bytearray, bytes, None)
        if fetched and value is not None and self._on_disk(validator):
            await trio.to_thread.run_sync(self._keep, part, validator, value)
        return value

    def _on_disk(self, validator: str | None) -> bool:
        """The disk cache may serve and keep a value of this validator."""
        disk = self.disk
        return disk is not None and (validator is not None or disk.immutable)

    def _disk_get(
        self, part: Part, validator: str | None, buffer_for, stale: bool = False
    ) -> memoryview | None:
        try:
            return self.disk.get(part, validator, buffer_for, stale)
        except Exception:  # the disk cache never fails a read
            log.exception("disk cache: reading %s failed", part.key)
            return None

    def _keep(self, part: Part, validator: str | None, raw: bytes) -> None:
        try:
            self.disk.put(part, validator, raw)
        except Exception:  # the disk cache never fails a read
            log.exception("disk cache: keeping %s failed", part.key)

    async def write_through(
        self,
        key: str,
        validator: str,
        raw: bytes,
        cut: Callable[[bytes], list[tuple[int, int | None, bytes]]],
    ) -> None:
        """``raw``, just stored under ``key``, kept in the disk cache as of ``validator``:
        the parts ``cut`` gives (``(start, length, bytes)``: those reads will ask for)."""
        if self.disk is None:
            return
        await trio.to_thread.run_sync(self._keep_parts, key, validator, raw, cut)

    def _keep_parts(self, key: str, validator: str, raw: bytes, cut) -> None:
        try:
            parts = cut(raw)
        except Exception:  # the disk cache never fails a write
            log.exception("disk cache: cutting %s into its parts failed", key)
            return
        for start, length, payload in parts:
            self._keep(Part(key, start, length), validator, payload)

    async def set(self, key: str, value: bytes) -> None:
        await self._run(self.store.set, key, value)
        self.stats.sets += 1
        self.stats.set_bytes += len(value)

    async def delete(self, key: str) -> None:
        await self._run(self.store.delete, key)
        self.stats.deletes += 1

    async def sync(self, keys: list[str]) -> None:
        await self._run(self.store.sync, keys)
        self.stats.synced += len(keys)

    @property
    def concurrency(self) -> int:
        """How many calls may be under way at once (``-o max_fetches``)."""
        return int(self._limiter.total_tokens)

    def holds(self, key: str, start: int, length: int | None, validator: str | None) -> bool:
        """The disk cache holds these bytes of ``key`` as of ``validator`` (blocking)."""
        return self._on_disk(validator) and self.disk.holds(Part(key, start, length), validator)

    @property
    def reads_parts(self) -> bool:
        """Parts of a value cost less than all of it (local files; an object store
        request costs the same for any part)."""
        return self.store.reads_parts

    @property
    def opens_files(self) -> bool:
        """Values can be read straight into the caller's buffers (local files)."""
        return self.store.opens_files

    async def with_files(self, fn: Callable[[Callable[[str], OpenFile | None]], T], limiter) -> T:
        """``fn(open_file)`` in a worker thread under ``limiter``, where ``open_file(key)``
        opens ``key``'s value (None when missing). Only where ``opens_files``."""
        return await trio.to_thread.run_sync(fn, self.store.open_file, limiter=limiter)

    def changed_by_others(self) -> set[str] | None:
        """See Store.changed_by_others (no request: what the last commit found)."""
        return self.store.changed_by_others()

    @property
    def transactional(self) -> bool:
        """Stored only once synced (a commit): a journal's checkpoint syncs."""
        return self.store.transactional

    @property
    def warm_start(self) -> bool:
        """Readying arrays at mount pays: a first read is set by decoder start-up, not
        by the network, and a listing costs no requests."""
        return not self.store.remote

    def _count_get(self, nbytes: int | None) -> None:
        self.stats.gets += 1
        if nbytes is not None:
            self.stats.get_bytes += nbytes

    async def get_with(
        self,
        key: str,
        buffer_for: Callable[[int], bytearray],
        use: Callable[[memoryview | bytes], T],
        limiter: trio.CapacityLimiter,
        validator: str | None = None,
    ) -> T | None:
        """``use(value)`` in a worker thread under ``limiter``, or None when ``key`` is
        missing. A local store reads the value into ``buffer_for(size)`` in that same
        thread (a thread hop costs more than reading a small chunk); an object store's
        value comes from the disk cache where it holds it as of ``validator``, else it is
        fetched first, within its deadline (and kept on disk)."""
        if self.store.remote:
            return await self._remote_with(key, buffer_for, use, limiter, validator)
        # not _run: a chunk that fails to decode is no store error
        try:
            found = await trio.to_thread.run_sync(
                self._read_use, key, buffer_for, use, limiter=limiter
            )
        except StoreError:
            self.stats.errors += 1
            raise
        self._count_get(found[1])
        return found[0]

    async def _remote_with(self, key: str, buffer_for, use, limiter, validator: str | None):
        part = Part(key)
        if self._on_disk(validator):
            found = await trio.to_thread.run_sync(
                self._disk_use, part, validator, buffer_for, use, limiter=limiter
            )
            if found is not None:
                return found[0]
        fetch = functools.partial(self._fetch_counted, self.store.get_buffer, key)
        fetched, raw = await self._fetched_or_kept(part, fetch, buffer_for, use, limiter)
        if not fetched:
            return raw  # what the disk cache kept, used
        if raw is None:
            return None
        if self._on_disk(validator):
            return await trio.to_thread.run_sync(
                self._keep_use, part, validator, raw, use, limiter=limiter
            )
        return await trio.to_thread.run_sync(use, raw, limiter=limiter)

    def _disk_use(
        self, part: Part, validator, buffer_for, use, stale: bool = False
    ) -> tuple[object] | None:
        raw = self._disk_get(part, validator, buffer_for, stale)
        return None if raw is None else (use(raw),)

    async def _fetched_or_kept(self, part: Part, fetch, buffer_for, use, limiter):
        """``(True, await fetch())``; with the store unreachable, ``(False, use(kept))``
        where the disk cache holds ``part`` in any version (what was known stays usable:
        HTTP's stale-if-error), else Unreachable."""
        try:
            return True, await fetch()
        except Unreachable:
            if self.disk is not None:
                found = await trio.to_thread.run_sync(
                    self._disk_use, part, None, buffer_for, use, True, limiter=limiter
                )
                if found is not None:
                    return False, found[0]
            raise

    def _keep_use(self, part: Part, validator, raw: bytes, use):
        self._keep(part, validator, raw)
        return use(raw)

    def _read_use(self, key: str, buffer_for, use) -> tuple[object, int | None]:
        start = time.perf_counter()
        raw = self.store.read_into(key, buffer_for)
        self.latency(time.perf_counter() - start)  # the read alone, not the use
        return (None, None) if raw is None else (use(raw), len(raw))

    async def get_batch(
        self,
        keys: list[str],
        buffer_for: Callable[[int], bytearray],
        use: Callable[[memoryview | bytes], T],
        limiter: trio.CapacityLimiter,
    ) -> list[T | None] | None:
        """``get_with`` of each key in turn, in one worker thread, up to the first that
        fails; None where the store answers faster one request at a time (object stores:
        requests in parallel), and the caller should ask key by key."""
        if self.store.remote:
            return None
        found = await trio.to_thread.run_sync(
            self._read_many, keys, buffer_for, use, limiter=limiter
        )
        for _, nbytes in found:
            self._count_get(nbytes)
        return [value for value, _ in found]

    def _read_many(self, keys: list[str], buffer_for, use) -> list[tuple[object, int | None]]:
        found = []
        for key in keys:
            try:
                found.append(self._read_use(key, buffer_for, use))
            except Exception:
                break  # left to the caller's key-by-key path, which reports it
        return found

    async def with_parts(self, fn: Callable[[PartsReader], T], limiter) -> T:
        """``fn(read_parts)`` in a worker thread under ``limiter``, where
        ``read_parts(key, use)`` calls ``use(size, read)`` with ``read(offset, length)``
        reading parts of ``key``'s value (None when missing). Only where ``reads_parts``."""
        counts: list[int] = []  # bytes per value read, counted back on this thread
        reader = functools.partial(self._read_parts, counts)
        found = await trio.to_thread.run_sync(fn, reader, limiter=limiter)
        for nbytes in counts:
            self._count_get(nbytes)
        return found

    def _read_parts(self, counts: list[int], key: str, use: Callable[[int, PartReader], T]):
        nread = 0

        def read_counted(read: PartReader, at: int, n: int) -> bytes:
            nonlocal nread
            got = read(at, n)
            nread += len(got)
            return got

        found = self.store.read_ranges(
            key, lambda size, read: use(size, functools.partial(read_counted, read))
        )
        if found:  # a use that declined (a value that decodes only whole) fetches it whole
            counts.append(nread)
        return found

    @property
    def list_calls(self) -> int:
        return self.store.list_calls

    @property
    def retries(self) -> int:
        return self.store.retries

    async def run(self, fn: Callable[..., T], *args) -> T:
        """``fn(store, *args)``: a blocking function of the layers above over the store (a
        hierarchy load, a listing walk), in a worker thread within the deadline; with the
        store unreachable, over the documents and listings kept on disk where it keeps
        them (Unreachable if ``fn`` needs more)."""
        try:
            return await self._run(fn, self.store, *args)
        except Unreachable:
            if not self.store.keeps_documents:
                raise
        return await trio.to_thread.run_sync(_offline, fn, self.store, *args)


def _offline(fn: Callable[..., T], *args) -> T:
    with offline():
        return fn(*args)
