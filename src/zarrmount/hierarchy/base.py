"""What every hierarchy dialect offers: its root node and the children of a group.

Calls are blocking (store I/O) and run in worker threads. Bad nodes never raise: they
come back as :class:`HiddenNode` with the reason, so one malformed document hides one
node and the rest of the tree still mounts; a document that cannot be fetched hides its
node too, unless the store is unreachable: that fails the listing, as a failed listing
of the group's names does (the listing made before is served meanwhile). A group's
children's documents are fetched together (:class:`Documents`): their round trips overlap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from zarrmount.codecs import CodecError, Pipeline, shared_pipeline
from zarrmount.codecs.strings import StringChunks
from zarrmount.format.model import (
    ArrayMeta,
    ArrayNode,
    GroupNode,
    HiddenNode,
    MetadataError,
    Node,
)
from zarrmount.format.names import is_safe_name
from zarrmount.store import Store, StoreError

# Failures that hide one node rather than the mount.
NODE_ERRORS = (MetadataError, CodecError)

Found = tuple[Node, Pipeline | None]
# ``get(key)``: a metadata document's bytes, None when it is missing (StoreError)
Getter = Callable[[str], bytes | None]


class SourceError(Exception):
    """The source holds no readable Zarr hierarchy at its root."""


@dataclass(frozen=True, slots=True)
class Child:
    name: str
    node: Node
    pipeline: Pipeline | None = None  # None: an array's file builds its own when opened


def join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


class _Shared:
    """One copy of each equal immutable value met (dtypes, fill values, codec
    descriptions, shapes), so 100,000 arrays described alike hold one of each rather
    than 100,000 (about 1 KiB an array for a v3 document). Bounded whatever the
    metadata: a full table starts over. Listings run in worker threads, maybe several
    at once; a race costs at most a second copy."""

    LIMIT = 4096
    KEY_LENGTH = 4096  # values whose key has a longer part (text, bytes, tuple) are not kept

    def __init__(self) -> None:
        self._found: dict = {}

    def __call__(self, key: tuple[Hashable, ...], value: Any) -> Any:
        if any(isinstance(k, str | bytes | tuple) and len(k) > self.KEY_LENGTH for k in key):
            return value
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= self.LIMIT:
                self._found.clear()
            found = self._found[key] = value
        return found


_shared = _Shared()


def share_parts(meta: ArrayMeta) -> ArrayMeta:
    """Point ``meta``, just parsed and seen by nobody else yet, at the copies of its
    parts that other arrays already hold (equal values: nobody can tell the difference)."""

    def put(name: str, value: Any) -> None:
        object.__setattr__(meta, name, value)  # frozen, but nobody has seen it yet

    dtype = meta.dtype
    structured = dtype.fields is not None or dtype.subdtype is not None
    descr = str(dtype.descr) if structured else ""
    put("dtype", _shared(("dtype", dtype.str, descr), dtype))
    fill = meta.fill_value
    if meta.strings is None:  # an object's bytes are its address: not a key
        put("fill_value", _shared(("fill", dtype.str, descr, fill.tobytes()), fill))
    put("codecs", _shared(("codecs", repr(meta.codecs)), meta.codecs))
    put("key_encoding", _shared(("encoding", meta.key_encoding), meta.key_encoding))
    for name in ("shape", "chunks", "shards"):
        if (value := getattr(meta, name)) is not None:
            put(name, _shared(("tuple", value), value))
    return meta


def array_child(path: str, meta: ArrayMeta, data_prefix: str) -> tuple[Node, Pipeline | None]:
    """An array node, once its pipeline builds: codecs we cannot run hide it.

    The pipeline is not kept (it comes back as None): a file builds its own when opened,
    from the pipelines shared by arrays coded alike (:func:`shared_pipeline`), so a
    listing of 100,000 arrays coded 100,000 ways never holds 100,000 pipelines. The
    parts of ``meta`` that describe the array rather than name it are shared likewise.
    """
    try:
        if meta.strings is None:
            shared_pipeline(share_parts(meta))
        else:
            StringChunks(share_parts(meta), 0)
    except CodecError as e:
        return HiddenNode(path, "array", str(e)), None
    return ArrayNode(path, meta, data_prefix), None


def kind_of(node: Node) -> str:
    if isinstance(node, HiddenNode):
        return node.kind
    return "group" if isinstance(node, GroupNode) else "array"


def named_child(name: str, path: str, node: Node, pipeline: Pipeline | None) -> Child:
    if not is_safe_name(name):
        reason = f"name {name!r} is not a safe path component"
        return Child(name, HiddenNode(path, kind_of(node), reason))
    return Child(name, node, pipeline)


class Documents:
    """The documents a group's children are made from, fetched at once where the store
    overlaps requests (``Store.gather``); each read from the store when asked for
    otherwise, as is any key not named up front."""

    def __init__(self, store: Store, keys: Iterable[str]) -> None:
        self._store = store
        self._found = store.gather(list(keys))

    def get(self, key: str) -> bytes | None:
        if key not in self._found:
            return self._store.get(key)
        found = self._found.pop(key)  # read once: not held past its node
        if isinstance(found, StoreError):
            raise found
        return found


def probe_children(
    parent: str, names: Iterable[str], node: Callable[[str, Getter], Found | None], get: Getter
) -> list[Child]:
    """The children among ``names`` below ``parent`` that ``node`` finds to be nodes, in
    the order of ``names``, their documents read through ``get``."""
    children = []
    for name in names:
        path = join(parent, name)
        found = node(path, get)
        if found is not None:
            children.append(named_child(name, path, *found))
    return children


class Dialect(ABC):
    """One way of laying out a hierarchy in a store (v2, v3, a v3 draft)."""

    label: str

    def __init__(self, store: Store) -> None:
        self.store = store

    def documents(self) -> tuple[str, ...]:
        """The keys whose change means opening the hierarchy again: the root's metadata,
        and consolidated metadata where the dialect holds it."""
        return (self.store.root_marker or "",)

    @abstractmethod
    def root(self) -> tuple[Node, Pipeline | None]:
        """The root node (never hidden: a bad root raises SourceError)."""

    @abstractmethod
    def children(self, group: GroupNode) -> list[Child]:
        """The nodes directly below ``group``, sorted by name."""
