"""A group as one netCDF classic file (``-o sidecars=...+netcdf``): ``NAME.nc`` in the
group's directory, a header made from the metadata (in parts: ``headers/netcdf.py``), then
each array's elements big-endian, read through the array files beside it (``regions.py``):
no second decode path, nothing read when the group is listed, no copy of the dataset.
Read-only."""

from __future__ import annotations

import logging

import numpy as np

from zarrmount.array.byteorder import Convert, read_converted, to_big_endian, utf8_padded
from zarrmount.headers.netcdf_group import GroupFile
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.node import Handle
from zarrmount.vfs.regions import RegionFile, RegionHandle

log = logging.getLogger(__name__)


def conversion(dtype: np.dtype) -> Convert | None:
    """How an array file's elements become netCDF's: big-endian numbers, UTF-8 text;
    None where the bytes are the same (single bytes, byte strings, big-endian already)."""
    if dtype.kind == "U":
        return utf8_padded(dtype)
    return None if dtype.kind == "S" else to_big_endian(dtype)


class NetcdfFile(RegionFile):
    __slots__ = ("made", "key")
    kind = "a netCDF view"

    def __init__(
        self, ino: int, parent: int, made: GroupFile, files: list[ArrayFile], key: object
    ) -> None:
        super().__init__(ino, parent, files)
        self.made = made
        self.key = key  # what it was made from: unchanged, a reload keeps this node

    def size(self) -> int:
        return self.made.layout.size

    def handle(self) -> NetcdfHandle:
        return NetcdfHandle(self)


class NetcdfHandle(RegionHandle):
    """Each variable's elements converted to netCDF's (``conversion``), then the zeros
    that pad them to 4 bytes."""

    __slots__ = ("layout", "dtypes")

    def __init__(self, file: NetcdfFile) -> None:
        layout = file.made.layout
        n = len(file.files)
        starts = [int(b) for b in layout.begins[:n]]
        sizes = [f.size() for f in file.files]
        super().__init__(file, starts, sizes, layout.size, layout.data_start)
        self.layout = layout
        self.dtypes = [m.dtype for m in file.made.members]

    def header(self, start: int, stop: int) -> bytes:
        return self.layout.header(start, stop)

    async def region(
        self, i: int, handle: Handle, offset: int, size: int, into: np.ndarray | None
    ) -> memoryview | bytes:
        dtype = self.dtypes[i]
        assert dtype is not None  # a variable has a file, hence a dtype
        how = conversion(dtype)
        if how is None:
            return await handle.read(offset, size, into)
        total = self.sizes[i]
        return await read_converted(handle.read, dtype.itemsize, total, how, offset, size, into)
