"""Zarr v3 hierarchies: ``zarr.json`` in every node, or consolidated in the root's."""

from __future__ import annotations

from typing import Any

from zarrmount.codecs import Pipeline
from zarrmount.format import v3
from zarrmount.format.model import GroupNode, HiddenNode, MetadataError, Node
from zarrmount.hierarchy.base import (
    NODE_ERRORS,
    Child,
    Dialect,
    array_child,
    join,
    kind_of,
    named_child,
    probe_children,
)
from zarrmount.store import Store, StoreError


def parse_node(path: str, doc: Any) -> tuple[Node, Pipeline | None]:
    kind = doc.get("node_type", "unknown") if isinstance(doc, dict) else "unknown"
    try:
        if not isinstance(doc, dict):
            raise MetadataError("metadata is not a JSON object")
        if kind == "array":
            return array_child(path, v3.parse_array(path, doc), f"{path}/" if path else "")
        return v3.parse_group(path, doc), None
    except NODE_ERRORS as e:
        return HiddenNode(path, str(kind), str(e)), None


def _ambiguous(root_doc: dict[str, Any]) -> dict[str, str]:
    """Why each consolidated path that more than one key names is hidden:
    :func:`v3.consolidated` strips ``/`` from both ends of each key, so ``a`` and ``/a``
    name one node and only the document that came last would be kept."""
    keys: dict[str, list[str]] = {}
    for key, doc in root_doc["consolidated_metadata"]["metadata"].items():
        if isinstance(doc, dict):
            keys.setdefault(key.strip("/"), []).append(key)
    return {
        path: f"consolidated metadata names it more than once: {named!r}"
        for path, named in keys.items()
        if len(named) > 1
    }


class V3Dialect(Dialect):
    label = "3"

    def __init__(self, store: Store, root_doc: dict[str, Any]) -> None:
        super().__init__(store)
        self.root_doc = root_doc
        # Listing from consolidated metadata needs no store listing at all.
        self.consolidated = v3.consolidated(root_doc) if root_doc["node_type"] == "group" else None
        self.ambiguous = _ambiguous(root_doc) if self.consolidated is not None else {}

    def node(self, path: str) -> tuple[Node, Pipeline | None] | None:
        try:
            raw = self.store.get(join(path, v3.ZARR_JSON))
            if raw is None:
                return None
            doc = v3.parse_document(raw)
        except (MetadataError, StoreError) as e:
            return HiddenNode(path, "unknown", str(e)), None
        return parse_node(path, doc)

    def root(self) -> tuple[Node, Pipeline | None]:
        return parse_node("", self.root_doc)

    def children(self, group: GroupNode) -> list[Child]:
        if self.consolidated is not None:
            return self._consolidated_children(group.path)
        names = self.store.list_dir(group.path)
        return probe_children(group.path, names, {v3.ZARR_JSON}, self.node)

    def _consolidated_children(self, parent: str) -> list[Child]:
        children = []
        for path, doc in sorted(self.consolidated.items()):
            head, _, name = path.rpartition("/")
            if head == parent and name:
                node, pipeline = parse_node(path, doc)
                if path in self.ambiguous:
                    node, pipeline = HiddenNode(path, kind_of(node), self.ambiguous[path]), None
                children.append(named_child(name, path, node, pipeline))
        return children
