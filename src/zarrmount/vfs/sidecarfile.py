"""Sidecar files (``vfs/sidecars.py``): a header alone, or a header followed by the bytes
of the array file beside it, read (and for ``.npy`` on ``rw`` mounts, written) through
that file's engine: no second decode path, no buffering of the array."""

from __future__ import annotations

import errno
import stat

import numpy as np

from zarrmount.errors import FsError
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.node import Context, Handle, Node
from zarrmount.vfs.sidecars import Sidecar


class SidecarFile(Node):
    __slots__ = ("file", "name", "sidecar", "table")

    def __init__(
        self, ino: int, parent: int, file: ArrayFile, name: str, sidecar: Sidecar, table: Context
    ) -> None:
        super().__init__(ino, parent)
        self.file = file  # the array file NAME this one describes
        self.name = name  # NAME
        self.sidecar = sidecar
        self.table = table

    def header(self) -> bytes:
        return self.table.header(self)

    def writable(self, read_only: bool) -> bool:
        return self.sidecar.writable and not read_only

    def mode(self, read_only: bool) -> int:
        return stat.S_IFREG | (0o644 if self.writable(read_only) else 0o444)

    def size(self) -> int:
        return len(self.header()) + (self.file.size() if self.sidecar.view else 0)

    def mtime_ns(self) -> int | None:
        return self.file.mtime_ns() if self.sidecar.view else None

    def open(self, flags: int) -> Handle:
        if not self.sidecar.view:
            return HeaderHandle(self.header())
        return ViewHandle(self.header(), self.file.open(flags), self.writable(self.table.read_only))


class HeaderHandle(Handle):
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        return self.data[offset : offset + size]


class ViewHandle(Handle):
    """Bytes ``[0, len(head))`` are the header, the rest the array file's."""

    __slots__ = ("head", "inner", "writable")

    def __init__(self, head: bytes, inner: Handle, writable: bool) -> None:
        self.head = head
        self.inner = inner
        self.writable = writable

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        n = len(self.head)
        if offset >= n:
            return await self.inner.read(offset - n, size, reply)
        head = self.head[offset : offset + size]
        if offset + size <= n:
            return head
        return head + bytes(await self.inner.read(0, offset + size - n, reply))

    async def write(self, offset: int, data: bytes) -> int:
        if not self.writable:
            raise FsError(errno.EBADF)
        n = len(self.head)
        if offset < n:  # the header may be written again as it is, never changed
            if data[: n - offset] != self.head[offset : offset + len(data)]:
                raise FsError(errno.EPERM, "the header of a view follows the array")
            if offset + len(data) <= n:
                return len(data)
            await self.inner.write(0, data[n - offset :])
            return len(data)
        return await self.inner.write(offset - n, data)

    async def flush(self) -> None:
        await self.inner.flush()

    async def fsync(self) -> None:
        await self.inner.fsync()

    async def release(self) -> None:
        await self.inner.release()
