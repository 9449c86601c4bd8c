"""Zarr v3 hierarchies: ``zarr.json`` in every node, or consolidated in the root's."""

from __future__ import annotations

import json
import threading
from typing import Any

from zarrmount.codecs import Pipeline
from zarrmount.format import v3
from zarrmount.format.consolidated import Members
from zarrmount.format.model import GroupNode, HiddenNode, MetadataError, Node
from zarrmount.hierarchy.base import (
    NODE_ERRORS,
    Child,
    Dialect,
    Documents,
    Found,
    Getter,
    array_child,
    join,
    kind_of,
    named_child,
    probe_children,
)
from zarrmount.store import Store, StoreError, Unreachable


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


class Consolidated:
    """The documents a group's consolidated metadata holds, each kept as its JSON text
    under its parent's path until that group is first listed, then as that group's
    children, the very nodes its directory holds (100,000 arrays: 40 MB of text before,
    nothing of their own after). A child described as the ``previous`` metadata described
    it is the node listed then (which directories still hold): not held twice."""

    def __init__(self, members: Members, previous: Consolidated | None = None) -> None:
        self._texts: dict[str, dict[str, str]] = {}  # parent -> name -> document
        self._children: dict[str, list[Child]] = {}  # parent -> its children, once listed
        self._lock = threading.Lock()  # listings run in worker threads
        twice = set()
        for key, text in members.items():
            head, _, name = key.strip("/").rpartition("/")
            if name and text.startswith("{"):
                below = self._texts.setdefault(head, {})
                if name in below:
                    twice.add(join(head, name))
                below[name] = text  # the last, as a dict of the stripped keys keeps
        self.ambiguous = _ambiguous(members, twice)
        listed = previous._children.items() if previous is not None else ()
        self._before = {parent: found for parent, found in listed if parent in self._texts}

    def children(self, parent: str) -> list[Child]:
        with self._lock:
            found = self._children.get(parent)
            if found is None:
                texts = sorted(self._texts.pop(parent, {}).items())
                before = {c.name: c for c in self._before.pop(parent, ())}
                found = [self._child(parent, *t, before.get(t[0])) for t in texts]
                self._children[parent] = found
        return list(found)

    def _child(self, parent: str, name: str, text: str, before: Child | None) -> Child:
        path = join(parent, name)
        node, pipeline = parse_node(path, json.loads(text))  # checked when it was split
        if path in self.ambiguous:
            node, pipeline = HiddenNode(path, kind_of(node), self.ambiguous[path]), None
        child = named_child(name, path, node, pipeline)
        return before if before is not None and repr(before) == repr(child) else child


def _ambiguous(members: Members, twice: set[str]) -> dict[str, str]:
    """Why each path in ``twice`` is hidden: :class:`Consolidated` strips ``/`` from both
    ends of each key, so ``a`` and ``/a`` name one node and only the document that came
    last would be kept."""
    keys: dict[str, list[str]] = {}
    if twice:
        for key, text in members.items():
            if key.strip("/") in twice and text.startswith("{"):
                keys.setdefault(key.strip("/"), []).append(key)
    return {
        path: f"consolidated metadata names it more than once: {named!r}"
        for path, named in keys.items()
    }


class V3Dialect(Dialect):
    label = "3"

    def __init__(
        self,
        store: Store,
        root_doc: dict[str, Any],
        members: Members | None,
        digest: bytes,
        previous: Consolidated | None = None,
    ) -> None:
        super().__init__(store)
        self.root_doc = root_doc  # its consolidated metadata empty: the documents are here
        self.digest = digest  # of the root's zarr.json
        # Listing from consolidated metadata needs no store listing at all.
        group = root_doc["node_type"] == "group"
        self.consolidated = (
            Consolidated(members, previous) if members is not None and group else None
        )

    def node(self, path: str, get: Getter | None = None) -> Found | None:
        """The node at ``path``, or ``None`` when it has no ``zarr.json``; read through
        ``get`` (the store's by default)."""
        try:
            raw = (get or self.store.get)(join(path, v3.ZARR_JSON))
            if raw is None:
                return None
            doc = v3.parse_document(raw)
        except Unreachable:
            raise
        except (MetadataError, StoreError) as e:
            return HiddenNode(path, "unknown", str(e)), None
        return parse_node(path, doc)

    def root(self) -> tuple[Node, Pipeline | None]:
        return parse_node("", self.root_doc)

    def children(self, group: GroupNode) -> list[Child]:
        if self.consolidated is not None:
            return self.consolidated.children(group.path)
        names = [n for n in self.store.list_dir(group.path) if n != v3.ZARR_JSON]
        keys = [join(join(group.path, name), v3.ZARR_JSON) for name in names]
        return probe_children(group.path, names, self.node, Documents(self.store, keys).get)
