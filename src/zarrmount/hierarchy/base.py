"""What every hierarchy dialect offers: its root node and the children of a group.

Calls are blocking (store I/O) and run in worker threads. Bad nodes never raise: they
come back as :class:`HiddenNode` with the reason, so one malformed document hides one
node and the rest of the tree still mounts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from zarrmount.codecs import CodecError, Pipeline, build_pipeline
from zarrmount.format.model import (
    ArrayMeta,
    ArrayNode,
    GroupNode,
    HiddenNode,
    MetadataError,
    Node,
)
from zarrmount.format.names import is_safe_name
from zarrmount.store import Store

# Failures that hide one node rather than the mount.
NODE_ERRORS = (MetadataError, CodecError)


class SourceError(Exception):
    """The source holds no readable Zarr hierarchy at its root."""


@dataclass(frozen=True)
class Child:
    name: str
    node: Node
    pipeline: Pipeline | None = None


def join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def array_child(path: str, meta: ArrayMeta, data_prefix: str) -> tuple[Node, Pipeline | None]:
    """An array node with its pipeline; codecs we cannot run hide it."""
    try:
        return ArrayNode(path, meta, data_prefix), build_pipeline(meta)
    except CodecError as e:
        return HiddenNode(path, "array", str(e)), None


def kind_of(node: Node) -> str:
    if isinstance(node, HiddenNode):
        return node.kind
    return "group" if isinstance(node, GroupNode) else "array"


def named_child(name: str, path: str, node: Node, pipeline: Pipeline | None) -> Child:
    if not is_safe_name(name):
        reason = f"name {name!r} is not a safe path component"
        return Child(name, HiddenNode(path, kind_of(node), reason))
    return Child(name, node, pipeline)


def probe_children(
    parent: str,
    names: list[str],
    skip: set[str],
    node: Callable[[str], tuple[Node, Pipeline | None] | None],
) -> list[Child]:
    """The children among ``names`` below ``parent`` that ``node`` finds to be nodes."""
    children = []
    for name in names:
        if name in skip:
            continue
        path = join(parent, name)
        found = node(path)
        if found is not None:
            children.append(named_child(name, path, *found))
    return children


class Dialect(ABC):
    """One way of laying out a hierarchy in a store (v2, v3, a v3 draft)."""

    label: str

    def __init__(self, store: Store) -> None:
        self.store = store

    @abstractmethod
    def root(self) -> tuple[Node, Pipeline | None]:
        """The root node (never hidden: a bad root raises SourceError)."""

    @abstractmethod
    def children(self, group: GroupNode) -> list[Child]:
        """The nodes directly below ``group``, sorted by name."""
