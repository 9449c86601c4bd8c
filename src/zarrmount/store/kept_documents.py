"""Metadata documents of an immutable remote store kept in the disk cache: a remount
of a hierarchy nobody changes reads its documents from local disk, not the store.

Only where the store never changes (``-o immutable``): elsewhere a document must be
checked against the store before it is trusted, and for a document of a few hundred
bytes that check costs as much as fetching it again.
"""

from __future__ import annotations

from zarrmount.store.base import Store
from zarrmount.store.diskcache import DiskCache, Part
from zarrmount.store.wrapped import Wrapped

# the names of metadata documents, in every format zarrmount reads
NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
SUFFIXES = (".array.json", ".group.json")  # the v3 drafts' meta/ documents


def is_document(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return name in NAMES or name.endswith(SUFFIXES)


class KeptDocuments(Wrapped):
    """``inner``, its metadata documents read from and kept in ``disk`` (immutable)."""

    def __init__(self, inner: Store, disk: DiskCache) -> None:
        super().__init__(inner)
        self.disk = disk

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        if not is_document(key):
            return self.inner.get(key, deadline_s=deadline_s)
        part = Part(key)
        kept = self.disk.get(part, None)
        if kept is not None:
            return bytes(kept)
        value = self.inner.get(key, deadline_s=deadline_s)
        if value is not None:
            self.disk.put(part, None, value)
        return value
