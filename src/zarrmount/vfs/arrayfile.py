"""Array files: an array's raw C-order bytes as a regular file of a fixed size. The
engine (plans, read-ahead, fill value) is made on first open and, on read-only mounts,
let go a while after the last close; writable ones stay (they may hold dirty chunks)."""

from __future__ import annotations

import errno
import logging
import os
import stat

import numpy as np

from zarrmount.array import ArrayReader, ArrayWriter, Swapped
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayNode
from zarrmount.vfs.node import Context, Handle, Node
from zarrmount.vfs.xattrs import array_xattrs

log = logging.getLogger(__name__)


class ArrayFile(Node):
    __slots__ = ("array", "table", "engine", "opens")

    def __init__(self, ino: int, parent: int, array: ArrayNode, table: Context) -> None:
        super().__init__(ino, parent)
        self.array = array
        self.table = table
        self.engine: ArrayReader | Swapped | None = None  # made on open, let go after close
        self.opens = 0  # handles open on it
        table.noticed(array.path, array.meta.attributes, array.meta.nbytes)

    @property
    def model(self) -> ArrayNode:
        return self.array

    def mode(self, read_only: bool) -> int:
        """``read_only``: the mount's; a file of another version is read-only anyway."""
        return stat.S_IFREG | (0o444 if read_only or self.table.read_only else 0o644)

    def size(self) -> int:
        return self.array.meta.nbytes

    def dtype(self) -> np.dtype:
        """The dtype of the file's bytes (the mount's byte order)."""
        return self.table.arrays.dtype(self.array.meta)

    def mtime_ns(self) -> int | None:
        """A writer's last write; else when other writers were last seen to change the
        array (the kernel then drops the pages it kept of it)."""
        written = getattr(self.engine, "mtime_ns", None) or 0
        return max(written, self.table.arrays.changed_ns(self.array.path) or 0) or None

    async def revalidate(self) -> None:
        if self.engine is not None:
            await self.engine.revalidate()

    def fresh_for(self) -> float | None:
        return self.table.arrays.fresh_for(self.array.path)

    def shown_files(self) -> list[Node]:
        return [self]

    def _engine(self) -> ArrayReader | Swapped:
        """The array's engine, made now if it has none (first open, or let go)."""
        engine = self.engine
        if engine is None:
            engine = self.engine = self.table.arrays.open(self.array)
            if engine.writable:  # unchanged until written, as before it was opened
                engine.mtime_ns = self.table.mtime_ns
        self.table.reopened(self)
        return engine

    def writer(self) -> ArrayWriter | None:
        """The array's writable engine in its stored byte order (what a journal holds),
        None on a read-only mount."""
        engine = self._engine()
        stored = engine.engine if isinstance(engine, Swapped) else engine
        return stored if isinstance(stored, ArrayWriter) else None

    def open(self, flags: int) -> Handle:
        if self.table.read_only and flags & os.O_ACCMODE != os.O_RDONLY:
            raise FsError(errno.EROFS)  # a file of another version, on an rw mount
        # O_TRUNC is accepted and changes nothing: the size is the array's (see README).
        handle = ArrayHandle(self, self._engine())
        handle.engine.prepare()
        self.opens += 1
        return handle

    async def contents(self, offset: int, size: int) -> bytes:
        """Bytes of the file, as a reader sees them (for the views made of it)."""
        handle = self.open(os.O_RDONLY)
        try:
            return bytes(await handle.read(offset, size, None))
        finally:
            await handle.release()

    def closed(self) -> None:
        self.opens -= 1
        if not self.opens and self.engine is not None and not self.engine.writable:
            self.table.closed(self)

    def let_go(self) -> None:
        if not self.opens:
            self.engine = None

    def truncate(self, size: int) -> None:
        if size not in (0, self.size()):
            raise FsError(errno.EINVAL, "array files have a fixed size")

    def set_mtime(self, mtime_ns: int) -> None:
        self._engine().mtime_ns = mtime_ns  # writable: kept for the mount's life

    def xattrs(self) -> dict[str, bytes]:
        meta = self.array.meta
        return array_xattrs(self.array.path, meta, self.dtype())

    async def warm_up(self, budget: int) -> int:
        engine = self._engine()
        self.opens += 1  # not let go while it warms
        try:
            return await engine.warm_up(budget)
        finally:
            self.closed()


class ArrayHandle(Handle):
    __slots__ = ("file", "engine")

    def __init__(self, file: ArrayFile, engine: ArrayReader | Swapped) -> None:
        self.file = file
        self.engine = engine

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        return await self.engine.read(offset, size, reply)

    async def write(self, offset: int, data: bytes) -> int:
        if not self.engine.writable:
            raise FsError(errno.EROFS if self.file.table.read_only else errno.EBADF)
        return await self.engine.write(offset, data)

    async def flush(self) -> None:
        if self.engine.writable:
            await self.engine.flush()

    async def fsync(self) -> None:
        if self.engine.writable:
            await self.engine.sync()

    async def release(self) -> None:
        self.file.closed()
        if self.engine.writable and not self.file.opens:
            try:
                await self.engine.flush()
            except FsError as e:
                log.error("%s: dirty data kept after the last close: %s", self.engine.path, e)
