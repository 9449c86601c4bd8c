"""Encoded objects of a remote store kept on local disk (``-o disk_cache=DIR``), so a
remount, a restart or an eviction from memory does not fetch them over the network again.

Each entry is one file: the key, the byte range, the object's validator (as the last
listing of its array gave it: ETag, generation, mtime) and a CRC-32C over all of it. An
entry is served only for the same validator (or, for sources that never change, any) and
an intact checksum; a damaged one is deleted and fetched again. Entries are written to a
temporary file and renamed, so a kill mid-write leaves nothing that is served. The
directory is bounded by ``size`` bytes, least recently used first; two mounts of one store
may share it (each rescans what is there before it evicts). A full disk or a directory
that cannot be written stops caching, with one log line, while reads go on.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from google_crc32c import extend

from zarrmount.counters import Counters

log = logging.getLogger(__name__)

MAGIC = b"ZMDC1\n"
_HEAD = struct.Struct("<6sII")  # magic, header length, CRC-32C of header and payload
TMP_PREFIX = ".tmp-"
# Temporary files older than this are a killed writer's: removed when found.
TMP_STALE_S = 600.0
# A full disk pauses caching this long before the next try.
PAUSE_S = 60.0
# Evictions free this share of the limit at once (a rescan costs a directory walk).
SLACK = 0.1


class DiskCacheStats(Counters):
    # dropped: entries that failed their checksum (deleted, fetched again)
    names = ("hits", "misses", "stored", "evictions", "dropped")
    __slots__ = names


@dataclass(frozen=True)
class Part:
    """What an entry holds: ``key``'s bytes from ``start`` (negative: from the end), all of
    them when ``length`` is None."""

    key: str
    start: int = 0
    length: int | None = None

    def name(self) -> str:
        return hashlib.sha256(f"{self.key}\0{self.start}\0{self.length}".encode()).hexdigest()


class DiskCache:
    """One store's directory of entries (blocking, thread-safe; run in worker threads)."""

    def __init__(self, directory: str, identity: str, size: int, immutable: bool) -> None:
        digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
        self.root = os.path.join(os.path.abspath(directory), digest)
        self.size = size
        self.immutable = immutable  # the store's objects never change: any validator
        self.stats = DiskCacheStats()
        self.used = 0  # bytes of entries, as this process knows them
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._disabled: str | None = None  # why nothing is cached (said once)
        try:
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            self.used = self._scan()[0]
        except OSError as e:
            self._disable(f"cannot use {self.root}: {e.strerror}")

    def _path(self, part: Part) -> str:
        name = part.name()
        return os.path.join(self.root, name[:2], name)

    # -- reading ---------------------------------------------------------------

    def get(
        self,
        part: Part,
        validator: str | None,
        buffer_for: Callable[[int], bytearray | np.ndarray] = bytearray,
        stale: bool = False,
    ) -> memoryview | None:
        """The entry's bytes if it holds ``part`` as of ``validator`` (None: any, for
        immutable sources, or when ``stale`` ones are wanted: the store is unreachable)
        and its checksum holds; else None. Read into ``buffer_for(size)``: the result is
        valid until that buffer is used again."""
        if validator is None and not (self.immutable or stale):
            return None
        path = self._path(part)
        raw = self._read(path, buffer_for)
        if raw is None:
            self.stats.misses += 1
            return None
        found = _parse(raw, part)
        if found is None:
            self.stats.dropped += 1
            log.warning("disk cache: entry of %s damaged: dropped, fetched again", part.key)
            self._remove(path)
            return None
        stored_validator, payload = found
        if validator is not None and stored_validator != validator:
            self.stats.misses += 1
            self._remove(path)  # another version: the object changed
            return None
        self.stats.hits += 1
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        return payload

    def holds(self, part: Part, validator: str | None) -> bool:
        """An entry of ``part`` as of ``validator`` is there (its header alone read: a
        damaged payload is found, and fetched again, when it is read)."""
        try:
            with open(self._path(part), "rb") as f:
                head = f.read(_HEAD.size)
                if len(head) < _HEAD.size:
                    return False
                magic, header_len, _ = _HEAD.unpack(head)
                header = json.loads(f.read(header_len)) if magic == MAGIC else {}
        except (OSError, ValueError):
            return False
        found = (header.get("key"), header.get("start"), header.get("length"))
        return found == (part.key, part.start, part.length) and (
            self.immutable or header.get("v") == validator
        )

    @staticmethod
    def _read(path: str, buffer_for: Callable[[int], bytearray | np.ndarray]) -> memoryview | None:
        try:
            with open(path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                view = memoryview(buffer_for(size)).cast("B")[:size]
                got = 0
                while got < size and (n := f.readinto(view[got:])):
                    got += n
                return view[:got]
        except OSError:
            return None

    # -- writing ---------------------------------------------------------------

    def put(self, part: Part, validator: str | None, payload: bytes | memoryview) -> None:
        """Keep ``payload`` as ``part`` as of ``validator``; failures only cost caching."""
        if self._disabled or time.monotonic() < self._paused_until:
            return
        header = json.dumps(
            {"key": part.key, "start": part.start, "length": part.length, "v": validator}
        ).encode()
        entry = [_HEAD.pack(MAGIC, len(header), _crc(header, payload)), header, payload]
        path = self._path(part)
        try:
            self._write(path, entry)
        except OSError as e:
            self._failed_write(e)
            return
        nbytes = sum(len(p) for p in entry)
        with self._lock:
            self.used += nbytes
            self.stats.stored += 1
            over = self.used > self.size
        if over:
            self._evict()

    def keep_latest(self, part: Part, payload: bytes) -> None:
        """Keep ``payload`` as ``part`` (no validator: served only when stale ones are
        wanted, or for immutable sources), unless that is what the entry holds already:
        a document read again each TTL is a read of a small file, not a write."""
        path = self._path(part)
        raw = self._read(path, bytearray)
        found = None if raw is None else _parse(raw, part)
        if found is not None and found[1] == payload:
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used
            return
        self.put(part, None, payload)

    def _write(self, path: str, parts: list) -> None:
        directory = os.path.dirname(path)
        tmp = os.path.join(directory, f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:  # its directory is new, or was deleted meanwhile
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            with open(fd, "wb", closefd=False) as f:
                for p in parts:
                    f.write(p)
        except BaseException:
            os.close(fd)
            self._remove(tmp)
            raise
        os.close(fd)
        os.replace(tmp, path)

    def _failed_write(self, e: OSError) -> None:
        if e.errno == errno.ENOENT:
            return  # the directory went meanwhile (another mount's cleaning): next time
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            with self._lock:
                said = self._paused_until > 0
                self._paused_until = time.monotonic() + PAUSE_S
            if not said:
                log.warning(
                    "disk cache %s: the disk is full; caching pauses, reads go on", self.root
                )
            self._evict()
        else:
            self._disable(f"cannot write to {self.root}: {e.strerror}")

    def _disable(self, why: str) -> None:
        if self._disabled is None:
            log.warning("disk cache off: %s; reads go on from the store", why)
        self._disabled = why

    # -- bounding --------------------------------------------------------------

    def _scan(self) -> tuple[int, list[tuple[float, int, str]]]:
        """Bytes of entries on disk, and each as (mtime, size, path); a killed writer's
        temporary files are removed."""
        total, entries = 0, []
        now = time.time()
        for sub in os.scandir(self.root):
            if not sub.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(sub.path):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # another mount evicted it
                if entry.name.startswith(TMP_PREFIX):
                    if now - st.st_mtime > TMP_STALE_S:
                        self._remove(entry.path)
                    continue
                total += st.st_size
                entries.append((st.st_mtime, st.st_size, entry.path))
        return total, entries

    def _evict(self) -> None:
        """Down to the limit less SLACK, least recently used first, from what is on disk
        now (another mount may share the directory)."""
        with self._lock:
            try:
                total, entries = self._scan()
            except OSError:
                return
            target = self.size * (1 - SLACK)
            for _, nbytes, path in sorted(entries):
                if total <= target:
                    break
                self._remove(path)
                total -= nbytes
                self.stats.evictions += 1
            self.used = total

    @staticmethod
    def _remove(path: str) -> None:
        with contextlib.suppress(OSError):
            os.remove(path)


def _crc(*parts: bytes | memoryview) -> int:
    """CRC-32C (in hardware) of the parts, with no copy of them."""
    crc = 0
    for part in parts:
        crc = extend(crc, np.frombuffer(part, np.uint8))
    return crc


def _parse(raw: memoryview, part: Part) -> tuple[str | None, memoryview] | None:
    """(validator, payload) of an intact entry holding ``part``; None if damaged."""
    if len(raw) < _HEAD.size:
        return None
    magic, header_len, crc = _HEAD.unpack_from(raw)
    body = raw[_HEAD.size :]
    if magic != MAGIC or header_len > len(body) or _crc(body) != crc:
        return None
    try:
        header = json.loads(bytes(body[:header_len]))
    except ValueError:
        return None
    if (header.get("key"), header.get("start"), header.get("length")) != (
        part.key,
        part.start,
        part.length,
    ):
        return None  # another part under the same name: not ours to serve
    return header.get("v"), body[header_len:]
