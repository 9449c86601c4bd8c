"""Key/value stores: local directories, fsspec and obstore URLs, Icechunk repositories."""

from __future__ import annotations

import os
from typing import Any

from zarrmount.store.base import Store, StoreError, public_url
from zarrmount.store.versions import Commits

# URL schemes -o client=obstore speaks to (others go through fsspec whatever the client;
# GCS too: obstore lists it through an XML API the GCS emulator of the tests lacks)
OBSTORE_SCHEMES = ("s3", "s3a", "az", "abfs", "abfss", "azure", "http", "https")


def open_store(
    source: str,
    storage_options: dict[str, Any] | None = None,
    timeout: float = 30.0,
    client: str = "fsspec",
    version: dict[str, str] | None = None,
    commits: Commits | None = None,
) -> Store:
    """Open ``source``: a local path (or ``file://`` URL) directly, an Icechunk repository
    at ``version`` (``icechunk+file://``, ``icechunk+s3://``), an object store URL through
    ``client`` (fsspec or obstore), anything else via fsspec. ``commits``: the tip of a
    repository's branch is opened to be written, and committed so.

    A path ending in ``.zip`` opens the zip file read-only.
    """
    if source.startswith("icechunk+"):
        return _icechunk(source, storage_options or {}, version or {}, timeout, commits)
    if version:
        raise StoreError(f"-o {'/'.join(version)} picks a version of an Icechunk repository")
    if source.startswith("file://"):
        source = source[len("file://") :]
    if "://" not in source and not source.endswith(".zip"):
        from zarrmount.store.local import LocalStore

        if not os.path.isdir(source):
            raise StoreError(f"{source}: no such directory")
        return LocalStore(source)
    if client == "obstore" and source.partition("://")[0] in OBSTORE_SCHEMES:
        return _obstore(source, storage_options or {}, timeout)
    from zarrmount.store.remote import FsspecStore

    if "://" not in source:
        source = f"zip::file://{os.path.abspath(source)}"
    try:
        return FsspecStore(source, deadline_s=timeout, **(storage_options or {}))
    except (ImportError, ValueError) as e:
        raise StoreError(f"{source}: {e}") from e


def _obstore(source: str, storage_options: dict[str, Any], timeout: float) -> Store:
    try:
        from zarrmount.store.objstore import ObstoreStore
    except ImportError:
        raise StoreError("-o client=obstore needs obstore: zarrmount[obstore]") from None
    return ObstoreStore(source, deadline_s=timeout, **storage_options)


def _icechunk(
    source: str,
    storage_options: dict[str, Any],
    version: dict[str, str],
    timeout: float,
    commits: Commits | None,
) -> Store:
    """A version of a repository; with ``commits``, the tip of a branch, to write."""
    try:
        from zarrmount.store import icechunk_branch, icechunk_repo
    except ImportError:
        raise StoreError(
            "Icechunk repositories need zarrmount[icechunk] (icechunk 2, Python >= 3.12)"
        ) from None
    if commits is None or set(version) - {"branch"}:  # a fixed version: refused for rw
        return icechunk_repo.open_version(source, storage_options, version, timeout)
    repo = icechunk_repo.open_repository(source, storage_options)
    branch = version.get("branch", icechunk_repo.DEFAULT_BRANCH)
    return icechunk_branch.IcechunkBranch(source, repo, branch, timeout, commits)


__all__ = ["Store", "StoreError", "open_store", "public_url"]
