"""The tip of an Icechunk branch, mounted ``rw``: chunks go into a writable session, and
``sync`` (an fsync, a checkpoint of the journal, the unmount) commits them.

Many mounts, on one host or many, may write to one branch: Icechunk's transactions keep
them consistent. A commit that finds the branch moved is rebased onto it when the other
writers changed other chunks; where both changed the same chunk, the commit fails (and
its changes stay in this mount's session, uncommitted, for an administrator to decide)
unless ``-o on_conflict=ours`` makes this mount's chunks win.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import icechunk

from zarrmount.store.base import StoreError, public_url
from zarrmount.store.icechunk_repo import RepositoryStore
from zarrmount.store.versions import Commits
from zarrmount.store.zarr_store import one_line

log = logging.getLogger(__name__)

REBASE_TRIES = 100  # other writers committing meanwhile, each time
_SHOWN_CHUNKS = 8  # chunks a conflict's log line names, per array


def _conflicts(error: icechunk.RebaseFailedError) -> str:
    """The arrays and chunks both writers changed, for one log line."""
    parts = []
    for conflict in error.conflicts:
        chunks = [list(c) for c in (conflict.conflicted_chunks or [])]
        shown = ", ".join(str(c) for c in chunks[:_SHOWN_CHUNKS])
        more = f" and {len(chunks) - _SHOWN_CHUNKS} more" if len(chunks) > _SHOWN_CHUNKS else ""
        what = f" chunks {shown}{more}" if chunks else ""
        parts.append(f"{conflict.path.lstrip('/') or '/'}{what} ({conflict.conflict_type})")
    return "; ".join(parts) or str(error).splitlines()[0]


def _message(session: icechunk.Session) -> str:
    """What this commit changed, by array."""
    changes = session.status()
    paths = sorted(
        {*changes.updated_chunks, *changes.new_arrays, *changes.updated_arrays}
        | set(changes.deleted_arrays)
    )
    named = ", ".join(p.lstrip("/") or "/" for p in paths[:10])
    more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
    return f"zarrmount: wrote {named}{more}" if paths else "zarrmount: wrote"


class IcechunkBranch(RepositoryStore):
    transactional = True

    def __init__(
        self,
        url: str,
        repo: icechunk.Repository,
        branch: str,
        deadline_s: float,
        commits: Commits,
    ) -> None:
        self.repository, self.branch, self.commits = repo, branch, commits
        try:
            self.session = repo.writable_session(branch)
        except icechunk.IcechunkError as e:
            raise StoreError(one_line(e)) from None
        super().__init__(self.session.store, url, deadline_s)
        self.read_only_reason = None
        self.counts = {"commits": 0, "rebases": 0, "conflicts": 0}
        self._moved: set[str] | None = set()  # see changed_by_others
        # commits and the writes between them: no chunk lands in a session being committed
        self._commit_lock = threading.Lock()
        log.info("%s: writing to branch %s at %s", self.url, branch, self.session.snapshot_id)

    @property
    def identity(self) -> str:
        """The repository and the branch: what the journal of its writes belongs to."""
        return f"{public_url(self.url)}#{self.branch}"

    def origins(self, prefix: str) -> list[str]:
        return [f"branch {self.branch}, at snapshot {self.session.snapshot_id}"]

    def set(self, key: str, value: bytes) -> None:
        with self._commit_lock:
            super().set(key, value)

    def delete(self, key: str) -> None:
        with self._commit_lock:
            super().delete(key)

    def sync(self, keys: Iterable[str]) -> None:
        """Commit what the session holds (nothing: nothing to do)."""
        with self._commit_lock:
            if self.session.has_uncommitted_changes:
                self._commit()

    def _commit(self) -> None:
        session, parent = self.session, self.session.snapshot_id
        choice = icechunk.VersionSelection.UseOurs
        if self.commits.on_conflict == "fail":
            choice = icechunk.VersionSelection.Fail
        solver = icechunk.BasicConflictSolver(on_chunk_conflict=choice)
        message = self.commits.message or _message(session)
        try:
            snapshot = session.commit(message, rebase_with=solver, rebase_tries=REBASE_TRIES)
        except icechunk.RebaseFailedError as e:
            self.counts["conflicts"] += 1
            why = f"another writer changed the same chunks: {_conflicts(e)}"
            log.error(
                "commit to branch %s failed, its changes stay uncommitted in this mount: %s",
                self.branch,
                why,
            )
            raise StoreError(f"commit to branch {self.branch}: {why}") from None
        except icechunk.IcechunkError as e:
            raise StoreError(f"commit to branch {self.branch}: {one_line(e)}") from None
        self.counts["commits"] += 1
        onto = self.repository.lookup_snapshot(snapshot).parent_id
        if onto != parent:
            self.counts["rebases"] += 1
            self._moved = self._between(parent, onto, self._moved)
        log.info("committed %s to branch %s: %s", snapshot, self.branch, message)
        self.session = self.repository.writable_session(self.branch)
        self.inner = self.session.store

    def _between(self, old: str, new: str | None, known: set[str] | None) -> set[str] | None:
        """``known`` and the arrays other writers' commits from ``old`` to ``new`` changed
        (None: any, when Icechunk cannot tell)."""
        try:
            diff = self.repository.diff(from_snapshot_id=old, to_snapshot_id=new)
        except icechunk.IcechunkError as e:
            log.warning("cannot tell what other writers changed, all is read again: %s", e)
            return None
        if known is None:
            return None
        changed = {*diff.updated_chunks, *diff.updated_arrays, *diff.deleted_arrays}
        return known | {path.lstrip("/") for path in changed}

    def changed_by_others(self) -> set[str] | None:
        with self._commit_lock:
            moved, self._moved = self._moved, set()
        return moved

    def counters(self) -> dict[str, int]:
        return {
            **self.counts,
            "uncommitted": int(self.session.has_uncommitted_changes),
        }
