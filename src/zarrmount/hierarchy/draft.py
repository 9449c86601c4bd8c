"""Hierarchies in the v3 editor's draft layouts, with and without the ``root/`` prefix."""

from __future__ import annotations

from zarrmount.codecs import Pipeline
from zarrmount.format import draft
from zarrmount.format.model import GroupNode, HiddenNode, Node
from zarrmount.hierarchy.base import (
    NODE_ERRORS,
    Child,
    Dialect,
    Documents,
    Found,
    Getter,
    array_child,
    named_child,
)
from zarrmount.store import Store, StoreError, Unreachable


class DraftDialect(Dialect):
    def __init__(self, store: Store, suffix: str, legacy: bool) -> None:
        super().__init__(store)
        self.suffix = suffix
        self.legacy = legacy
        self.meta_root = "meta/root" if legacy else "meta"
        self.data_root = "data/root" if legacy else "data"
        self.label = "3-draft-root" if legacy else "3-draft"

    @classmethod
    def detect(cls, store: Store, suffix: str) -> DraftDialect:
        """Tell the layouts apart: the older one keeps everything below ``root``."""
        if any(store.get(f"meta/{kind}{suffix}") is not None for kind in ("group", "array")):
            return cls(store, suffix, legacy=False)
        legacy = any(
            store.get(f"meta/root.{kind}{suffix}") is not None for kind in ("group", "array")
        ) or "root" in store.list_dir("meta")
        return cls(store, suffix, legacy=legacy)

    def _meta_key(self, path: str, kind: str) -> str:
        if path:
            return f"{self.meta_root}/{path}.{kind}{self.suffix}"
        return f"meta/root.{kind}{self.suffix}" if self.legacy else f"meta/{kind}{self.suffix}"

    def node(self, path: str, has_descendants: bool, get: Getter | None = None) -> Found | None:
        """The node at ``path`` (None: none), its documents read through ``get`` (the
        store's by default)."""
        get = get or self.store.get
        kind = "unknown"
        try:
            raw = get(self._meta_key(path, "array"))
            if raw is not None:
                kind = "array"
                meta = draft.parse_array(raw, self.label)
                prefix = f"{self.data_root}/{path}/" if path else f"{self.data_root}/"
                return array_child(path, meta, prefix)
            raw = get(self._meta_key(path, "group"))
            if raw is None and not has_descendants:
                return None
            kind = "group"
            return draft.parse_group(path, raw), None
        except Unreachable:
            raise
        except (*NODE_ERRORS, StoreError) as e:
            return HiddenNode(path, kind, str(e)), None

    def root(self) -> tuple[Node, Pipeline | None]:
        return self.node("", has_descendants=True)

    def children(self, group: GroupNode) -> list[Child]:
        prefix = f"{self.meta_root}/{group.path}" if group.path else self.meta_root
        documents, prefixes = set(), set()
        for entry in self.store.list_dir(prefix):
            for kind in ("array", "group"):
                if entry.endswith(f".{kind}{self.suffix}"):
                    documents.add(entry[: -len(f".{kind}{self.suffix}")])
                    break
            else:
                if not entry.endswith(self.suffix):  # e.g. the root's own group.json
                    prefixes.add(entry)
        names = sorted(documents | prefixes)
        paths = [f"{group.path}/{name}" if group.path else name for name in names]
        keys = [self._meta_key(path, kind) for path in paths for kind in ("array", "group")]
        get = Documents(self.store, keys).get
        children = []
        for name, path in zip(names, paths, strict=True):
            found = self.node(path, name in prefixes, get)
            if found is not None:
                children.append(named_child(name, path, *found))
        return children
