"""Files of a whole group (``GROUP.nc``, ``GROUP.h5``): a header made from metadata, then
regions each holding one array file's bytes, read through that file's handle (the array
read path, nothing decoded twice), zeros between them. Read-only; a handle keeps at most
OPEN_ARRAYS array files open."""

from __future__ import annotations

import bisect
import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from zarrmount.errors import FsError
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.node import Handle, Node

# array files a reader of the whole file keeps open at once (each holds its engine)
OPEN_ARRAYS = 8


class RegionFile(Node):
    """The kernel keeps pages of the arrays read through this file only: their array
    files alone decide its mtime, checked each period (``fresh_for`` None), not as often
    as the array file that expires first (a group of 10,000 arrays is asked for its
    attributes as often as one array)."""

    __slots__ = ("files", "read")
    kind = "a view of a group"  # named when a write is refused

    def __init__(self, ino: int, parent: int, files: list[ArrayFile]) -> None:
        super().__init__(ino, parent)
        self.files = files  # the array file of each region, in the file's order
        self.read: dict[int, ArrayFile] = {}  # the files of the regions read so far

    def mode(self, read_only: bool) -> int:
        return stat.S_IFREG | 0o444

    def mtime_ns(self) -> int | None:
        return max((f.mtime_ns() or 0 for f in self.read.values()), default=0) or None

    async def revalidate(self) -> None:
        for file in list(self.read.values()):
            await file.revalidate()

    def shown_files(self) -> list[Node]:
        return list(self.files)

    def open(self, flags: int) -> Handle:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise FsError(errno.EROFS, f"{self.kind} is read-only")
        return self.handle()

    def handle(self) -> RegionHandle:
        raise NotImplementedError


class RegionHandle(Handle):
    """Reads of the header (``header``), of the regions (each through its array file,
    ``region`` making the file's bytes the region's) and of the zeros around them."""

    __slots__ = ("file", "files", "starts", "sizes", "size", "data_start", "opened")

    def __init__(
        self,
        file: RegionFile,
        starts: Sequence[int],
        sizes: Sequence[int],
        size: int,
        data_start: int,
    ) -> None:
        """``file.files[i]``'s bytes lie at ``starts[i]`` (ascending, from
        ``data_start``), ``sizes[i]`` of them; the file is ``size`` bytes."""
        self.file = file
        self.files = file.files  # as when opened
        self.starts = starts
        self.sizes = sizes
        self.size = size
        self.data_start = data_start
        self.opened: OrderedDict[int, Handle] = OrderedDict()

    def header(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of ``[0, data_start)``."""
        raise NotImplementedError

    async def region(
        self, i: int, handle: Handle, offset: int, size: int, into: np.ndarray | None
    ) -> memoryview | bytes:
        """Bytes of region ``i`` from its array file's ``handle`` (``into``: the reply
        buffer, where the request lies in this region alone)."""
        return await handle.read(offset, size, into)

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        end = min(offset + size, self.size)
        parts: list[memoryview | bytes] = []
        if offset < self.data_start:
            parts.append(self.header(offset, min(end, self.data_start)))
            offset = min(end, self.data_start)
        while offset < end:
            i = bisect.bisect_right(self.starts, offset) - 1
            begin = self.starts[i] if i >= 0 else offset
            if i >= 0 and offset < begin + self.sizes[i]:
                stop = min(end, begin + self.sizes[i])
                into = reply if not parts and stop == end else None  # the reply may hold it
                handle = await self._handle(i)
                parts.append(await self.region(i, handle, offset - begin, stop - offset, into))
            else:
                stop = min(end, self.starts[i + 1] if i + 1 < len(self.starts) else end)
                parts.append(bytes(stop - offset))
            offset = stop
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _handle(self, i: int) -> Handle:
        handle = self.opened.get(i)
        if handle is None:
            file = self.file.read.setdefault(i, self.files[i])
            handle = self.opened[i] = file.open(os.O_RDONLY)
            while len(self.opened) > OPEN_ARRAYS:
                await self.opened.popitem(last=False)[1].release()
        self.opened.move_to_end(i)
        return handle

    async def release(self) -> None:
        while self.opened:
            await self.opened.popitem()[1].release()
