"""Zarr v2 hierarchies: ``.zgroup``/``.zarray`` documents found by listing directories."""

from __future__ import annotations

import logging

from zarrmount.codecs import Pipeline
from zarrmount.format import v2
from zarrmount.format.consolidated import Members, split
from zarrmount.format.model import GroupNode, HiddenNode, MetadataError, Node
from zarrmount.format.windowed import Stored
from zarrmount.hierarchy.base import (
    NODE_ERRORS,
    Child,
    Dialect,
    Documents,
    Found,
    Getter,
    array_child,
    join,
    probe_children,
)
from zarrmount.hierarchy.stored import digest, with_stored
from zarrmount.store import Store, StoreError, Unreachable

ZMETADATA = ".zmetadata"
_METADATA_KEYS = {v2.ZARRAY, v2.ZGROUP, v2.ZATTRS, ZMETADATA}
# A node's documents, all fetched at once when listing: one round trip a child (as
# zarr-python does), though an array has no .zgroup.
_NODE_DOCUMENTS = (v2.ZARRAY, v2.ZGROUP, v2.ZATTRS)
log = logging.getLogger(__name__)


def _consolidated(store: Store, previous: Dialect | None) -> tuple[bytes | None, Members | None]:
    """The digest of the ``.zmetadata`` file and its documents by key, each as its JSON
    text (see :mod:`zarrmount.format.consolidated`): None if absent or unusable; those
    ``previous`` read if the file is as it was then."""
    return with_stored(store, ZMETADATA, lambda stored: _read(stored, previous)) or (None, None)


def _read(stored: Stored, previous: Dialect | None) -> tuple[bytes, Members | None]:
    found = digest(stored)
    if isinstance(previous, V2Dialect) and previous.digest == found:
        return found, previous.consolidated
    try:
        _, metadata = split(stored, ZMETADATA, ("metadata",))
    except MetadataError as e:
        log.warning("%s: listing the store instead", e)
        return found, None
    if metadata is None:
        log.warning(".zmetadata has no metadata object: listing the store instead")
    return found, metadata


class V2Dialect(Dialect):
    label = "2"

    def __init__(self, store: Store, previous: Dialect | None = None) -> None:
        super().__init__(store)
        # Consolidated metadata answers every metadata read and listing without the store.
        self.digest, self.consolidated = _consolidated(store, previous)

    def documents(self) -> tuple[str, ...]:
        return (*super().documents(), v2.ZATTRS, ZMETADATA)

    def _get(self, key: str) -> bytes | None:
        if self.consolidated is None:
            return self.store.get(key)
        text = self.consolidated.get(key)
        return None if text is None or text == "null" else text.encode()  # null: none

    def _names(self, path: str) -> list[str]:
        if self.consolidated is None:
            return self.store.list_dir(path)
        prefix = f"{path}/" if path else ""
        names = {
            key[len(prefix) :].split("/", 1)[0]
            for key in self.consolidated
            if key.startswith(prefix) and "/" in key[len(prefix) :]
        }
        # An empty component (a key "/a/.zarray" or "a//b/.zarray") names no node: joined
        # to its parent's path it would name the parent itself.
        return sorted(names - {""})

    def node(self, path: str, get: Getter | None = None) -> Found | None:
        """The node at ``path``, or ``None`` when nothing there is a Zarr node; its
        documents read through ``get`` (the dialect's own reads by default)."""
        get = get or self._get
        zarray = zgroup = None
        try:
            zarray = get(join(path, v2.ZARRAY))
            zgroup = None if zarray is not None else get(join(path, v2.ZGROUP))
            if zarray is None and zgroup is None:
                return None
            attributes = v2.parse_attributes(get(join(path, v2.ZATTRS)))
            if zarray is not None:
                meta = v2.parse_array(zarray, attributes)
                return array_child(path, meta, f"{path}/" if path else "")
            v2.parse_group(zgroup)
            return GroupNode(path, 2, attributes), None
        except Unreachable:
            raise
        except (*NODE_ERRORS, StoreError) as e:
            kind = "array" if zarray is not None else "group" if zgroup is not None else "unknown"
            return HiddenNode(path, kind, str(e)), None

    def root(self) -> tuple[Node, Pipeline | None]:
        found = self.node("")
        assert found is not None, "the dialect was chosen because root metadata exists"
        return found

    def children(self, group: GroupNode) -> list[Child]:
        names = [n for n in self._names(group.path) if n not in _METADATA_KEYS]
        if self.consolidated is not None:
            return probe_children(group.path, names, self.node, self._get)
        paths = [join(group.path, name) for name in names]
        documents = Documents(self.store, [join(p, d) for p in paths for d in _NODE_DOCUMENTS])
        return probe_children(group.path, names, self.node, documents.get)
