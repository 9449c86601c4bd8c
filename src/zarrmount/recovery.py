"""The journal's part in a mount's life: writes a killed daemon acknowledged are applied
before the mount serves (replay), and segments are deleted once what they hold is stored
(checkpoints).

Replay applies each entry through the array's own engine, in the order they were
written, so it is the same write again: a replay cut short is simply done again by the
next mount. An entry that is damaged, or names an array that is gone or has another dtype
or shape now, is refused whole: one log line, and its bytes kept in the journal directory.
"""

from __future__ import annotations

import logging
import time
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


async def _apply(journal: Journal, segment: Path, writers: _Writers) -> tuple[int, int]:
    """Apply one segment's entries; returns (applied, refused)."""
    if segment.stat().st_size > journal.largest:  # no segment of ours: not read into memory
        kept = journal.set_aside(segment)
        log.error("journal %s: larger than any segment, refused whole (kept as %s)", segment, kept)
        return 0, 1
    content = journal.entries_of(segment, segment.read_bytes())
    if content is None:
        kept = journal.set_aside(segment)
        log.error("journal %s: a damaged segment header, refused whole (kept as %s)", segment, kept)
        return 0, 1
    refused: list[Refused] = []
    applied = 0
    for item in scan(content):
        if isinstance(item, Entry):
            try:
                found = await writers.of(item)
                if not isinstance(found, str):
                    await found.write(item.offset, item.data)
                    applied += 1
                    continue
            except FsError as e:  # the store failed: try it all again next time
                raise ReplayError(f"{segment}: a write to {item.path or '/'}: {e}") from e
            item = Refused(item.start, item.end, f"a write at {item.offset}: {found}")
        refused.append(item)
        log.error(
            "journal %s: %s (bytes %d-%d) refused", segment, item.reason, item.start, item.end
        )
    if refused:
        kept = journal.refuse(segment, content, refused)
        log.error("journal %s: %d refused entries kept in %s", segment, len(refused), kept)
    return applied, len(refused)


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
    in the store. False (segments kept) when storing failed."""
    journal.seal()
    done = list(journal.sealed)
    if not done:
        return True
    if await arrays.flush_all(durable=arrays.shared.store.transactional):
        return False
    journal.discard(done)
    return True


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
