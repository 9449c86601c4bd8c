"""The filesystem as FUSE sees it, without importing pyfuse3: inodes, handles, requests.

The handlers know no kind of node: each request goes to the node's (or the handle's) own
method (``vfs/node.py``). The parts it works with are made by the mount's assembly.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import stat
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from zarrmount.array import Pipeline
from zarrmount.array.freshness import Ttl
from zarrmount.errors import FsError, enoent
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.hierarchy.base import Child, Dialect
from zarrmount.options import MountOptions
from zarrmount.process_memory import allocation_sites, memory_stats
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.node import Handle, Node
from zarrmount.vfs.table import ROOT_INODE, InodeTable

ROOT_ARRAY_NAME = "array"
BLOCK_SIZE = 1 << 20
# every extended attribute the mount shows is in the user namespace
XATTR_NAMESPACE = "user."
STATS_XATTR = "user.zarrmount.stats"
PID_XATTR = "user.zarrmount.pid"
HEAP_XATTR = "user.zarrmount.heap"  # a daemon tracing its allocations: the largest sites
# Root arrays readied for their first read once mounted: past a few, all use the same
# buffer sizes and codecs (100,000 arrays at the root would only cost time).
WARM_ARRAYS = 16
# How long the kernel may keep names and attributes where nothing changes them.
ENTRY_TIMEOUT = 3600.0
# Extended attribute sets kept once made (``getfattr -d`` asks for each in turn).
KEEP_XATTRS = 64


@dataclass(slots=True)
class Attr:
    ino: int
    mode: int
    size: int
    uid: int
    gid: int
    mtime_ns: int
    nlink: int = 1
    blksize: int = BLOCK_SIZE
    entry_timeout: float = ENTRY_TIMEOUT  # seconds the kernel may keep the name
    attr_timeout: float = ENTRY_TIMEOUT  # and the attributes

    @property
    def blocks(self) -> int:
        return -(-self.size // 512)


def _clamp(seconds: float) -> float:
    return min(max(seconds, 0.0), ENTRY_TIMEOUT)


def _ignore(_seconds: float) -> None:
    """Latencies nobody observes."""


@dataclass
class Reloaded:
    """What a reload changed: paths added, removed and replaced, and the kernel's cached
    names to forget, as (directory inode, name)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    stale: list[tuple[int, str]] = field(default_factory=list)

    def note(self, ino: int, path: str, *changes: set[str]) -> None:
        for found, names in zip((self.added, self.removed, self.replaced), changes, strict=True):
            found += sorted(f"{path}/{n}" if path else n for n in names)
            self.stale += [(ino, n) for n in names]

    def __str__(self) -> str:
        kinds = (("added", self.added), ("removed", self.removed), ("changed", self.replaced))
        return ", ".join(f"{len(paths)} {kind}{_some(paths)}" for kind, paths in kinds)


def _some(paths: list[str], shown: int = 5) -> str:
    """`` (a, b, ...)``: the first few of ``paths``, for a log line."""
    if not paths:
        return ""
    return f" ({', '.join(paths[:shown])}{', ...' if len(paths) > shown else ''})"


class Filesystem:
    def __init__(
        self,
        table: InodeTable,
        root: GroupNode | ArrayNode,
        options: MountOptions,
        statistics: Callable[[], dict[str, int]],
        ttl: Ttl | None = None,
    ) -> None:
        """``root``: the root group, or a root array (shown in a directory of its own);
        ``statistics``: the counters of the parts below, for ``stats``; ``ttl``: how long
        listings are trusted (None: for good)."""
        self.options = options
        self.ttl = ttl or Ttl(None, None)
        self.table = table
        self._statistics = statistics
        self._handles: dict[int, Handle] = {}
        self._handle_inos: dict[int, int] = {}  # the node each handle holds
        self._next_fh = 1
        self._xattrs: OrderedDict[int, dict[str, bytes]] = OrderedDict()  # see KEEP_XATTRS
        self.requests: Counter[str] = Counter()  # by kind, counted by the adapter
        self.read_bytes = 0  # served by reads
        self.written_bytes = 0  # taken by writes
        self.read_latency: Callable[[float], None] = _ignore  # seconds a read took (metrics)
        # attributes of the root that set something: name -> setter of its value
        self.controls: dict[str, Callable[[bytes], None]] = {}
        # attributes of the root made when read (not listed): name -> maker of its value
        self.reports: dict[str, Callable[[], bytes]] = {}
        # attributes whose reading asks for something of a node (a mount is read-only:
        # the kernel sets none there): name -> asker, given the node's inode
        self.asks: dict[str, Callable[[int], bytes]] = {}
        if isinstance(root, GroupNode):
            table.add(Directory(ROOT_INODE, ROOT_INODE, root, table))
        else:
            holder = table.add(Directory(ROOT_INODE, ROOT_INODE, None, table))
            holder.hold(Child(ROOT_ARRAY_NAME, root))

    # -- requests ------------------------------------------------------------

    def getattr(self, ino: int) -> Attr:
        node = self.table[ino]
        opts = self.options
        mode = node.mode(opts.read_only)
        mode = stat.S_IFMT(mode) | (self._bits(mode) & ~opts.umask)
        mtime = node.mtime_ns() or self.table.mtime_ns
        attr = Attr(ino, mode, node.size(), opts.uid, opts.gid, mtime, node.nlink)
        attr.entry_timeout, attr.attr_timeout = self._timeouts(node)
        return attr

    async def fresh_attr(self, ino: int) -> Attr:
        """``getattr`` once what the node caches is checked against the store: the kernel
        asks when the attributes it kept expire, and drops its pages of a file whose
        mtime changed."""
        node = self.table[ino]
        await node.ready()
        await node.revalidate()
        return self.getattr(ino)

    def _timeouts(self, node: Node) -> tuple[float, float]:
        """How long the kernel may keep the node's name: what is left of the metadata TTL
        of the listing that showed it, so it asks again no later than the mount lists
        again; and its attributes: what is left of its data's own TTL (an array's chunks:
        a change shows in its mtime), else the period."""
        metadata, period = self.ttl.metadata, self.ttl.period
        entry = attr = ENTRY_TIMEOUT
        if metadata is not None:
            directory = self.table[node.parent]
            entry = metadata - directory.age() if isinstance(directory, Directory) else 0.0
        if period is not None:
            own = node.fresh_for()
            attr = period if own is None else own
        return _clamp(entry), _clamp(attr)

    def _bits(self, mode: int) -> int:
        """The permission bits of a node of ``mode``: the node's own, or those of
        ``file_mode`` and ``dir_mode`` (a file that cannot be written has no write bits)."""
        opts = self.options
        if stat.S_ISDIR(mode):
            return stat.S_IMODE(mode) if opts.dir_mode is None else opts.dir_mode
        if opts.file_mode is None:
            return stat.S_IMODE(mode)
        return opts.file_mode if mode & 0o200 else opts.file_mode & ~0o222

    async def lookup(self, parent: int, name: str) -> Attr:
        """The attributes of ``name`` in ``parent``; the kernel now holds one more lookup
        of it (``forget`` gives it back)."""
        attr = await self._lookup(parent, name)
        self.table.hold(attr.ino)
        return attr

    def listed(self, ino: int) -> None:
        """A directory entry reached the kernel (one more lookup it holds)."""
        self.table.hold(ino)

    def forget(self, lookups: list[tuple[int, int]]) -> None:
        """The kernel forgot these (inode, lookups)."""
        for ino, count in lookups:
            self.table.release(ino, count)

    async def _lookup(self, parent: int, name: str) -> Attr:
        node = self.table[parent]
        ttl = self.ttl
        children = await node.children(ttl.metadata)
        if name not in children and ttl.negative is not None:
            children = await node.children(ttl.negative)  # absent: trusted for less
        if name == ".":
            return self.getattr(parent)
        if name == "..":
            return self.getattr(node.parent)
        ino = children.get(name)
        if ino is None:
            ino, _listed = self.table.extras.get(parent, {}).get(name, (None, False))
        if ino is None:
            raise enoent(name)
        await self.table[ino].ready()
        return self.getattr(ino)

    async def readdir(self, ino: int) -> list[tuple[str, Attr]]:
        children = await self.table[ino].children(self.ttl.period)
        extras = self.table.extras.get(ino, {})
        shown = {name: i for name, (i, listed) in extras.items() if listed} | children
        for child in shown.values():
            await self.table[child].ready()
        return [(name, self.getattr(child)) for name, child in sorted(shown.items())]

    def open(self, ino: int, flags: int) -> int:
        node = self.table[ino]
        if node.is_dir:
            raise FsError(errno.EISDIR)
        if self.options.read_only and (flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC):
            raise FsError(errno.EROFS)
        fh = self._next_fh
        self._handles[fh] = node.open(flags)
        self._handle_inos[fh] = ino
        self.table.hold(ino)
        self._next_fh += 1
        return fh

    def direct_io(self, fh: int) -> bool:
        """Whether the handle ``fh`` is read past the page cache (its own, or the mount's)."""
        return self.options.direct_io or self._handle(fh).direct_io

    def _handle(self, fh: int) -> Handle:
        handle = self._handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        return handle

    async def read(
        self, fh: int, offset: int, size: int, reply: np.ndarray | None = None
    ) -> memoryview | bytes:
        start = time.perf_counter()
        data = await self._handle(fh).read(offset, size, reply)
        self.read_bytes += len(data)
        self.read_latency(time.perf_counter() - start)
        return data

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        written = await self._handle(fh).write(offset, data)
        self.written_bytes += written
        return written

    async def flush(self, fh: int) -> None:
        """On close and fsync: store this file's dirty chunks, report write-back errors."""
        if (handle := self._handles.get(fh)) is not None:
            await handle.flush()

    async def fsync(self, fh: int) -> None:
        """fsync and fdatasync: this file's data stored and, where the store can, durable."""
        if (handle := self._handles.get(fh)) is not None:
            await handle.fsync()

    async def release(self, fh: int) -> None:
        handle = self._handles.pop(fh, None)
        if handle is not None:
            try:
                await handle.release()
            finally:
                self.table.release(self._handle_inos.pop(fh))

    def setattr(self, ino: int, size: int | None, mtime_ns: int | None, other: bool) -> Attr:
        """Only a no-op truncation (to 0 or to the size itself) and times can change."""
        node = self.table[ino]
        if self.options.read_only:
            raise FsError(errno.EROFS)
        if other:
            raise FsError(errno.EPERM)
        if size is not None:
            node.truncate(size)
        if mtime_ns is not None:
            node.set_mtime(mtime_ns)
        return self.getattr(ino)

    async def warm_up(self, budget: int) -> None:
        """List the root, and ready each of its first WARM_ARRAYS files for its first
        read (codecs run once, a few chunk buffers in the pool), within ``budget`` bytes.
        A first read then costs a few chunk decodes; on these machines the first decode in
        a process and fresh buffers would double that."""
        try:
            children = await self.table[ROOT_INODE].children()
        except FsError:
            return  # logged; the first lookup will try again
        files = (self.table[ino] for ino in children.values())
        for node in itertools.islice((n for n in files if not n.is_dir), WARM_ARRAYS):
            if budget <= 0:
                break
            try:
                budget -= await node.warm_up(budget)
            except FsError:
                continue  # logged

    def arrays_of(self, ino: int) -> tuple[str, Callable[[], Awaitable[list[ArrayNode]]]]:
        """The path of node ``ino``, and what lists the arrays at and below it (a group's
        subtree listed where it was not yet): what a warm job fetches."""
        start = self.table[ino]
        if not isinstance(start, ArrayFile | Directory):
            raise FsError(errno.EINVAL, "neither an array file nor a group's directory")

        async def arrays() -> list[ArrayNode]:
            found, todo = [], [start]
            while todo:
                node = todo.pop()
                if isinstance(node, ArrayFile):
                    found.append(node.model)
                elif isinstance(node, Directory):
                    children = await node.children(self.ttl.metadata)
                    todo += [self.table[i] for i in children.values()]
            return found

        model = start.model
        return ("" if model is None else model.path), arrays

    async def reload(
        self, dialect: Dialect, root: GroupNode | ArrayNode, pipeline: Pipeline | None = None
    ) -> Reloaded:
        """Show the hierarchy as ``dialect`` now finds it: every listed group is listed
        again, unchanged nodes stay, open handles of removed ones keep working until closed.
        The root must stay what it was (a group, or an array: EIO)."""
        holder = self.table[ROOT_INODE]
        holder.take_root(root, pipeline)
        self.table.tree.use(dialect, root, pipeline)
        self._xattrs.clear()
        done = Reloaded()
        queue = [(holder, "")]
        while queue:
            directory, path = queue.pop()
            added, removed, replaced = await directory.reload()
            done.note(directory.ino, path, added, removed, replaced)
            for name, ino in directory.listing.entries.items():
                node = self.table[ino]
                if isinstance(node, Directory) and node.listed:
                    queue.append((node, f"{path}/{name}" if path else name))
        self.table.arrays.gone(set(done.removed) | set(done.replaced))
        return done

    # -- attributes and statistics -------------------------------------------

    def xattrs(self, ino: int) -> dict[str, bytes]:
        node = self.table[ino]
        found = self._xattrs.get(ino)
        if found is None:
            found = self._xattrs[ino] = node.xattrs()
            while len(self._xattrs) > KEEP_XATTRS:
                self._xattrs.popitem(last=False)
        else:
            self._xattrs.move_to_end(ino)
        if ino == ROOT_INODE:
            found = dict(found)
            found[STATS_XATTR] = json.dumps(self.stats()).encode()
            found[PID_XATTR] = str(os.getpid()).encode()
        return found

    def _owner_only(self, name: str, uid: int) -> None:
        if uid not in (0, self.options.uid):
            raise FsError(errno.EPERM, f"{name}: only root and the mount's owner")

    def control(self, ino: int, name: str, value: bytes, uid: int) -> bool:
        """Set one of the root's controls (``user.zarrmount.faults``); False where there is
        none of that name. Only root and the mount's owner may."""
        setter = self.controls.get(name) if ino == ROOT_INODE else None
        if setter is None:
            return False
        self._owner_only(name, uid)
        try:
            setter(value)
        except ValueError as e:
            raise FsError(errno.EINVAL, str(e)) from e
        return True

    def getxattr(self, ino: int, name: str, uid: int) -> bytes:
        """``uid``: the asker's (only root and the mount's owner ask for something)."""
        if not name.startswith(XATTR_NAMESPACE):  # what ls asks of every file (a security
            raise FsError(errno.ENODATA)  # context, ACLs): answered without making ours
        if name in self.asks:
            self._owner_only(name, uid)
            return self.asks[name](ino)
        if ino == ROOT_INODE and name == HEAP_XATTR:
            return self._allocation_sites()
        if ino == ROOT_INODE and name in self.reports:
            return self.reports[name]()
        value = self.xattrs(ino).get(name)
        if value is None:
            raise FsError(errno.ENODATA)
        return value

    def _allocation_sites(self) -> bytes:
        """A daemon tracing its allocations: its largest sites, a snapshot made only when
        asked (it takes a while), never with the other attributes."""
        sites = allocation_sites()
        if sites is None:
            raise FsError(errno.ENODATA, "PYTHONTRACEMALLOC is not set for this daemon")
        return json.dumps(sites).encode()

    def listxattr(self, ino: int) -> list[str]:
        return sorted(self.xattrs(ino))

    def stats(self) -> dict[str, int]:
        return (
            self._statistics()
            | {
                "read_bytes": self.read_bytes,
                "written_bytes": self.written_bytes,
                "open_handles": len(self._handles),
                "inodes": len(self.table),
            }
            | memory_stats()
            | {f"requests_{kind}": n for kind, n in sorted(self.requests.items())}
        )

    def statfs(self) -> dict[str, int]:
        return {
            "bsize": BLOCK_SIZE,
            "frsize": BLOCK_SIZE,
            "blocks": -(-self.table.total_bytes // BLOCK_SIZE),
            "files": len(self.table),
            "namemax": 255,
        }
