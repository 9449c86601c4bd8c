"""The journal's part in a mount's life: writes a killed daemon acknowledged are applied
before the mount serves (replay), and segments are deleted once what they hold is stored
(checkpoints).

Replay applies each entry through the array's own engine, in the order they were
written, so it is the same write again: a replay cut short is simply done again by the
next mount. Entries are read from a segment one at a time, so a replay holds one entry
(one write request: 1 MiB with the kernel's default FUSE limits), never a segment (64
MiB). An entry that is damaged, or names an array that is gone or has another dtype or
shape now, is refused whole: one log line, and its bytes kept in the journal directory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import trio

from zarrmount.array import Arrays, ArrayWriter
from zarrmount.cache import ChunkCache
from zarrmount.errors import CommandError, FsError
from zarrmount.journal import Entry, Journal, JournalError, Refused, default_root, scan
from zarrmount.options import MountOptions
from zarrmount.store import Store
from zarrmount.vfs import Filesystem
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.fs import ROOT_ARRAY_NAME
from zarrmount.vfs.table import ROOT_INODE

log = logging.getLogger(__name__)

# How often an idle mount looks whether its journal can go: every chunk stored.
IDLE_CHECK_S = 10.0
RETRY_FIRST_S = 1.0  # a failed checkpoint is tried again after this long, then longer


class ReplayError(Exception):
    """The journal could not be applied (the store failed); it is kept, whole."""


def open_journal(options: MountOptions, store: Store) -> Journal | None:
    """The journal of an ``rw`` mount (``-o journal``; by default for local stores). A
    journal asked for that cannot be had fails the mount; the default one is left out,
    with a warning (no writable cache directory, or another writer with ``nolock``)."""
    where = options.journal
    remote = store.remote and not store.transactional  # a commit is as a local fsync
    if options.read_only or where == "none" or (where == "auto" and remote):
        return None
    try:
        return Journal.open(default_root() if where == "auto" else Path(where), store.identity)
    except JournalError as e:
        if where != "auto":
            raise CommandError(f"{e} (-o journal=none mounts without one)") from None
        log.warning("%s: mounted without a journal (a killed daemon loses unstored writes)", e)
        return None


async def _array_file(fs: Filesystem, path: str) -> ArrayFile | None:
    """The file of the array at ``path`` in the hierarchy, listing groups on the way."""
    node = fs.table[ROOT_INODE]
    for name in path.split("/") if path else [ROOT_ARRAY_NAME]:
        if not node.is_dir:
            return None
        ino = (await node.children()).get(name)
        if ino is None:
            return None
        node = fs.table[ino]
    return node if isinstance(node, ArrayFile) else None


class _Writers:
    """The engines entries are applied through, found once per path."""

    def __init__(self, fs: Filesystem) -> None:
        self.fs = fs
        self.found: dict[str, ArrayWriter | None] = {}

    async def of(self, entry: Entry) -> ArrayWriter | str:
        """The engine to apply ``entry`` through, or why it has none."""
        if entry.path not in self.found:
            file = await _array_file(self.fs, entry.path)
            self.found[entry.path] = None if file is None else file.writer()
        writer = self.found[entry.path]
        if writer is None:
            return f"no writable array {entry.path or '/'} any more"
        if writer.identity != entry.identity:
            return f"{entry.path or '/'} is {writer.identity} now, not {entry.identity}"
        return writer


def _set_aside(journal: Journal, segment: Path, why: str) -> tuple[int, int]:
    """Refuse ``segment`` whole, kept for a person to look at."""
    kept = journal.set_aside(segment)
    log.error("journal %s: %s, refused whole (kept as %s)", segment, why, kept)
    return 0, 1


async def _apply(journal: Journal, segment: Path, writers: _Writers) -> tuple[int, int]:
    """Apply one segment's entries, read one at a time; returns (applied, refused)."""
    if segment.stat().st_size > journal.largest:
        return _set_aside(journal, segment, "larger than any segment")  # no segment of ours
    with open(segment, "rb") as f:
        end = journal.entries_in(segment, f)
        if end is None:
            return _set_aside(journal, segment, "a damaged segment header")
        applied, refused = await _apply_entries(segment, scan(f, end), writers)
    if refused:
        kept = journal.refuse(segment, refused)
        log.error("journal %s: %d refused entries kept in %s", segment, len(refused), kept)
    return applied, len(refused)


async def _apply_entries(
    segment: Path, items: Iterator[Entry | Refused], writers: _Writers
) -> tuple[int, list[Refused]]:
    """Apply the entries ``items`` gives, in order; returns how many, and the refused."""
    refused: list[Refused] = []
    applied = 0
    for item in items:
        if isinstance(item, Entry):
            item = await _apply_entry(segment, item, writers)  # the entry's bytes let go
            if item is None:
                applied += 1
                continue
        refused.append(item)
        log.error(
            "journal %s: %s (bytes %d-%d) refused", segment, item.reason, item.start, item.end
        )
    return applied, refused


async def _apply_entry(segment: Path, entry: Entry, writers: _Writers) -> Refused | None:
    """Write ``entry`` again through its array's engine; why it is refused, when its array
    is gone or changed."""
    try:
        found = await writers.of(entry)
        if isinstance(found, str):
            return Refused(entry.start, entry.end, f"a write at {entry.offset}: {found}")
        await found.write(entry.offset, entry.data)
    except FsError as e:  # the store failed: try it all again next time
        raise ReplayError(f"{segment}: a write to {entry.path or '/'}: {e}") from e
    return None


async def replay(journal: Journal, fs: Filesystem, arrays: Arrays) -> None:
    """Apply what an earlier mount left in the journal, then store it (a checkpoint)."""
    if not journal.pending:
        return
    writers, applied, refused = _Writers(fs), 0, 0
    started = time.monotonic()
    journal.replaying = True
    try:
        for segment in journal.pending:
            done, bad = await _apply(journal, segment, writers)
            applied, refused = applied + done, refused + bad
    finally:
        journal.replaying = False
    journal.sealed[:0], journal.pending = journal.pending, []
    stored = await checkpoint(journal, arrays)
    log.warning(
        "journal %s: %d acknowledged writes replayed%s, %d refused, in %.1f s; %s",
        journal.directory,
        applied,
        "" if not applied else f" into {sum(w is not None for w in writers.found.values())} arrays",
        refused,
        time.monotonic() - started,
        "stored" if stored else "not stored yet (kept in the journal and in the cache)",
    )


async def checkpoint(journal: Journal, arrays: Arrays) -> bool:
    """Seal the active segment, store every dirty chunk (and commit it, where a store
    keeps only what is committed), then delete the sealed segments: whatever they hold is
    in the store. False (segments kept) when storing or deleting failed."""
    journal.seal()
    done = list(journal.sealed)
    if not done:
        return True
    if await arrays.flush_all(durable=arrays.shared.store.transactional):
        return False
    return journal.discard(done)


async def keep(journal: Journal, arrays: Arrays, cache: ChunkCache) -> None:
    """Checkpoint whenever a segment fills, and when an idle mount has stored everything.
    While storing fails the journal grows, so a failed checkpoint is tried again soon: a
    second later, then twice as long each time, up to IDLE_CHECK_S."""
    pause = RETRY_FIRST_S
    while True:
        if not journal.sealed:
            full = trio.Event()
            journal.on_full = full.set
            with trio.move_on_after(IDLE_CHECK_S):
                await full.wait()
        if not (journal.sealed or (journal.active_bytes and not cache.dirty_bytes)):
            continue
        if await checkpoint(journal, arrays):
            pause = RETRY_FIRST_S
        else:
            await trio.sleep(pause)
            pause = min(2 * pause, IDLE_CHECK_S)
