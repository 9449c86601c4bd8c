"""Finds the nodes of a hierarchy in a store: blocking calls, run in worker threads.

Bad nodes never raise: they come back as :class:`HiddenNode` with the reason, so one
malformed document hides one node and the rest of the tree still mounts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from zarrmount.codecs import CodecError, Pipeline, build_pipeline
from zarrmount.format import v2
from zarrmount.format.model import ArrayNode, GroupNode, HiddenNode, MetadataError, Node
from zarrmount.format.names import is_safe_name
from zarrmount.store import Store, StoreError

log = logging.getLogger(__name__)

_METADATA_KEYS = {v2.ZARRAY, v2.ZGROUP, v2.ZATTRS, ".zmetadata"}


class SourceError(Exception):
    """The source holds no readable Zarr hierarchy at its root."""


@dataclass(frozen=True)
class Child:
    name: str
    node: Node
    pipeline: Pipeline | None = None


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def load_node(store: Store, path: str) -> tuple[Node, Pipeline | None] | None:
    """The node at ``path``, or ``None`` when nothing there is a Zarr node."""
    try:
        zarray = store.get(_join(path, v2.ZARRAY))
        zgroup = None if zarray is not None else store.get(_join(path, v2.ZGROUP))
        if zarray is None and zgroup is None:
            return None
        attributes = v2.parse_attributes(store.get(_join(path, v2.ZATTRS)))
        if zarray is not None:
            meta = v2.parse_array(zarray, attributes)
            return ArrayNode(path, meta), build_pipeline(meta)
        v2.parse_group(zgroup)
        return GroupNode(path, 2, attributes), None
    except (MetadataError, CodecError, StoreError) as e:
        kind = "array" if zarray is not None else "group" if zgroup is not None else "unknown"
        return HiddenNode(path, kind, str(e)), None


def load_root(store: Store) -> tuple[Node, Pipeline | None]:
    """The root node; a source without one cannot be mounted."""
    try:
        found = load_node(store, "")
    except StoreError as e:
        raise SourceError(str(e)) from e
    if found is None:
        raise SourceError(f"no Zarr metadata (.zgroup or .zarray) at the root of {store.url}")
    node, _ = found
    if isinstance(node, HiddenNode):
        raise SourceError(f"root {node.kind} of {store.url}: {node.reason}")
    return found


def load_children(store: Store, path: str) -> list[Child]:
    """The nodes directly below the group at ``path``, sorted by name."""
    children = []
    for name in store.list_dir(path):
        if name in _METADATA_KEYS:
            continue
        child_path = _join(path, name)
        found = load_node(store, child_path)
        if found is None:
            continue
        node, pipeline = found
        if not is_safe_name(name):
            node = HiddenNode(child_path, "unknown", f"name {name!r} is not a safe path component")
            pipeline = None
        children.append(Child(name, node, pipeline))
    return children


def walk(store: Store) -> list[Node]:
    """Every node, group by group, for inspection; groups that fail to list are skipped."""
    root, _ = load_root(store)
    nodes: list[Node] = [root]
    stack = [root] if isinstance(root, GroupNode) else []
    while stack:
        group = stack.pop()
        try:
            children = load_children(store, group.path)
        except StoreError as e:
            log.warning("cannot list group %r: %s", group.path, e)
            continue
        for child in children:
            nodes.append(child.node)
        stack.extend(reversed([c.node for c in children if isinstance(c.node, GroupNode)]))
    return nodes
