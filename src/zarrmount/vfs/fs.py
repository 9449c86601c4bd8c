"""The filesystem as FUSE sees it, without importing pyfuse3: inodes, handles, requests.

Groups load their children on first use (lookup or readdir), so mounting a large
hierarchy costs one metadata read, and a bad node hides only itself.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import trio

from zarrmount.cache import BufferPool, ChunkCache
from zarrmount.codecs import Pipeline
from zarrmount.format.model import ArrayNode, GroupNode, HiddenNode, Node
from zarrmount.hierarchy import Dialect
from zarrmount.options import MountOptions
from zarrmount.store import StoreError
from zarrmount.store.aio import AsyncStore
from zarrmount.vfs.arrayfile import ArrayFile, Background
from zarrmount.vfs.errors import FsError, enoent
from zarrmount.vfs.writable import WritableArrayFile
from zarrmount.vfs.xattrs import array_xattrs, group_xattrs

log = logging.getLogger(__name__)

# How often idle decoding threads are given work, well within trio's idle timeout (10 s).
KEEP_DECODERS_S = 4.0

ROOT_INODE = 1
ROOT_ARRAY_NAME = "array"
BLOCK_SIZE = 1 << 20
STATS_XATTR = "user.zarrmount.stats"
PID_XATTR = "user.zarrmount.pid"
RETRY_S = 10.0  # pause between retries of a failed idle write-back


@dataclass
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


@dataclass
class Inode:
    ino: int
    parent: int
    node: GroupNode | ArrayNode | None  # None: the directory holding a root array
    xattrs: dict[str, bytes]
    array: ArrayFile | None = None
    children: dict[str, int] | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)

    @property
    def is_dir(self) -> bool:
        return self.array is None


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
        self._writable: list[WritableArrayFile] = []
        self._next_fh = 1
        self.started = time.monotonic()
        if isinstance(root, GroupNode):
            self._add(ROOT_INODE, ROOT_INODE, root, None)
        else:
            holder = self._add(ROOT_INODE, ROOT_INODE, None, None)
            holder.children = {}
            self._add_child(holder, ROOT_ARRAY_NAME, root, root_pipeline)

    # -- inode table ---------------------------------------------------------

    def _add(self, ino: int, parent: int, node, pipeline: Pipeline | None) -> Inode:
        if isinstance(node, ArrayNode):
            assert pipeline is not None
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
                array = ArrayFile(*args)
            else:
                array = WritableArrayFile(
                    *args,
                    write_empty_chunks=self.options.write_empty_chunks,
                    dirty_limit=max(self.options.cache_size // 2, node.meta.chunk_nbytes),
                )
                self._writable.append(array)
            inode = Inode(ino, parent, node, array_xattrs(node.path, node.meta), array=array)
        else:
            path, attrs = (node.path, node.attributes) if node is not None else ("", {})
            inode = Inode(ino, parent, node, group_xattrs(path, attrs))
        self._inodes[ino] = inode
        return inode

    def _add_child(self, parent: Inode, name: str, node: Node, pipeline) -> None:
        if isinstance(node, HiddenNode):
            log.warning("not shown: %s %r: %s", node.kind, node.path or "/", node.reason)
            return
        ino = len(self._inodes) + 1
        self._add(ino, parent.ino, node, pipeline)
        assert parent.children is not None
        parent.children[name] = ino

    def _inode(self, ino: int) -> Inode:
        inode = self._inodes.get(ino)
        if inode is None:
            raise enoent(f"inode {ino}")
        return inode

    async def _children(self, inode: Inode) -> dict[str, int]:
        if not inode.is_dir:
            raise FsError(errno.ENOTDIR)
        async with inode.lock:
            if inode.children is None:
                try:
                    found = await self.store.call(self.dialect.children, inode.node)
                except StoreError as e:
                    log.error("cannot list group %r: %s", inode.node.path or "/", e)
                    raise FsError(errno.EIO, str(e)) from e
                inode.children = {}
                for child in found:
                    self._add_child(inode, child.name, child.node, child.pipeline)
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
            size, nlink = inode.array.size, 1
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
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = inode.array
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
        if size is not None and (inode.is_dir or size not in (0, inode.array.size)):
            raise FsError(errno.EINVAL, "array files have a fixed size")
        if mtime_ns is not None and isinstance(inode.array, WritableArrayFile):
            inode.array.mtime_ns = mtime_ns
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
        for ino in children.values():
            array = self._inodes[ino].array
            if array is not None and budget > 0:
                budget -= await array.warm_up(budget)

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
        found = dict(self._inode(ino).xattrs)
        if ino == ROOT_INODE:
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
        total = sum(i.array.size for i in self._inodes.values() if i.array is not None)
        return {
            "bsize": BLOCK_SIZE,
            "frsize": BLOCK_SIZE,
            "blocks": -(-total // BLOCK_SIZE),
            "files": len(self._inodes),
            "namemax": 255,
        }
