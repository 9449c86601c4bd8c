"""``NAME.tif`` of an array whose chunks can be TIFF tiles: a tiled TIFF whose tiles are
the chunks (``headers/tiff.py``, ``array/tiles.py``), so a window read decodes the chunks
it covers and no others, followed by the group's lower resolutions as overviews when
the group is a pyramid. Arrays whose chunks cannot be tiles keep the strips view."""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Sequence
from itertools import groupby

import numpy as np

from zarrmount.array import Swapped
from zarrmount.array.tiles import Tiles
from zarrmount.errors import FsError
from zarrmount.format.multiscales import Pyramid
from zarrmount.headers import NotApplicable
from zarrmount.headers.ome import channel_names, ome_xml
from zarrmount.headers.tiff import TiffLayout, tiled_image, tiled_layout
from zarrmount.headers.tifftags import ASCII, IMAGE_DESCRIPTION, Tag
from zarrmount.vfs.arrayfile import ArrayFile, ArrayHandle
from zarrmount.vfs.node import Context, Handle, Node

log = logging.getLogger(__name__)


def tiled_levels(files: Sequence[ArrayFile]) -> list[ArrayFile]:
    """The first of ``files`` and those after it that can be its overviews: tiled, of
    its type and bands, each smaller than the one before (stopping at the first not)."""
    first = files[0].array.meta
    kept = [files[0]]
    for file in files[1:]:
        meta, before = file.array.meta, kept[-1].array.meta
        try:
            tiled_image(meta.shape, meta.chunks)
        except NotApplicable as e:
            log.info("%s: not an overview of %s: %s", file.array.path, files[0].array.path, e)
            break
        same = meta.dtype == first.dtype and meta.shape[:-2] == first.shape[:-2]
        if not same or meta.shape[-2:] == before.shape[-2:]:
            break
        kept.append(file)
    return kept


def layout_of(levels: Sequence[ArrayFile], tags: Sequence[Tag], planes: bool = False) -> TiffLayout:
    """The tiled layout of ``levels`` (full resolution first), stored byte order: the
    tiles are the chunks' bytes as decoded. NotApplicable where they cannot be tiles.
    ``planes``: every leading dimension as pages (a z-stack), not the last one as bands."""
    metas = [f.array.meta for f in levels]
    images = [tiled_image(m.shape, m.chunks, k > 0, planes) for k, m in enumerate(metas)]
    if images[0].pages > 1:
        images = images[:1]  # overviews of one image only: readers take pages otherwise
    if len(images) > 1:  # ImageJ's description would make readers take them as planes
        tags = [t for t in tags if t.code != IMAGE_DESCRIPTION]
    return tiled_layout(images, metas[0].dtype, tags)


def ome_layout(levels: Sequence[ArrayFile], name: str, found: Pyramid, attributes: dict):
    """The pyramidal OME-TIFF of an OME-Zarr image: every plane a page, its lower
    resolutions its SubIFDs, the OME-XML in the first image's description."""
    metas = [f.array.meta for f in levels]
    images = [tiled_image(m.shape, m.chunks, k > 0, planes=True) for k, m in enumerate(metas)]
    first = metas[0]
    xml = ome_xml(
        name, first.shape, first.dtype, found.axes, found.levels[0].scale, channel_names(attributes)
    )
    description = Tag(IMAGE_DESCRIPTION, ASCII, xml.encode() + b"\0")  # OME-XML is UTF-8
    return tiled_layout(images, first.dtype, (description,), subifds=True)


class TiledTiff(Node):
    __slots__ = ("levels", "layout", "table")

    def __init__(
        self, ino: int, parent: int, levels: list[ArrayFile], layout: TiffLayout, table: Context
    ) -> None:
        super().__init__(ino, parent)
        self.levels = levels[: len(layout.images)]  # the array file, then its overviews'
        self.layout = layout
        self.table = table

    def mode(self, read_only: bool) -> int:
        return stat.S_IFREG | 0o444

    def size(self) -> int:
        return self.layout.size + self.layout.data_size

    def mtime_ns(self) -> int | None:
        times = [t for f in self.levels if (t := f.mtime_ns()) is not None]
        return max(times, default=None)

    async def revalidate(self) -> None:
        for file in self.levels:
            await file.revalidate()

    def fresh_for(self) -> float | None:
        periods = [p for f in self.levels if (p := f.fresh_for()) is not None]
        return min(periods, default=None)

    def shown_files(self) -> list[Node]:
        return list(self.levels)

    def open(self, flags: int) -> Handle:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise FsError(errno.EACCES, "a tiled TIFF view is read-only")
        handles: list[ArrayHandle] = []
        try:
            for file in self.levels:
                handles.append(file.open(os.O_RDONLY))
        except BaseException:
            for handle in handles:
                handle.file.closed()
            raise
        return TiledHandle(self.layout, handles)


class TiledHandle(Handle):
    """Bytes ``[0, layout.size)`` are the header, then the tiles of every level. Read
    past the page cache: the kernel's read-ahead would run on from a reader's last tile
    into the next in the file, outside its window, and decode that chunk for nothing."""

    __slots__ = ("layout", "handles", "tiles")
    direct_io = True

    def __init__(self, layout: TiffLayout, handles: list[ArrayHandle]) -> None:
        self.layout = layout
        self.handles = handles
        engines = [h.engine for h in handles]
        self.tiles = [
            Tiles(e.engine if isinstance(e, Swapped) else e, image, k)
            for k, (e, image) in enumerate(zip(engines, layout.images, strict=True))
        ]

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> memoryview | bytes:
        lay = self.layout
        n, end = lay.size, min(offset + size, lay.size + lay.data_size)
        blocks = list(lay.blocks_in(max(offset, n) - n, end - n)) if end > n else []
        for block in blocks:
            self.tiles[block.image].observe(block)
        if offset >= n and len(blocks) == 1:
            block = blocks[0]
            flat = self.tiles[block.image].from_cache(block)
            if flat is not None:  # the reply is sent before any other task runs
                return flat
        parts: list[memoryview | bytes] = [lay.header_range(offset, end)] if offset < n else []
        groups = [(image, list(same)) for image, same in groupby(blocks, key=lambda b: b.image)]
        alone = not parts and len(groups) == 1  # else each part would fill the one reply
        for image, same in groups:
            parts.append(await self.tiles[image].read(same, reply if alone else None))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def release(self) -> None:
        for handle in self.handles:
            await handle.release()
