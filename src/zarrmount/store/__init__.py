"""Key/value stores: local directories, fsspec and obstore URLs, Icechunk repositories."""

from __future__ import annotations

import os
from typing import Any

from zarrmount.store.base import Store, StoreError, public_url

# URL schemes -o client=obstore speaks to (others go through fsspec whatever the client;
# GCS too: obstore lists it through an XML API the GCS emulator of the tests lacks)
OBSTORE_SCHEMES = ("s3", "s3a", "az", "abfs", "abfss", "azure", "http", "https")


def open_store(
    source: str,
    storage_options: dict[str, Any] | None = None,
    timeout: float = 30.0,
    client: str = "fsspec",
    version: dict[str, str] | None = None,
) -> Store:
    """Open ``source``: a local path (or ``file://`` URL) directly, an Icechunk repository
    at ``version`` (``icechunk+file://``, ``icechunk+s3://``), an object store URL through
    ``client`` (fsspec or obstore), anything else via fsspec.

    A path ending in ``.zip`` opens the zip file read-only.
    """
    if source.startswith("icechunk+"):
        return _icechunk(source, storage_options or {}, version or {}, timeout)
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
    source: str, storage_options: dict[str, Any], version: dict[str, str], timeout: float
) -> Store:
    try:
        from zarrmount.store.icechunk_repo import open_icechunk
    except ImportError:
        raise StoreError(
            "Icechunk repositories need zarrmount[icechunk] (icechunk 2, Python >= 3.12)"
        ) from None
    return open_icechunk(source, storage_options, version, timeout)


__all__ = ["Store", "StoreError", "open_store", "public_url"]
