"""A mount's crash journal on local disk: every write appended before it is acknowledged.

The journal of a store is a directory of its own under the journal root (named for the
store's URL, mode 0700: it holds written data), locked by the mount using it. Entries go to
numbered segments; a full segment is *sealed* and emptied once every chunk dirty when it
was sealed has been stored (a checkpoint). Segments found when a mount starts are what a
killed daemon left: the mount applies them before it serves (``zarrmount/recovery.py``).

An entry is written to the kernel (``pwritev``, then the segment header's count of entry
bytes) before the write returns: it survives the daemon's death (SIGKILL, the OOM killer),
not a power cut, which is what ``fsync`` is for. An emptied segment's file is kept (at most
SPARES) and written again from its start by a later segment: overwriting cached pages
costs the kernel a sixth of what appending new ones does (0.06 against 0.2-0.4 CPU
seconds per GB here). Its header is renewed before it takes its new name, so what an
earlier use left past the header's count is never read as entries.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from zarrmount.journal.records import (
    HEADER,
    MAX_PAYLOAD,
    SEGMENT,
    Refused,
    entries_span,
    frame,
    segment_header,
)
from zarrmount.paths import cache_home

log = logging.getLogger(__name__)

SEGMENT_BYTES = 64 << 20  # a segment this full is sealed, and a checkpoint asked for
SUFFIX = ".zj"
REFUSED_PREFIX = "refused-"
SPARE_PREFIX = "spare-"  # emptied segments waiting to be written again (never replayed)
SPARES = 2
STORE_FILE = "store"  # names the store, for people looking into the root
COPY_PIECE = 1 << 20  # refused bytes are copied aside in pieces this large


class JournalError(Exception):
    """The journal cannot be opened (in use, or its directory cannot be made)."""


def default_root() -> Path:
    """Where journals live unless ``-o journal=DIR`` says."""
    return cache_home() / "journal"


def _locked_directory(directory: Path) -> int:
    """A descriptor of ``directory`` (made if missing) holding its lock; the lock must be
    on the directory still at that path (a clean close removes it)."""
    for _ in range(3):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(directory).st_ino == os.fstat(fd).st_ino:
                return fd
        except BlockingIOError:
            os.close(fd)
            raise JournalError(f"the journal {directory} is in use by another mount") from None
        except OSError:
            pass  # removed meanwhile: make it again
        os.close(fd)
    raise JournalError(f"cannot lock the journal {directory}")


def _number(path: Path) -> int:
    return int(path.name[: -len(SUFFIX)])


class Journal:
    """The journal of one store, opened by one mount at a time."""

    def __init__(self, directory: Path, lock_fd: int, segment_bytes: int = SEGMENT_BYTES):
        self.directory = directory
        self._lock_fd = lock_fd
        self.segment_bytes = segment_bytes
        found = sorted(
            (p for p in directory.glob("*" + SUFFIX) if p.name[: -len(SUFFIX)].isdigit()),
            key=_number,
        )
        self.pending: list[Path] = found  # left by an earlier mount: to replay first
        self.sealed: list[Path] = []  # full: deleted once their data is stored
        self._next = (_number(found[-1]) + 1) if found else 1
        self._spares = sorted(directory.glob(SPARE_PREFIX + "*"))
        self._fd: int | None = None
        self._active: Path | None = None
        self._number = 0  # of the active segment
        self.active_bytes = 0  # of entries in it
        self.replaying = False  # entries being replayed are in the journal already
        self.on_full: Callable[[], None] = lambda: None
        self.entries = 0
        self.written = 0  # bytes of data journaled
        self._stuck = False  # the last discard could not empty a segment

    @classmethod
    def open(cls, root: Path, url: str, segment_bytes: int = SEGMENT_BYTES) -> Journal:
        """The journal of the store at ``url`` under ``root``, locked for this mount."""
        directory = root / hashlib.sha256(url.encode()).hexdigest()[:16]
        try:
            fd = _locked_directory(directory)
            (directory / STORE_FILE).write_text(url + "\n")
        except OSError as e:
            raise JournalError(f"cannot open the journal {directory}: {e}") from None
        journal = cls(directory, fd, segment_bytes)
        if journal.pending:
            log.warning(
                "journal %s: %d segment(s) of writes a daemon acknowledged but did not store",
                directory,
                len(journal.pending),
            )
        return journal

    def append(self, path: str, ident: str, offset: int, data: bytes | memoryview) -> None:
        """Journal one write; OSError (ENOSPC...) when it could not be, with nothing of it
        left behind."""
        if self.replaying:
            return
        if self._fd is None:
            self._begin()
        if os.fstat(self._fd).st_nlink == 0:  # removed: what it holds no replay would find
            raise OSError(errno.ENOENT, f"the journal's segment in {self.directory} was removed")
        parts = frame(path, ident, offset, data)
        want = sum(len(p) for p in parts)
        done = os.pwritev(self._fd, parts, SEGMENT.size + self.active_bytes)
        if done != want:  # the header still counts the entries before it: none of it is read
            raise OSError(errno.ENOSPC, f"short journal write ({done} of {want} bytes)")
        os.pwrite(self._fd, segment_header(self._number, self.active_bytes + want), 0)
        self.active_bytes += want
        self.entries += 1
        self.written += len(data)
        if self.active_bytes >= self.segment_bytes:
            self.seal()
            self.on_full()

    def _begin(self) -> None:
        """The next segment: a spare renewed (its header first, then its name), or a new
        file."""
        number = self._next
        path = self.directory / f"{number:08d}{SUFFIX}"
        spare = self._spares[-1] if self._spares else None
        if spare is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        else:
            fd = os.open(spare, os.O_WRONLY)
        try:  # refused (a full or read-only disk): the spare stays one, no file left open
            os.pwrite(fd, segment_header(number, 0), 0)
            if spare is not None:
                os.rename(spare, path)
                self._spares.pop()
        except OSError:
            os.close(fd)
            raise
        self._fd, self._active, self._number, self._next = fd, path, number, number + 1

    def seal(self) -> None:
        """Start a new segment with the next write; the active one waits for a checkpoint."""
        if self._fd is None:
            return
        os.close(self._fd)
        self.sealed.append(self._active)
        self._fd, self._active, self.active_bytes = None, None, 0

    def discard(self, segments: list[Path]) -> bool:
        """Empty ``segments``, what they hold being stored: kept as spares (SPARES at
        most), the others deleted. One that cannot be (a read-only disk) is kept with all
        after it, for a later checkpoint (False): a replay never applies an older segment
        without the newer ones. Logged once until a discard succeeds again."""
        gone = set()
        for segment in segments:
            try:
                self._empty(segment)
            except OSError as e:
                if not self._stuck:
                    log.error("journal %s: cannot empty it (kept, tried again): %s", segment, e)
                self._stuck = True
                break
            gone.add(segment)
        else:
            self._stuck = False
        self.sealed = [s for s in self.sealed if s not in gone]
        self.pending = [s for s in self.pending if s not in gone]
        return not self._stuck

    def _empty(self, segment: Path) -> None:
        if len(self._spares) < SPARES and segment.exists():
            spare = self.directory / f"{SPARE_PREFIX}{_number(segment)}"
            segment.rename(spare)
            self._spares.append(spare)
        else:
            segment.unlink(missing_ok=True)

    def entries_in(self, segment: Path, f: BinaryIO) -> int | None:
        """Where the entries of ``segment`` (open as ``f``) end, ``f`` put where they begin
        (None: a damaged header)."""
        span = entries_span(f.read(SEGMENT.size), os.fstat(f.fileno()).st_size, _number(segment))
        if span is None:
            return None
        f.seek(span[0])
        return span[1]

    def refuse(self, segment: Path, spans: list[Refused]) -> Path:
        """Keep the refused bytes of ``segment`` beside it, for a person to look at (copied
        a piece at a time: a span may be the rest of a segment)."""
        kept = self.directory / f"{REFUSED_PREFIX}{segment.name}"
        with open(segment, "rb") as source, open(kept, "ab") as f:
            for span in spans:
                source.seek(span.start)
                left = span.end - span.start
                while left > 0 and (piece := source.read(min(left, COPY_PIECE))):
                    f.write(piece)
                    left -= len(piece)
        return kept

    @property
    def largest(self) -> int:
        """The most bytes a segment of ours holds: its header, full, and one more entry."""
        return SEGMENT.size + self.segment_bytes + HEADER.size + MAX_PAYLOAD

    def set_aside(self, segment: Path) -> Path:
        """Keep ``segment`` as refused, whole: it is no segment of ours."""
        kept = self.directory / f"{REFUSED_PREFIX}{segment.name}"
        segment.rename(kept)
        return kept

    def close(self, stored: bool) -> None:
        """Close; when everything written was ``stored``, delete the segments (and the
        directory, unless refused entries are kept in it)."""
        self.seal()
        try:
            if stored:
                self._delete()
        except OSError as e:  # a read-only disk: the next mount replays them, in order
            log.error("journal %s: cannot delete it: %s", self.directory, e)
        finally:
            os.close(self._lock_fd)

    def _delete(self) -> None:
        """Every segment goes, in order (one left keeps those after it), then the
        directory unless something else is in it."""
        for segment in self.pending + self.sealed + self._spares:
            segment.unlink(missing_ok=True)
        self.pending, self.sealed, self._spares = [], [], []
        rest = {p.name for p in self.directory.iterdir()} - {STORE_FILE}
        if not rest:
            (self.directory / STORE_FILE).unlink(missing_ok=True)
            self.directory.rmdir()
