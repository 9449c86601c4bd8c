"""Key/value stores: local directories, fsspec and obstore URLs, Icechunk repositories."""

from __future__ import annotations

import os
from typing import Any

from zarrmount.store.base import Store, StoreError, public_url
from zarrmount.store.failures import Unreachable as Unreachable
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
    virtual_prefixes: tuple[str, ...] = (),
) -> Store:
    """Open ``source``: a local path (or ``file://`` URL: a directory, a zip file, a
    reference set, an archival file), an Icechunk repository at ``version``
    (``icechunk+file://``, ``icechunk+s3://``), a reference set (``reference://``, its
    ``fo`` among the storage options), an object store URL through ``client`` (fsspec or
    obstore), anything else via fsspec. ``commits``: the tip of a repository's branch is
    opened to be written, and committed so. ``virtual_prefixes``: where references and
    virtual chunks may point, besides their own place.
    """
    options = storage_options or {}
    if source.startswith("icechunk+"):
        return _icechunk(source, options, version or {}, timeout, commits, virtual_prefixes)
    if version:
        raise StoreError(f"-o {'/'.join(version)} picks a version of an Icechunk repository")
    if source.startswith("reference://"):
        if "fo" not in options:
            raise StoreError("reference:// needs the reference set: -o so.fo=PATH")
        return _references(options["fo"], options, virtual_prefixes, timeout)
    if source.startswith("file://"):
        source = source[len("file://") :]
    if "://" not in source and not source.endswith(".zip"):
        return _local(source, virtual_prefixes, timeout)
    if client == "obstore" and source.partition("://")[0] in OBSTORE_SCHEMES:
        return _obstore(source, storage_options or {}, timeout)
    from zarrmount.store.remote import FsspecStore

    if "://" not in source:
        source = f"zip::file://{os.path.abspath(source)}"
    try:
        return FsspecStore(source, deadline_s=timeout, **(storage_options or {}))
    except (ImportError, ValueError) as e:
        raise StoreError(f"{source}: {e}") from e


def _local(path: str, prefixes: tuple[str, ...], timeout: float) -> Store:
    """A directory of Zarr data or of parquet references, a JSON reference set, or an
    archival file."""
    from zarrmount.store import archival, references
    from zarrmount.store.local import LocalStore

    if os.path.isdir(path):
        if references.is_parquet_set(path):
            return _references(path, {}, prefixes, timeout)
        return LocalStore(path)
    if not os.path.isfile(path):
        raise StoreError(f"{path}: no such directory")
    if path.endswith(".json"):
        return _references(path, {}, prefixes, timeout)
    if archival.kind_of(path) is not None:
        return archival.open_archival(path, timeout)
    raise StoreError(
        f"{path}: not a directory, a zip file, a reference set (.json) or a NetCDF, HDF5, "
        "FITS or TIFF file"
    )


def _references(fo: str, options: dict[str, Any], prefixes: tuple[str, ...], timeout: float):
    from zarrmount.store.references import ReferencesStore

    if "://" not in fo:
        fo = os.path.abspath(fo)
    return ReferencesStore(fo, options, prefixes, timeout)


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
    prefixes: tuple[str, ...],
) -> Store:
    """A version of a repository; with ``commits``, the tip of a branch, to write; its
    virtual chunks read from ``prefixes`` only."""
    try:
        from zarrmount.store import icechunk_branch, icechunk_repo
    except ImportError:
        raise StoreError(
            "Icechunk repositories need zarrmount[icechunk] (icechunk 2, Python >= 3.12)"
        ) from None
    if commits is None or set(version) - {"branch"}:  # a fixed version: refused for rw
        return icechunk_repo.open_version(source, storage_options, version, timeout, prefixes)
    repo = icechunk_repo.open_repository(source, storage_options, prefixes)
    branch = version.get("branch", icechunk_repo.DEFAULT_BRANCH)
    return icechunk_branch.IcechunkBranch(source, repo, branch, timeout, commits)


__all__ = ["Store", "StoreError", "open_store", "public_url"]
