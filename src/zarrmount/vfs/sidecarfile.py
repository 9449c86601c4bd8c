"""Sidecar files (``vfs/sidecars.py``): a header alone, or a header followed by the bytes
of the array file beside it (as they are, or converted element by element, then padded),
read (and for ``.npy`` on ``rw`` mounts, written) through that file's engine: no second
decode path, no buffering of the array."""

from __future__ import annotations

import errno
import stat

import numpy as np

from zarrmount.array.byteorder import read_converted
from zarrmount.errors import FsError
from zarrmount.format.georef import Place
from zarrmount.format.physical import Space
from zarrmount.headers.geotiff import nodata_of
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.node import Context, Handle, Node
from zarrmount.vfs.sidecars import Sidecar, Subject


def subject(
    file: ArrayFile, name: str, place: Place | None = None, space: Space | None = None
) -> Subject:
    """What a sidecar of the array file ``name`` (lying at ``place`` on a map, in
    ``space`` physically) describes."""
    meta = file.array.meta
    nodata = nodata_of(meta)
    return Subject(meta.shape, file.dtype(), name, meta.attributes, place, nodata, space)


class SidecarFile(Node):
    __slots__ = ("file", "name", "sidecar", "head_size", "table", "place", "space")

    def __init__(
        self,
        ino: int,
        parent: int,
        file: ArrayFile,
        name: str,
        sidecar: Sidecar,
        head_size: int,
        table: Context,
        place: Place | None = None,
        space: Space | None = None,
    ) -> None:
        super().__init__(ino, parent)
        self.file = file  # the array file NAME this one describes
        self.name = name  # NAME
        self.sidecar = sidecar
        self.head_size = head_size  # of its header
        self.table = table
        self.place = place  # where the array lies, for headers that say so
        self.space = space  # where its elements lie physically, likewise

    def head(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the header (made on demand: a TIFF one may be large)."""
        stop = min(stop, self.head_size)
        if start >= stop:
            return b""
        described = subject(self.file, self.name, self.place, self.space)
        return self.sidecar.part(described, start, stop)

    def writable(self, read_only: bool) -> bool:
        return self.sidecar.writable and not read_only

    def mode(self, read_only: bool) -> int:
        writable = self.writable(read_only or self.table.read_only)
        return stat.S_IFREG | (0o644 if writable else 0o444)

    def size(self) -> int:
        whole = self.head_size + (self.file.size() if self.sidecar.view else 0)
        return -(-whole // self.sidecar.block) * self.sidecar.block

    def mtime_ns(self) -> int | None:
        return self.file.mtime_ns() if self.sidecar.view else None

    async def revalidate(self) -> None:
        if self.sidecar.view:  # its bytes are the array file's
            await self.file.revalidate()

    def fresh_for(self) -> float | None:
        return self.file.fresh_for() if self.sidecar.view else None

    def shown_files(self) -> list[Node]:
        return [self.file] if self.sidecar.view else []

    def open(self, flags: int) -> Handle:
        if not self.sidecar.view:
            return HeaderHandle(self)
        return ViewHandle(self, self.file.open(flags), self.writable(self.table.read_only))


class HeaderHandle(Handle):
    __slots__ = ("file",)

    def __init__(self, file: SidecarFile) -> None:
        self.file = file

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        return self.file.head(offset, offset + size)


class ViewHandle(Handle):
    """Bytes ``[0, head_size)`` are the header, then the array file's (converted where the
    format stores them otherwise), then zeros to the end of the last block."""

    __slots__ = ("file", "inner", "writable")

    def __init__(self, file: SidecarFile, inner: Handle, writable: bool) -> None:
        self.file = file
        self.inner = inner
        self.writable = writable

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        n, data = self.file.head_size, self.file.file.size()
        end = min(offset + size, self.file.size())
        if n <= offset and end <= n + data:  # the data alone: no join
            return await self._data(offset - n, end - offset, reply)
        parts: list[memoryview | bytes] = []
        if offset < n:
            parts.append(self.file.head(offset, end))
        start, stop = max(offset, n), min(end, n + data)
        if start < stop:
            parts.append(await self._data(start - n, stop - start, reply))
        if end > n + data:
            parts.append(bytes(end - max(offset, n + data)))
        return b"".join(parts)

    async def _data(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        array, convert = self.file.file, self.file.sidecar.convert
        dtype = array.dtype()
        how = None if convert is None else convert(dtype)
        if how is None:
            return await self.inner.read(offset, size, reply)
        isz = dtype.itemsize
        return await read_converted(self.inner.read, isz, array.size(), how, offset, size, reply)

    async def write(self, offset: int, data: bytes) -> int:
        if not self.writable:
            raise FsError(errno.EBADF)
        n = self.file.head_size
        if offset < n:  # the header may be written again as it is, never changed
            if data[: n - offset] != self.file.head(offset, offset + len(data)):
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
