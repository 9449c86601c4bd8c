"""Metadata documents and group listings of a remote store kept in the disk cache, so a
mount comes up and lists what it knew while the store is unreachable.

Where the store never changes (``-o immutable``) a kept document is served first, and a
remount reads none from the store. Elsewhere the store is the authority whenever it
answers: each document it gives is kept (written only when it changed), and the kept
one is served only by calls made ``offline()``, which the layers above make once the
store gave no answer (``Unreachable``): HTTP's stale-if-error. Offline, nothing else
reaches the store: a call for what was not kept fails as the store did.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar

from zarrmount.store.base import Store
from zarrmount.store.diskcache import DiskCache, Part
from zarrmount.store.failures import Unreachable
from zarrmount.store.wrapped import Wrapped

# the names of metadata documents, in every format zarrmount reads
NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
SUFFIXES = (".array.json", ".group.json")  # the v3 drafts' meta/ documents
# A kept value's first byte: a document, or the store's word that there is none.
PRESENT, ABSENT = b"+", b"-"
# set while calls are served from what was kept (the store unreachable); worker threads
# and a gather's threads inherit it
_OFFLINE: ContextVar[bool] = ContextVar("kept_documents_offline", default=False)


def is_document(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return name in NAMES or name.endswith(SUFFIXES)


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Within it, a KeptDocuments store serves what it kept and asks the store nothing."""
    token = _OFFLINE.set(True)
    try:
        yield
    finally:
        _OFFLINE.reset(token)


def _document(key: str) -> Part:
    return Part(f"{key}\0document")  # no key holds a NUL: never an object's own entry


def _names(prefix: str) -> Part:
    return Part(f"{prefix}\0names")


class KeptDocuments(Wrapped):
    """``inner``, its metadata documents and group listings kept in ``disk``."""

    def __init__(self, inner: Store, disk: DiskCache) -> None:
        super().__init__(inner)
        self.disk = disk
        self.keeps_documents = True

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        if not is_document(key):
            self._online(key)
            return self.inner.get(key, deadline_s=deadline_s)
        part = _document(key)
        if self.disk.immutable or _OFFLINE.get():
            kept = self._kept(part)
            if kept is not None:
                return None if kept[:1] == ABSENT else kept[1:]
            self._online(key)
        value = self.inner.get(key, deadline_s=deadline_s)
        self.disk.keep_latest(part, ABSENT if value is None else PRESENT + value)
        return value

    def list_dir(self, prefix: str) -> list[str]:
        part = _names(prefix)
        if _OFFLINE.get():
            kept = self._kept(part)
            if kept is None:
                self._online(prefix)
            return json.loads(kept)
        names = self.inner.list_dir(prefix)
        self.disk.keep_latest(part, json.dumps(names).encode())
        return names

    def _kept(self, part: Part) -> bytes | None:
        found = self.disk.get(part, None, stale=True)
        return None if found is None else bytes(found)

    @staticmethod
    def _online(what: str) -> None:
        """Refuse a call that would ask the store while offline (it did not answer)."""
        if _OFFLINE.get():
            raise Unreachable(f"{what}: not kept on disk, and the store is unreachable")

    # what else a hierarchy load or a listing walk may ask: never the store, offline
    def get_range(self, key: str, start: int, length: int, *, deadline_s: float | None = None):
        self._online(key)
        return self.inner.get_range(key, start, length, deadline_s=deadline_s)

    def get_buffer(self, key: str, *, deadline_s: float | None = None):
        self._online(key)
        return self.inner.get_buffer(key, deadline_s=deadline_s)

    def list_validated(self, prefix: str) -> dict[str, str]:
        self._online(prefix)
        return self.inner.list_validated(prefix)

    def list_tree(self, prefix: str) -> dict[str, str]:
        self._online(prefix)
        return self.inner.list_tree(prefix)

    def validator(self, key: str) -> str | None:
        self._online(key)
        return self.inner.validator(key)

    def root_exists(self) -> bool:
        self._online("the store's root")
        return self.inner.root_exists()
