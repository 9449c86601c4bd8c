"""Finds the nodes of a hierarchy in a store, whatever its format."""

from __future__ import annotations

from zarrmount.codecs import CodecError, Pipeline, shared_pipeline
from zarrmount.format.draft import is_entry_point, parse_entry_point
from zarrmount.format.jsondoc import MAX_BYTES, load_json
from zarrmount.format.model import ArrayNode, GroupNode, HiddenNode, MetadataError, Node
from zarrmount.format.v2 import ZARRAY, ZGROUP
from zarrmount.format.v3 import ZARR_JSON, parse_root
from zarrmount.format.windowed import Stored
from zarrmount.hierarchy.base import Child, Dialect, SourceError
from zarrmount.hierarchy.draft import DraftDialect
from zarrmount.hierarchy.stored import digest, with_stored
from zarrmount.hierarchy.v2 import V2Dialect
from zarrmount.hierarchy.v3 import V3Dialect
from zarrmount.store import Store, StoreError


def _dialect(store: Store, previous: Dialect | None) -> Dialect:
    found = _v3_dialect(store, previous)
    if found is not None:
        return found
    for key in (ZARRAY, ZGROUP):
        if store.get(key) is not None:
            store.root_marker = key
            return V2Dialect(store, previous)
    if not store.root_exists():
        raise SourceError(f"{store.url} does not exist (no such bucket, prefix or directory)")
    raise SourceError(
        f"no Zarr metadata (zarr.json, .zgroup or .zarray) at the root of {store.url}"
    )


def _v3_dialect(store: Store, previous: Dialect | None) -> Dialect | None:
    """The dialect of a store with a root ``zarr.json`` (None without)."""
    return with_stored(store, ZARR_JSON, lambda stored: _v3_opened(store, stored, previous))


def _v3_opened(store: Store, stored: Stored, previous: Dialect | None) -> Dialect:
    """The dialect of the root document ``stored``, parsed a node's document at a time
    (its consolidated metadata may hold 100,000), and only when it differs from the one
    ``previous`` read (a reload of the same document parses none)."""
    store.root_marker = ZARR_JSON
    found = digest(stored)
    if isinstance(previous, V3Dialect) and previous.digest == found:
        return previous
    try:
        doc, members = parse_root(stored)
    except MetadataError:
        suffix = _entry_point(stored)
        if suffix is None:
            raise
        return DraftDialect.detect(store, suffix)
    before = previous.consolidated if isinstance(previous, V3Dialect) else None
    return V3Dialect(store, doc, members, found, before)


def _entry_point(stored: Stored) -> str | None:
    """The metadata key suffix of a v3 draft's entry point (never v3 final) in ``stored``;
    None where it is none (a document larger than any may be is none)."""
    if stored.size > MAX_BYTES:
        return None
    raw = bytes(stored.read(0, stored.size))
    return parse_entry_point(raw) if is_entry_point(load_json(raw, ZARR_JSON)) else None


def open_hierarchy(
    store: Store, previous: Dialect | None = None
) -> tuple[Dialect, Node, Pipeline | None]:
    """The store's dialect and root node; raises SourceError when it cannot be mounted.
    ``previous``: the dialect the store was last opened with, whose parsed metadata is
    used again where the documents did not change (``previous`` itself where none did)."""
    try:
        dialect = _dialect(store, previous)
        node, pipeline = dialect.root()
        if isinstance(node, ArrayNode) and pipeline is None and node.meta.strings is None:
            pipeline = shared_pipeline(node.meta)  # listings keep none (see array_child)
    except (StoreError, MetadataError, CodecError) as e:
        raise SourceError(str(e)) from e
    if isinstance(node, HiddenNode):
        raise SourceError(f"root {node.kind} of {store.url}: {node.reason}")
    return dialect, node, pipeline


def walk(dialect: Dialect, root: Node) -> list[Node]:
    """Every node, group by group, for inspection; groups that fail to list are skipped."""
    nodes: list[Node] = [root]
    stack = [root] if isinstance(root, GroupNode) else []
    while stack:
        group = stack.pop()
        try:
            children = dialect.children(group)
        except StoreError as e:
            nodes.append(HiddenNode(group.path, "group", f"cannot list: {e}"))
            continue
        nodes.extend(c.node for c in children)
        stack.extend(reversed([c.node for c in children if isinstance(c.node, GroupNode)]))
    return nodes


__all__ = ["Child", "Dialect", "SourceError", "open_hierarchy", "walk"]
