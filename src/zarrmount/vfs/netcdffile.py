"""A group as one netCDF classic file (``-o sidecars=...+netcdf``): ``NAME.nc`` in the
group's directory, a header made from the metadata (in parts: ``headers/netcdf.py``), then
each array's elements big-endian, read through the array files beside it: no second
decode path, nothing read when the group is listed, no copy of the dataset. Read-only."""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections import OrderedDict

import numpy as np

from zarrmount.array.byteorder import Convert, read_converted, to_big_endian, utf8_padded
from zarrmount.errors import FsError
from zarrmount.headers.netcdf_group import GroupFile
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.node import Handle, Node

log = logging.getLogger(__name__)

# array files a reader of the whole file keeps open at once (each holds its engine)
OPEN_ARRAYS = 8


def conversion(dtype: np.dtype) -> Convert | None:
    """How an array file's elements become netCDF's: big-endian numbers, UTF-8 text;
    None where the bytes are the same (single bytes, byte strings, big-endian already)."""
    if dtype.kind == "U":
        return utf8_padded(dtype)
    return None if dtype.kind == "S" else to_big_endian(dtype)


class NetcdfFile(Node):
    """The kernel keeps pages of the variables read through this file only: their array
    files alone decide its mtime, checked each period (``fresh_for`` None), not as often
    as the array file that expires first (a group of 10,000 arrays is asked for its
    attributes as often as one array)."""

    __slots__ = ("made", "files", "key", "read")

    def __init__(
        self, ino: int, parent: int, made: GroupFile, files: list[ArrayFile], key: object
    ) -> None:
        super().__init__(ino, parent)
        self.made = made
        self.files = files  # the array file of each variable, in the file's order
        self.key = key  # what it was made from: unchanged, a reload keeps this node
        self.read: dict[int, ArrayFile] = {}  # the files of the variables read so far

    def mode(self, read_only: bool) -> int:
        return stat.S_IFREG | 0o444

    def size(self) -> int:
        return self.made.layout.size

    def mtime_ns(self) -> int | None:
        return max((f.mtime_ns() or 0 for f in self.read.values()), default=0) or None

    async def revalidate(self) -> None:
        for file in list(self.read.values()):
            await file.revalidate()

    def shown_files(self) -> list[Node]:
        return list(self.files)

    def open(self, flags: int) -> Handle:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise FsError(errno.EROFS, "a netCDF view is read-only")
        return NetcdfHandle(self)


class NetcdfHandle(Handle):
    """Reads of the header, of variables' elements (each through its array file, at most
    OPEN_ARRAYS of them open) and of the zeros that pad them to 4 bytes."""

    __slots__ = ("file", "opened")

    def __init__(self, file: NetcdfFile) -> None:
        self.file = file
        self.opened: OrderedDict[int, Handle] = OrderedDict()

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        layout = self.file.made.layout
        end = min(offset + size, layout.size)
        parts: list[memoryview | bytes] = []
        if offset < layout.data_start:
            parts.append(layout.header(offset, end))
            offset = min(end, layout.data_start)
        while offset < end:
            i = layout.find(offset)
            begin = int(layout.begins[i])
            data_end = begin + self.file.files[i].size()
            if offset < data_end:
                stop = min(end, data_end)
                alone = not parts and stop == end  # the reply may hold it
                parts.append(await self._data(i, offset - begin, stop - offset, alone, reply))
            else:
                stop = min(end, int(layout.begins[i + 1]))
                parts.append(bytes(stop - offset))
            offset = stop
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _data(
        self, i: int, offset: int, size: int, alone: bool, reply: np.ndarray | None
    ) -> memoryview | bytes:
        handle = await self._handle(i)
        dtype = self.file.made.members[i].dtype
        assert dtype is not None  # a variable has a file, hence a dtype
        how = conversion(dtype)
        into = reply if alone else None
        if how is None:
            return await handle.read(offset, size, into)
        total = self.file.files[i].size()
        return await read_converted(handle.read, dtype.itemsize, total, how, offset, size, into)

    async def _handle(self, i: int) -> Handle:
        handle = self.opened.get(i)
        if handle is None:
            file = self.file.read.setdefault(i, self.file.files[i])
            handle = self.opened[i] = file.open(os.O_RDONLY)
            while len(self.opened) > OPEN_ARRAYS:
                await self.opened.popitem(last=False)[1].release()
        self.opened.move_to_end(i)
        return handle

    async def release(self) -> None:
        while self.opened:
            await self.opened.popitem()[1].release()
