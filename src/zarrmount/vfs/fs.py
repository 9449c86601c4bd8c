"""The filesystem as FUSE sees it, without importing pyfuse3: inodes, handles, requests.

Groups load their children on first use (lookup or readdir), so mounting a large
hierarchy costs one metadata read, and a bad node hides only itself.

An inode holds its node and little else: an array's :class:`ArrayFile` (plans, read-ahead,
fill value) is made when the file is opened and let go a while after its last close,
pipelines are shared by arrays coded alike, and extended attributes are made when asked
for. A group of 100,000 arrays lists within the memory budget.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import trio

from zarrmount.cache import BufferPool, ChunkCache
from zarrmount.codecs import CodecError, Pipeline, shared_pipeline
from zarrmount.format.model import ArrayNode, GroupNode, HiddenNode, Node
from zarrmount.hierarchy import Dialect
from zarrmount.options import MountOptions
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.background import Background
from zarrmount.vfs.errors import FsError, enoent
from zarrmount.vfs.writable import WritableArrayFile
from zarrmount.vfs.xattrs import node_xattrs, warn_conventions

log = logging.getLogger(__name__)

# How often idle decoding threads are given work, well within trio's idle timeout (10 s).
KEEP_DECODERS_S = 4.0

ROOT_INODE = 1
ROOT_ARRAY_NAME = "array"
BLOCK_SIZE = 1 << 20
STATS_XATTR = "user.zarrmount.stats"
PID_XATTR = "user.zarrmount.pid"
RETRY_S = 10.0  # pause between retries of a failed idle write-back
# Read-only array files kept after their last close, most recent first: a file opened
# again soon keeps its plans. Each may hold a few MiB of plans (see docs/cache.md).
KEEP_CLOSED = 8
# Root arrays readied for their first read once mounted: past a few, all use the same
# buffer sizes and codecs (100,000 arrays at the root would only cost time).
WARM_ARRAYS = 16
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

    @property
    def blocks(self) -> int:
        return -(-self.size // 512)


class Inode:
    """A node of the tree; one per array of a group listed, so it holds little."""

    __slots__ = ("ino", "parent", "node", "array", "children", "lock", "opens")

    def __init__(self, ino: int, parent: int, node: GroupNode | ArrayNode | None) -> None:
        self.ino = ino
        self.parent = parent
        self.node = node  # None: the directory holding a root array
        self.array: ArrayFile | None = None  # made on open, let go after the last close
        self.children: dict[str, int] | None = None  # a group's, once listed
        self.lock: trio.Lock | None = None  # a group's, once listed
        self.opens = 0  # handles open on an array

    @property
    def is_dir(self) -> bool:
        return not isinstance(self.node, ArrayNode)


class Filesystem:
    def __init__(
        self,
        dialect: Dialect,
        root: Node,
        root_pipeline: Pipeline | None,
        options: MountOptions,
    ) -> None:
        self.options = options
        self.dialect = dialect
        store = dialect.store
        self.store = AsyncStore(store, options.max_fetches or (64 if store.remote else 16))
        # Freed chunk buffers wait here for the next decode, within the cache's budget.
        self.pool = BufferPool(options.cache_size, lambda: self.cache.used)
        self.cache = ChunkCache(options.cache_size, recycle=self.pool.give)
        self.decode_limiter = trio.CapacityLimiter(max(2, os.cpu_count() or 2))
        self.background = Background()  # the session gives it a nursery: prefetches run there
        self.mtime_ns = time.time_ns()
        self._inodes: dict[int, Inode] = {}
        self._handles: dict[int, ArrayFile] = {}
        self._handle_inodes: dict[int, Inode] = {}
        self._closed: OrderedDict[int, Inode] = OrderedDict()  # see KEEP_CLOSED
        self._xattrs: OrderedDict[int, dict[str, bytes]] = OrderedDict()  # see KEEP_XATTRS
        self._writable: list[WritableArrayFile] = []
        self._total_bytes = 0  # of every array file (statfs)
        self._root_pipeline = root_pipeline
        self._next_fh = 1
        self.started = time.monotonic()
        if isinstance(root, GroupNode):
            self._add(ROOT_INODE, ROOT_INODE, root)
        else:
            holder = self._add(ROOT_INODE, ROOT_INODE, None)
            holder.children = {}
            self._add_child(holder, ROOT_ARRAY_NAME, root)

    # -- inode table ---------------------------------------------------------

    def _add(self, ino: int, parent: int, node: GroupNode | ArrayNode | None) -> Inode:
        inode = Inode(ino, parent, node)
        if isinstance(node, ArrayNode):
            self._total_bytes += node.meta.nbytes
            warn_conventions(node.path, node.meta.attributes)
        elif node is not None:
            warn_conventions(node.path, node.attributes)
        self._inodes[ino] = inode
        return inode

    def _add_child(self, parent: Inode, name: str, node: Node) -> None:
        if isinstance(node, HiddenNode):
            log.warning("not shown: %s %r: %s", node.kind, node.path or "/", node.reason)
            return
        ino = len(self._inodes) + 1
        self._add(ino, parent.ino, node)
        assert parent.children is not None
        parent.children[name] = ino

    def _array(self, inode: Inode) -> ArrayFile:
        """The inode's array file, made now if it has none (first open, or let go)."""
        array = inode.array
        if array is None:
            array = inode.array = self._make_array(inode.node)
        self._closed.pop(inode.ino, None)
        return array

    def _make_array(self, node: ArrayNode) -> ArrayFile:
        try:
            pipeline = (
                self._root_pipeline
                if self._root_pipeline is not None and node.path == ""
                else shared_pipeline(node.meta)
            )
        except CodecError as e:  # built once already, when the array was listed
            log.error("%s: %s", node.path, e)
            raise FsError(errno.EIO, str(e)) from e
        args = (
            node,
            pipeline,
            self.store,
            self.cache,
            self.decode_limiter,
            self.background,
            self.pool,
        )
        if self.options.read_only:
            return ArrayFile(*args)
        array = WritableArrayFile(
            *args,
            write_empty_chunks=self.options.write_empty_chunks,
            dirty_limit=max(self.options.cache_size // 2, node.meta.chunk_nbytes),
        )
        array.mtime_ns = self.mtime_ns  # unchanged until written, as before it was opened
        self._writable.append(array)  # kept for the mount's life: flush_all stores it
        return array

    def _let_go(self, inode: Inode) -> None:
        """No handle is open on the inode's read-only array file: keep it among the
        KEEP_CLOSED most recent, then drop it (a writable one stays: it may hold dirty
        chunks, and flush_all stores it)."""
        if inode.opens or not self.options.read_only or inode.array is None:
            return
        self._closed[inode.ino] = inode
        self._closed.move_to_end(inode.ino)
        while len(self._closed) > KEEP_CLOSED:
            _, old = self._closed.popitem(last=False)
            old.array = None

    def _inode(self, ino: int) -> Inode:
        inode = self._inodes.get(ino)
        if inode is None:
            raise enoent(f"inode {ino}")
        return inode

    async def _children(self, inode: Inode) -> dict[str, int]:
        if not inode.is_dir:
            raise FsError(errno.ENOTDIR)
        if inode.children is not None:
            return inode.children
        if inode.lock is None:
            inode.lock = trio.Lock()
        async with inode.lock:
            if inode.children is None:
                try:
                    found = await self.store.call(self.dialect.children, inode.node)
                except StoreError as e:
                    log.error("cannot list group %r: %s", inode.node.path or "/", e)
                    raise FsError(errno.EIO, str(e)) from e
                inode.children = {}
                for child in found:
                    self._add_child(inode, child.name, child.node)
                inode.lock = None  # listed for good: nobody waits on it again
            return inode.children

    # -- requests ------------------------------------------------------------

    def getattr(self, ino: int) -> Attr:
        inode = self._inode(ino)
        opts = self.options
        if inode.is_dir:
            mode = stat.S_IFDIR | (0o555 & ~opts.umask)
            size, nlink = 0, 2
        else:
            mode = stat.S_IFREG | ((0o444 if opts.read_only else 0o644) & ~opts.umask)
            size, nlink = inode.node.meta.nbytes, 1
        mtime = getattr(inode.array, "mtime_ns", self.mtime_ns)
        return Attr(ino, mode, size, opts.uid, opts.gid, mtime, nlink)

    async def lookup(self, parent: int, name: str) -> Attr:
        children = await self._children(self._inode(parent))
        if name == ".":
            return self.getattr(parent)
        if name == "..":
            return self.getattr(self._inode(parent).parent)
        ino = children.get(name)
        if ino is None:
            raise enoent(name)
        return self.getattr(ino)

    async def readdir(self, ino: int) -> list[tuple[str, Attr]]:
        children = await self._children(self._inode(ino))
        return [(name, self.getattr(child)) for name, child in sorted(children.items())]

    def open(self, ino: int, flags: int) -> int:
        inode = self._inode(ino)
        if inode.is_dir:
            raise FsError(errno.EISDIR)
        if self.options.read_only and (flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC):
            raise FsError(errno.EROFS)
        # O_TRUNC is accepted and changes nothing: the size is the array's (see README).
        array = self._array(inode)
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = array
        self._handle_inodes[fh] = inode
        inode.opens += 1
        return fh

    async def read(
        self, fh: int, offset: int, size: int, reply: np.ndarray | None = None
    ) -> memoryview | bytes:
        array = self._handles.get(fh)
        if array is None:
            raise FsError(errno.EBADF)
        return await array.read(offset, size, reply)

    def _writable_handle(self, fh: int) -> WritableArrayFile:
        array = self._handles.get(fh)
        if array is None:
            raise FsError(errno.EBADF)
        if not isinstance(array, WritableArrayFile):
            raise FsError(errno.EBADF if not self.options.read_only else errno.EROFS)
        return array

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        return await self._writable_handle(fh).write(offset, data)

    async def flush(self, fh: int) -> None:
        """On close and fsync: store this file's dirty chunks, report write-back errors."""
        array = self._handles.get(fh)
        if isinstance(array, WritableArrayFile):
            await array.flush()

    async def fsync(self, fh: int) -> None:
        """fsync and fdatasync: this file's data stored and, where the store can, durable."""
        array = self._handles.get(fh)
        if isinstance(array, WritableArrayFile):
            await array.sync()

    async def release(self, fh: int) -> None:
        array = self._handles.pop(fh, None)
        inode = self._handle_inodes.pop(fh, None)
        if inode is not None:
            inode.opens -= 1
            self._let_go(inode)
        if isinstance(array, WritableArrayFile) and array not in self._handles.values():
            try:
                await array.flush()
            except FsError as e:
                log.error("%s: dirty data kept after the last close: %s", array.path, e)

    def setattr(self, ino: int, size: int | None, mtime_ns: int | None, other: bool) -> Attr:
        """Only a no-op truncation (to 0 or to the size itself) and times can change."""
        inode = self._inode(ino)
        if self.options.read_only:
            raise FsError(errno.EROFS)
        if other:
            raise FsError(errno.EPERM)
        if size is not None and (inode.is_dir or size not in (0, inode.node.meta.nbytes)):
            raise FsError(errno.EINVAL, "array files have a fixed size")
        if mtime_ns is not None and not inode.is_dir:
            self._array(inode).mtime_ns = mtime_ns  # writable: kept for the mount's life
        return self.getattr(ino)

    async def flush_all(self) -> int:
        """Store every dirty chunk of every file and make it durable, as unmounting a
        filesystem does; returns how many files failed."""
        failed = 0
        for array in self._writable:
            try:
                await array.sync()
            except FsError as e:
                failed += 1
                log.error("%s: %s", array.path, e)
        return failed

    async def keep_decoders(self, period: float = KEEP_DECODERS_S) -> None:
        """Give each decoding thread a moment of work every ``period`` seconds, forever.

        trio ends worker threads idle for about 10 s; a new thread has no scratch buffer
        and its first decode is slow, which a first read after a quiet spell would pay
        (measured: 32 ms instead of 10 ms). The barrier makes the jobs land on distinct
        threads.
        """
        threads = int(self.decode_limiter.total_tokens)
        while True:
            await trio.sleep(period)
            if self.decode_limiter.borrowed_tokens:
                continue  # decoding: the threads are alive
            barrier = threading.Barrier(threads)
            async with trio.open_nursery() as nursery:
                for _ in range(threads):
                    nursery.start_soon(self._meet, barrier)

    async def _meet(self, barrier: threading.Barrier) -> None:
        def meet() -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=0.05)  # a decode started meanwhile: that one is warm

        await trio.to_thread.run_sync(meet, limiter=self.decode_limiter)

    async def warm_up(self) -> None:
        """Once mounted: list the root, and ready each array found there for its first
        read (codecs run once, a few chunk buffers in the pool), within a sixteenth of
        the cache. A first read costs a few chunk decodes; on these machines the first
        decode in a process and fresh buffers would double that. Not for remote stores:
        there the network sets the first read's latency, and a listing costs requests."""
        if self.store.store.remote:
            return
        budget = self.options.cache_size // 16
        try:
            children = await self._children(self._inode(ROOT_INODE))
        except FsError:
            return  # logged; the first lookup will try again
        inodes = (self._inodes[ino] for ino in children.values())
        for inode in itertools.islice((i for i in inodes if not i.is_dir), WARM_ARRAYS):
            if budget <= 0:
                break
            try:
                array = self._array(inode)
            except FsError:
                continue  # logged
            inode.opens += 1  # not let go while it warms
            try:
                budget -= await array.warm_up(budget)
            finally:
                inode.opens -= 1
                self._let_go(inode)

    async def write_back_idle(self, delay: float) -> None:
        """Forever: store chunks that stayed dirty for ``delay`` seconds.

        A file whose write-back failed is retried every ``RETRY_S`` seconds, not every tick.
        """
        while True:
            await trio.sleep(min(1.0, delay) or 0.1)
            now = time.monotonic()
            for key in self.cache.dirty(before=now - delay):
                entry = self.cache.entry(key)
                owner = entry.owner if entry is not None else None
                if owner is None or (owner.failed_at and now - owner.failed_at < RETRY_S):
                    continue
                await owner.write_back_key(key)

    def xattrs(self, ino: int) -> dict[str, bytes]:
        inode = self._inode(ino)
        found = self._xattrs.get(ino)
        if found is None:
            found = self._xattrs[ino] = node_xattrs(inode.node)
            while len(self._xattrs) > KEEP_XATTRS:
                self._xattrs.popitem(last=False)
        else:
            self._xattrs.move_to_end(ino)
        if ino == ROOT_INODE:
            found = dict(found)
            found[STATS_XATTR] = json.dumps(self.stats()).encode()
            found[PID_XATTR] = str(os.getpid()).encode()
        return found

    def getxattr(self, ino: int, name: str) -> bytes:
        value = self.xattrs(ino).get(name)
        if value is None:
            raise FsError(errno.ENODATA)
        return value

    def listxattr(self, ino: int) -> list[str]:
        return sorted(self.xattrs(ino))

    def stats(self) -> dict[str, int]:
        s, c = self.store.stats, self.cache.stats
        return {
            "uptime_s": int(time.monotonic() - self.started),
            "store_gets": s.gets,
            "store_get_bytes": s.get_bytes,
            "store_lists": self.dialect.store.list_calls,
            "store_errors": s.errors,
            "store_sets": s.sets,
            "store_set_bytes": s.set_bytes,
            "store_deletes": s.deletes,
            "store_synced": s.synced,
            "cache_dirty_bytes": self.cache.dirty_bytes,
            "cache_hits": c.hits,
            "cache_misses": c.misses,
            "cache_waits": c.waits,
            "cache_evictions": c.evictions,
            "cache_load_errors": c.load_errors,
            "cache_partial_reads": c.partial,
            "cache_loading": self.cache.in_flight,
            "cache_used_bytes": self.cache.used,
            "cache_capacity_bytes": self.cache.capacity,
            "cache_entries": len(self.cache),
            "open_handles": len(self._handles),
            "inodes": len(self._inodes),
        }

    def statfs(self) -> dict[str, int]:
        return {
            "bsize": BLOCK_SIZE,
            "frsize": BLOCK_SIZE,
            "blocks": -(-self._total_bytes // BLOCK_SIZE),
            "files": len(self._inodes),
            "namemax": 255,
        }
