"""The key/value interface every layer above ``store/`` talks to.

Keys are ``/``-separated strings relative to the store root, as in the Zarr specs.
Methods are blocking and thread-safe: callers on the trio loop run them in worker
threads (see :mod:`zarrmount.store.aio`), which keeps the store usable without FUSE.
"""

from __future__ import annotations

import contextvars
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from zarrmount.store import deadline
from zarrmount.store.failures import StoreError, Unreachable
from zarrmount.store.retry import is_unreachable, with_retries
from zarrmount.store.versions import History

T = TypeVar("T")

# Requests at once of one ``gather``: a group's children's metadata documents cost a
# round trip for each sixteen, not one each.
GATHERED = 16
# What ``gather`` found of a key: its value, None when it is missing, or the failure.
Gathered = bytes | None | StoreError


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def public_url(url: str) -> str:
    """``url`` fit for logs and ``/proc/mounts``: user info and query (where tokens and
    signatures travel) replaced by ``***``."""
    head, sep, _ = _USERINFO.sub("***@", url).partition("?")
    return head + ("?***" if sep else "")


def key_parts(key: str) -> list[str]:
    """The path components of ``key``; a key that could name something outside the store
    root (``..``, ``.``, NUL) is refused, whoever wrote it: metadata is data."""
    parts = [p for p in key.split("/") if p]
    if any(p in (".", "..") or "\0" in p for p in parts):
        raise StoreError(f"invalid key {key!r}: it would leave the store root")
    return parts


class OpenFile(Protocol):
    """A stored value open for reads straight into the caller's buffers (``open_file``)."""

    size: int  # bytes, when opened

    def read_into(self, buffers: Sequence, offset: int, wait: bool) -> int | None:
        """Fill ``buffers`` from ``offset``; the bytes read, or None where ``wait`` is False
        and that would wait for a disk."""

    def will_need(self) -> None:
        """Begin reading the whole value from disk."""

    def close(self) -> None: ...


class Store(ABC):
    """Blocking key/value access; ``None`` means the key does not exist."""

    url: str
    remote = False  # remote stores get deadlines, and callers no batched reads
    concurrency = 16  # requests at once, unless the mount's options say otherwise
    reads_parts = False  # read_ranges works, and parts of a value cost less than all of it
    opens_files = False  # open_file works: values read straight into the caller's buffers
    # listing an array's chunk keys works (not HTTP), and in one request however deep
    # they lie (object stores: list_tree), or level by level (directories: list_validated)
    lists_chunks = True
    lists_deep = False
    deadline_s = 0.0
    read_only_reason: str | None = None  # why writes can never succeed (HTTP, zip), if so
    fixed = False  # its contents never change (a snapshot): nothing cached is checked again
    versioned = False  # it has a history of versions (history, at)
    keeps_documents = False  # serves kept documents offline (store/kept_documents.py)
    transactional = False  # sets and deletes last only once sync commits them (Icechunk)
    list_calls = 0  # list_dir calls so far (statistics; consolidated metadata needs none)
    retries = 0  # requests tried again after a transient failure (statistics)
    root_marker: str | None = None  # the root's metadata key, once the hierarchy is found
    # the failure over which the hierarchy was opened from documents kept on disk: the
    # mount begins in an outage (no first read waits a deadline to learn it)
    unanswered: Unreachable | None = None

    @abstractmethod
    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        """Return the whole value, or ``None`` if the key is missing.

        ``deadline_s`` replaces the store's own deadline for this call (remote stores).
        """

    def get_buffer(self, key: str, *, deadline_s: float | None = None) -> bytes | memoryview | None:
        """``get``, where the store can hand over its own buffer rather than copy it into
        a ``bytes`` (a chunk about to be decoded needs no copy of its own)."""
        return self.get(key, deadline_s=deadline_s)

    @abstractmethod
    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        """Return ``length`` bytes from ``start`` (negative ``start``: from the end)."""

    @abstractmethod
    def set(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing it atomically where the store can."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    def gather(self, keys: Sequence[str]) -> dict[str, Gathered]:
        """What ``get`` of each of ``keys`` gives (a failure as a value: each key's is its
        own), fetched at once where round trips are worth overlapping (remote stores): at
        most GATHERED requests at a time; once one found the store unreachable, the rest
        are not tried and share its failure. Elsewhere nothing: each key is read when needed."""
        if not self.remote or not keys:
            return {}
        down: list[Unreachable] = []
        with ThreadPoolExecutor(min(GATHERED, self.concurrency, len(keys))) as pool:
            # each in a copy of the caller's context: the kernel request's deadline
            found = [
                pool.submit(contextvars.copy_context().run, self._gathered, key, down)
                for key in keys
            ]
        return {key: future.result() for key, future in zip(keys, found, strict=True)}

    def _gathered(self, key: str, down: list[Unreachable]) -> Gathered:
        if down:
            return down[0]
        try:
            return self.get(key)
        except Unreachable as e:
            down.append(e)
            return e
        except StoreError as e:
            return e

    def retrying(self, attempt: Callable[[float], T], what: str, deadline_s: float) -> T:
        """``attempt`` tried by the one policy (``retry.py``) until it succeeds, fails for
        good or ``deadline_s`` (or the kernel request's deadline) has passed; each new try
        counted in ``retries``. Unreachable when no try got an answer, unless the
        request's deadline left the call less than half of ``deadline_s``: a call cut
        short so says nothing of the store."""
        left = deadline.left(deadline_s)
        if left <= 0:
            raise StoreError(f"{what}: the request's deadline has passed")
        try:
            return with_retries(attempt, what, left, self._count_retry)
        except Exception as e:
            if isinstance(e, StoreError) or not is_unreachable(e) or left < deadline_s / 2:
                raise
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise Unreachable(f"{what}: no answer from {self.url} within {left:g} s ({why})") from e

    def answered(
        self, attempt: Callable[[float], T], what: str, deadline_s: float, describe=str
    ) -> T:
        """``retrying``, whatever fails a StoreError: a typed one (Unreachable) as it is,
        any other named ``what: describe(error)``."""
        try:
            return self.retrying(attempt, what, deadline_s)
        except StoreError:
            raise
        except Exception as e:
            raise StoreError(f"{what}: {describe(e)}") from e

    def _count_retry(self) -> None:
        self.retries += 1

    @property
    def identity(self) -> str:
        """The store, named the same however it was reached (its journal's name), with
        no credentials."""
        return public_url(self.url)

    def lock_writer(self, holder: str) -> object | None:
        """Take the store's writer lock, held until the returned object is closed; None
        where the store has no such lock. If the process dies, the kernel gives up a local
        store's ``flock``; an object store's lease (store/lease.py) is no longer renewed
        and expires after its TTL (sooner for a mount on the same host). Raises StoreError
        naming the holder when another writer has it."""
        return None

    @abstractmethod
    def list_dir(self, prefix: str) -> list[str]:
        """Names directly below ``prefix`` (keys and sub-prefixes, no trailing ``/``)."""

    def list_validated(self, prefix: str) -> dict[str, str]:
        """Names directly below ``prefix``, each with its validator: a text that changes
        whenever the object under that name does (ETag, generation, mtime and size; empty
        for sub-prefixes and where the store gives none, so changes go unnoticed)."""
        return dict.fromkeys(self.list_dir(prefix), "")

    def validator(self, key: str) -> str | None:
        """The validator of ``key``'s object (see list_validated); None when it is missing,
        or where the store gives none (then it is read again each time)."""
        return None

    def list_tree(self, prefix: str) -> dict[str, str]:
        """Every key below ``prefix`` (relative to it), with its validator; only where
        ``lists_deep``."""
        raise NotImplementedError

    def history(self) -> History:
        """A versioned store's branches, tags and snapshots."""
        raise StoreError(f"{self.url} has no versions")

    def at(self, snapshot_id: str) -> Store:
        """The same store at another of its snapshots (versioned stores only)."""
        raise StoreError(f"{self.url} has no versions")

    def root_exists(self) -> bool:
        """The store's root is there (a bucket, a prefix, a directory), Zarr or not."""
        return True

    def forget_listings(self) -> None:  # noqa: B027 (most stores keep none)
        """Drop listings kept from earlier calls: a reload sees the store as it is now."""

    def read_into(
        self, key: str, buffer_for: Callable[[int], bytearray]
    ) -> memoryview | bytes | None:
        """The value of ``key``, read into ``buffer_for(size)`` where the store can.

        The result is only valid until that buffer is used again.
        """
        return self.get(key)

    def read_ranges(
        self, key: str, use: Callable[[int, Callable[[int, int], bytes]], T]
    ) -> T | None:
        """``use(size, read)`` with ``read(offset, length)`` reading parts of ``key``'s
        value, or ``None`` if the key is missing. Only stores with ``reads_parts``: for
        others (remote ones: a request each) parts of a value cost as much as all of it."""
        raise NotImplementedError

    def open_file(self, key: str) -> OpenFile | None:
        """``key``'s value as an open file, None if the key is missing or no regular
        file. Only stores with ``opens_files``: the caller closes it."""
        raise NotImplementedError

    def sync(self, keys: Iterable[str]) -> None:  # noqa: B027 - most stores need nothing
        """Make the earlier sets and deletes of ``keys`` survive a crash (fsync).

        Object stores need nothing: a PUT or DELETE they acknowledged is durable.
        """

    def release_if_idle(self, idle_s: float) -> bool:
        """Let go of what the store holds open (a session), to open it again when next
        used, if nothing used it for ``idle_s`` seconds; True when it did."""
        return False

    def changed_by_others(self) -> set[str] | None:
        """Arrays (paths) other writers changed that this store's readers may hold from
        before: a transactional store's commit moved onto theirs. Each is told once; None:
        any array may have changed."""
        return set()

    def origins(self, prefix: str) -> list[str]:
        """Where the values below ``prefix`` come from, where that is not the store
        itself (a snapshot, the files references point into); for ``--inspect``."""
        return []

    def counters(self) -> dict[str, int]:
        """Counts of the store's own for the statistics (commits, conflicts)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing
        """Release connections or handles."""
