"""Icechunk repositories (``icechunk+file:///PATH``, ``icechunk+s3://BUCKET/PREFIX``):
one version of the hierarchy, read through a session's zarr store.

The version is picked by ``-o branch``, ``tag``, ``snapshot`` or ``as_of`` (default: the
tip of ``main``) and resolved to a snapshot once, when the mount opens: a snapshot never
changes, so its store is ``fixed`` and its chunks are never checked again.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import icechunk

from zarrmount.store.base import StoreError, public_url
from zarrmount.store.versions import History, Snapshot
from zarrmount.store.zarr_store import LoopThread, ZarrPythonStore, one_line

log = logging.getLogger(__name__)

SCHEMES = ("icechunk+file", "icechunk+s3")
DEFAULT_BRANCH = "main"
# fsspec's names of S3 options (one ``so.`` set serves every client) and Icechunk's
_S3_ALIASES = {
    "endpoint_url": "endpoint_url",
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "region_name": "region",
    "region": "region",
    "anon": "anonymous",
    "allow_http": "allow_http",
    "force_path_style": "force_path_style",
}

# Icechunk warns on stderr, in colour, of things a mount cannot change (that a local
# repository is not safe for concurrent commits): errors reach us as exceptions anyway.
icechunk.set_logs_filter("error")


def _s3(bucket: str, prefix: str, options: Mapping[str, Any]) -> icechunk.Storage:
    unknown = sorted(set(options) - set(_S3_ALIASES))
    if unknown:
        raise StoreError(f"storage option {unknown[0]!r} is not one Icechunk's S3 storage takes")
    kwargs = {_S3_ALIASES[k]: v for k, v in options.items()}
    endpoint = str(kwargs.get("endpoint_url") or "")
    kwargs.setdefault("allow_http", endpoint.startswith("http://"))
    kwargs.setdefault("force_path_style", bool(endpoint))  # S3-compatible servers
    if "access_key_id" not in kwargs and not kwargs.get("anonymous"):
        kwargs["from_env"] = True  # the environment's AWS_* credentials, as fsspec would
    return icechunk.s3_storage(bucket=bucket, prefix=prefix or None, **kwargs)


def storage(url: str, options: Mapping[str, Any]) -> icechunk.Storage:
    """Where the repository lives, from its URL and the fsspec-style storage options."""
    parts = urlsplit(url)
    if parts.scheme == "icechunk+file":
        path = parts.path
        if parts.netloc or not path.startswith("/"):
            raise StoreError(f"{public_url(url)}: give the path whole, icechunk+file:///PATH")
        if not os.path.isdir(path):
            raise StoreError(f"{path}: no such directory")
        return icechunk.local_filesystem_storage(path)
    if parts.scheme == "icechunk+s3":
        return _s3(parts.netloc, parts.path.strip("/"), options)
    raise StoreError(f"unknown Icechunk URL scheme {parts.scheme!r} (known: {', '.join(SCHEMES)})")


@dataclass(frozen=True)
class Version:
    """What ``-o branch/tag/snapshot/as_of`` asked for, and the snapshot it resolved to."""

    asked: str  # "branch main", "tag v1", "snapshot ID", "branch main as of TIME"
    snapshot_id: str


def resolve(repo: icechunk.Repository, version: Mapping[str, str]) -> Version:
    """The snapshot ``version`` names; a missing name fails with a one-line reason."""
    try:
        if "tag" in version:
            return Version(f"tag {version['tag']}", repo.lookup_tag(version["tag"]))
        if "snapshot" in version:
            info = repo.lookup_snapshot(version["snapshot"])
            return Version(f"snapshot {info.id}", info.id)
        branch = version.get("branch", DEFAULT_BRANCH)
        if "as_of" in version:
            when = _utc(version["as_of"])
            session = repo.readonly_session(branch, as_of=when)
            return Version(f"branch {branch} as of {when.isoformat()}", session.snapshot_id)
        return Version(f"branch {branch}", repo.lookup_branch(branch))
    except icechunk.IcechunkError as e:
        raise StoreError(one_line(e)) from None


def _utc(text: str) -> datetime.datetime:
    """An ISO 8601 time; without a zone it is UTC (Icechunk's commit times are)."""
    when = datetime.datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _snapshot(info: icechunk.SnapshotInfo) -> Snapshot:
    return Snapshot(info.id, info.parent_id, info.written_at, info.message, dict(info.metadata))


class RepositoryStore(ZarrPythonStore):
    """A session's store in a repository, which tells the repository's history."""

    versioned = True
    final = (icechunk.IcechunkError,)  # Icechunk retries its storage's failures itself
    repository: icechunk.Repository

    def history(self) -> History:
        """Branches and tags, and every snapshot in their ancestry."""
        repo = self.repository
        try:
            branches = {name: repo.lookup_branch(name) for name in repo.list_branches()}
            tags = {name: repo.lookup_tag(name) for name in repo.list_tags()}
            snapshots: dict[str, Snapshot] = {}
            for tip in {*branches.values(), *tags.values()}:
                for info in repo.ancestry(snapshot_id=tip):
                    if info.id in snapshots:
                        break  # the rest of this line is known
                    snapshots[info.id] = _snapshot(info)
        except icechunk.IcechunkError as e:
            raise StoreError(f"history: {one_line(e)}") from None
        return History(branches, tags, snapshots)

    def at(self, snapshot_id: str) -> IcechunkStore:
        """The repository at another snapshot, on this store's loop."""
        try:
            self.repository.lookup_snapshot(snapshot_id)
        except icechunk.IcechunkError as e:
            raise StoreError(one_line(e)) from None
        version = Version(f"snapshot {snapshot_id}", snapshot_id)
        return IcechunkStore(self.url, self.repository, version, self.deadline_s, self._loop)


class IcechunkStore(RepositoryStore):
    """One snapshot of a repository; it never changes."""

    fixed = True

    def __init__(
        self,
        url: str,
        repo: icechunk.Repository,
        version: Version,
        deadline_s: float,
        loop: LoopThread | None = None,
    ) -> None:
        self.repository = repo
        self.version = version
        super().__init__(self._session(), url, deadline_s, loop)
        self.read_only_reason = (
            f"{version.asked} is a fixed version (-o rw writes to the tip of a branch)"
        )
        self._used, self._busy = time.monotonic(), 0
        self._session_lock = threading.Lock()  # the session is let go and opened again

    def _session(self) -> Any:
        return self.repository.readonly_session(snapshot_id=self.version.snapshot_id).store

    def _call(self, what: str, make: Any, deadline_s: float | None = None) -> Any:
        with self._session_lock:
            if self.inner is None:
                self.inner = self._session()
            self._busy += 1
        try:
            return super()._call(what, make, deadline_s)
        finally:
            with self._session_lock:
                self._busy -= 1
                self._used = time.monotonic()

    def release_if_idle(self, idle_s: float) -> bool:
        with self._session_lock:
            if self.inner is None or self._busy or time.monotonic() - self._used < idle_s:
                return False
            self.inner = None
            return True

    def origins(self, prefix: str) -> list[str]:
        return [f"snapshot {self.version.snapshot_id} ({self.version.asked})"]

    @property
    def identity(self) -> str:
        """The repository and the snapshot: what a disk cache entry is valid for."""
        return f"{public_url(self.url)}@{self.version.snapshot_id}"


def open_repository(
    url: str, options: Mapping[str, Any], prefixes: tuple[str, ...] = ()
) -> icechunk.Repository:
    """The repository; its virtual chunks may be read from ``prefixes`` only (with the
    credentials of the environment), a chunk anywhere else fails its read."""
    access = {_container(p): _access(_container(p)) for p in prefixes}
    try:
        return icechunk.Repository.open(
            storage(url, options), authorize_virtual_chunk_access=access or None
        )
    except icechunk.IcechunkError as e:
        raise StoreError(one_line(e)) from None


def _access(container: str) -> Any:
    """The credentials a container's chunks are read with: none for local files and HTTP,
    the environment's for object stores (never a command line's)."""
    scheme = container.partition("://")[0]
    if scheme == "file":
        return icechunk.credentials.LocalFileSystemAccess
    if scheme in ("http", "https"):
        return icechunk.credentials.HttpAccess
    if scheme in ("s3", "s3a"):
        return icechunk.s3_from_env_credentials()
    if scheme in ("gs", "gcs"):
        return icechunk.gcs_from_env_credentials()
    return icechunk.azure_from_env_credentials()


def _container(prefix: str) -> str:
    """A virtual chunk container's URL prefix as Icechunk names it (``file:///dir/``)."""
    if "://" not in prefix:
        prefix = "file://" + os.path.realpath(prefix)
    return prefix.rstrip("/") + "/"


def open_version(
    url: str,
    options: Mapping[str, Any],
    version: Mapping[str, str],
    deadline_s: float,
    prefixes: tuple[str, ...] = (),
) -> IcechunkStore:
    """The version of the repository at ``url`` that ``version`` names."""
    repo = open_repository(url, options, prefixes)
    found = resolve(repo, version)
    log.info("%s: %s is snapshot %s", public_url(url), found.asked, found.snapshot_id)
    return IcechunkStore(url, repo, found, deadline_s)
