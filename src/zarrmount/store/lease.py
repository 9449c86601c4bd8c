"""The writer lease of an object store: what the local store's ``flock`` does, for fsspec.

Object stores have no locks and nothing drops a lock when its holder dies, so an ``rw``
mount writes a lease object (JSON: holder, host, pid, boot id, token, expiry) at the store
root, renews it every ``TTL_S / 3`` seconds and deletes it at unmount. A second writer
refuses a lease that is neither expired nor provably dead: same host and boot, and that
pid gone or no zarrmount process. So a killed daemon's lease never blocks a mount on its
own host; on another host it blocks until the TTL runs out.

Races left: two mounts taking over one stale lease at once (or writing a new one where the
backend has no conditional create) both write, then read back after a pause; one whose
read-back precedes the other's write also believes it holds the lease until its next
renewal logs the conflict (nothing fences its writes). S3-compatible servers that ignore
``If-None-Match`` have that race without the read-back. Expiry trusts the hosts' clocks.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import fsspec
import fsspec.asyn

from zarrmount.store.base import StoreError
from zarrmount.store.local import LOCK_NAME
from zarrmount.store.retry import with_retries


class ObjectStore(Protocol):
    """What a lease needs of its store (an fsspec one, ``store/remote.py``)."""

    fs: fsspec.AbstractFileSystem
    deadline_s: float

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> None: ...

    def _path(self, key: str) -> str: ...


log = logging.getLogger(__name__)

TTL_S = 60.0  # a lease not renewed for this long is free for anyone
MAX_BYTES = 1 << 16  # anything longer is no lease of ours (nor parsed: it may nest deep)
SETTLE_S = 1.0  # without conditional create: wait this long before reading our write back
# Backends whose pipe_file(mode="create") is one conditional request (S3 If-None-Match).
CONDITIONAL_CREATE = frozenset({"s3", "s3a", "memory"})
_FIELDS = {
    "holder": str,
    "hostname": str,
    "pid": int,
    "boot_id": str,
    "token": str,
    "expires": (int, float),
}


def boot_id() -> str:
    """This boot's id: a pid means the same process only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """Our pid namespace: containers sharing a host name and kernel see different pids."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def is_zarrmount_process(pid: int) -> bool:
    """Whether ``pid`` is alive and a zarrmount process (a reused pid is not the holder)."""
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"zarrmount" in f.read()  # a zombie's is empty: dead
    except OSError:
        return False


def parse(data: bytes) -> dict[str, Any] | None:
    """The lease record in ``data``, or None when it is not one."""
    if len(data) > MAX_BYTES:
        return None
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(record, dict):
        return None
    ok = all(
        isinstance(record.get(k), t) and not isinstance(record.get(k), bool)
        for k, t in _FIELDS.items()
    )
    return record if ok else None


def provably_dead(record: dict[str, Any]) -> bool:
    """The holder ran on this host, boot and pid namespace, and its pid is no zarrmount
    process now."""
    me = boot_id()
    return (
        bool(me)
        and record["boot_id"] == me
        and record["hostname"] == socket.gethostname()
        and record.get("pid_ns", "") == pid_namespace()
        and not is_zarrmount_process(record["pid"])
    )


def shown(holder: str) -> str:
    """``holder`` fit for a message: anyone who can write the store wrote it."""
    text = "".join(c if c.isprintable() else "?" for c in holder[:300])
    return text + ("..." if len(holder) > 300 else "")


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%H:%M:%S UTC")


class WriterLease:
    """Our lease on ``store``; ``take()`` it, ``close()`` it. Renewed by a daemon thread."""

    def __init__(
        self,
        store: ObjectStore,
        holder: str,
        *,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.holder = holder
        self.ttl_s = ttl_s
        self.clock = clock
        self.token = secrets.token_hex(16)
        self.lost = False  # someone else's token replaced ours
        self._closed = False
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a renewal never rewrites what close() deleted
        self._thread: threading.Thread | None = None

    # --- the object -----------------------------------------------------------------

    def _record(self) -> bytes:
        return json.dumps(
            {
                "holder": self.holder,
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "boot_id": boot_id(),
                "pid_ns": pid_namespace(),
                "token": self.token,
                "expires": self.clock() + self.ttl_s,
            }
        ).encode()

    def _read(self) -> bytes | None:
        return self.store.get(LOCK_NAME)

    def _put(self) -> None:
        self.store.set(LOCK_NAME, self._record())

    def _create(self) -> bool:
        """One conditional PUT of our record; False when the object exists already."""
        fs, path = self.store.fs, self.store._path(LOCK_NAME)
        data = self._record()

        def attempt(left: float) -> bool:
            try:
                if getattr(fs, "async_impl", False):
                    fsspec.asyn.sync(
                        fs.loop, fs._pipe_file, path, data, mode="create", timeout=max(left, 1e-3)
                    )
                else:
                    fs.pipe_file(path, data, mode="create")
            except FileExistsError:  # not worth a retry: the answer stays the same
                return False
            return True

        try:
            return with_retries(attempt, LOCK_NAME, self.store.deadline_s)
        except Exception as e:
            raise StoreError(f"{LOCK_NAME}: {type(e).__name__}: {e}") from e

    def _mtime(self) -> float | None:
        """When the object was last written, where the backend says so cheaply."""
        try:
            when = self.store.fs.modified(self.store._path(LOCK_NAME))
        except Exception as e:  # NotImplementedError, or whatever the backend raises
            log.debug("%s: no modification time: %s", LOCK_NAME, e)
            return None
        if not isinstance(when, datetime.datetime):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        return when.timestamp()

    def _conditional(self) -> bool:
        protocol = self.store.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return bool(protocols & CONDITIONAL_CREATE)

    # --- taking it ------------------------------------------------------------------

    def take(self, pause: Callable[[float], None] = time.sleep) -> WriterLease:
        """Write our lease unless a live one is there; StoreError naming its holder."""
        current = self._read()
        if current is None and self._conditional():
            if not self._create():
                self._confirm()  # someone came first (or our own retried PUT did)
            return self
        if current is not None:
            self._refuse_if_held(current)
        self._put()
        pause(SETTLE_S)  # a writer that read the same state as we did writes in this time
        self._confirm()
        return self

    def _refuse_if_held(self, data: bytes) -> None:
        record = parse(data)
        if record is None:
            self._refuse_if_unknown()
            return
        if record["token"] == self.token:
            return
        now = self.clock()
        if record["expires"] > now and not provably_dead(record):
            raise StoreError(f"mounted read-write already ({shown(record['holder'])})")
        why = "its daemon is gone" if record["expires"] > now else "it expired"
        log.warning("taking over the writer lease of %s: %s", shown(record["holder"]), why)

    def _refuse_if_unknown(self) -> None:
        """A malformed lease counts as held until a TTL after it was written."""
        mtime = self._mtime()
        if mtime is None:
            raise StoreError(
                f"{LOCK_NAME} at the store root is no zarrmount lease and its age is "
                "unknown: another writer may hold the store (delete it if none does)"
            )
        if mtime + self.ttl_s > self.clock():
            raise StoreError(
                f"mounted read-write already (unknown holder: {LOCK_NAME} is malformed, "
                f"held until {_utc(mtime + self.ttl_s)})"
            )
        log.warning("replacing the malformed %s written at %s", LOCK_NAME, _utc(mtime))

    def _confirm(self) -> None:
        """The object holds our token, else StoreError naming whoever's it is."""
        data = self._read()
        record = parse(data) if data is not None else None
        if record is not None and record["token"] == self.token:
            return
        if data is None:
            raise StoreError(f"{LOCK_NAME} vanished while we took it: another writer is busy")
        holder = shown(record["holder"]) if record else f"unknown holder: malformed {LOCK_NAME}"
        raise StoreError(f"mounted read-write already ({holder})")

    # --- keeping it -----------------------------------------------------------------

    def start(self) -> None:
        """Renew in a daemon thread until close(): an unrenewed lease frees the store."""
        self._thread = threading.Thread(target=self._run, name="zarrmount-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            if not self.renew():
                return

    def renew(self) -> bool:
        """Rewrite our lease with a later expiry; False once it is no longer ours."""
        with self._lock:
            if self._closed or self.lost:
                return False
            try:
                record = parse(self._read() or b"{}")
                if record is not None and record["token"] != self.token:
                    self.lost = True
                    log.error(
                        "the writer lease was taken by %s: two writers may now "
                        "overwrite each other's chunks",
                        shown(record["holder"]),
                    )
                    return False
                self._put()
            except StoreError as e:
                log.warning("cannot renew the writer lease: %s", e)
            return True

    def close(self) -> None:
        """Stop renewing; delete the object if it still holds our token."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.store.deadline_s + 5)
        with self._lock:
            closed_before, self._closed = self._closed, True
            if closed_before or self.lost:
                return
            try:
                record = parse(self._read() or b"{}")
                if record is not None and record["token"] == self.token:
                    self.store.delete(LOCK_NAME)
            except StoreError as e:
                log.warning("cannot remove the writer lease: %s", e)


def take_lease(store: ObjectStore, holder: str, *, renew: bool = True) -> WriterLease:
    """Take the writer lease of ``store`` (StoreError naming the holder if it is held)."""
    lease = WriterLease(store, holder).take()
    if renew:
        lease.start()
    return lease
