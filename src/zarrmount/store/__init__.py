"""Key/value stores: local directories and fsspec URLs."""

from __future__ import annotations

import os

from zarrmount.store.base import Store, StoreError


def open_store(source: str) -> Store:
    """Open ``source``: a local path (or ``file://`` URL) directly, anything else via fsspec."""
    if source.startswith("file://"):
        source = source[len("file://") :]
    if "://" not in source and not source.endswith(".zip"):
        from zarrmount.store.local import LocalStore

        if not os.path.isdir(source):
            raise StoreError(f"{source}: no such directory")
        return LocalStore(source)
    from zarrmount.store.remote import FsspecStore

    if "://" not in source:
        source = f"zip::file://{os.path.abspath(source)}"
    return FsspecStore(source)


__all__ = ["Store", "StoreError", "open_store"]
