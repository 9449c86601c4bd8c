"""A group and everything below it as one HDF5 file (``-o sidecars=...+hdf5``): ``NAME.h5``
in the group's directory, its header made from metadata in parts (``headers/hdf5``), its
datasets' data the array files' bytes as they are, read through those files
(``regions.py``). Listing the group only names it: its subtree is listed through the inode
table when the kernel is first told its size (``ready``); the file is then kept for good
(the table makes a new node when the subtree changes, open handles keep theirs)."""

from __future__ import annotations

import errno
import logging

import trio

from zarrmount.errors import FsError
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.headers.hdf5 import TreeChanged
from zarrmount.headers.hdf5.walk import MAX_DEPTH, join
from zarrmount.headers.hdf5_group import STRINGS, Entry, H5File, h5_file
from zarrmount.headers.netcdf_group import STRINGS as NC_STRINGS
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.node import Context
from zarrmount.vfs.regions import RegionFile, RegionHandle

log = logging.getLogger(__name__)


async def subtree(table: Context, top: Directory) -> tuple[list[Entry], dict[str, ArrayFile]]:
    """The entries of ``top``'s group and everything below it as the mount shows them
    (directories not listed yet are listed now), and the array file at each array's
    path; groups deeper than the HDF5 file holds are not listed."""
    entries: list[Entry] = []
    files: dict[str, ArrayFile] = {}
    todo = [("", top, 0)]
    while todo:
        path, directory, depth = todo.pop()
        group = directory.group
        entries.append(Entry(path, group.attributes if group is not None else {}))
        if depth > MAX_DEPTH:
            continue
        shown = await directory.children()
        listing = directory.listing
        assert listing is not None  # listed just now
        for owner in dict.fromkeys(listing.owners.values()):
            model = table.model(listing, owner)
            node = table[shown[owner]] if owner in shown else None
            where = join(path, owner)
            if isinstance(model, GroupNode) and isinstance(node, Directory):
                todo.append((where, node, depth + 1))
            elif isinstance(model, ArrayNode) and isinstance(node, ArrayFile):
                files[where] = node
                entries.append(Entry(where, model.meta.attributes, model.meta, node.dtype()))
            elif isinstance(model, ArrayNode):
                entries.append(Entry(where, model.meta.attributes, model.meta, None, STRINGS))
        # arrays the listing does not show (hidden for their metadata, strings without text)
        entries += [
            Entry(join(path, n), {}, why_not=_reworded(why)) for n, why in listing.unshown.items()
        ]
    return entries, files


def _reworded(why: str) -> str:
    """The listing's reasons are the ``.nc``'s: an array of strings has its own here."""
    return STRINGS if why == NC_STRINGS else why


class Hdf5File(RegionFile):
    __slots__ = ("table", "key", "made", "lock")
    kind = "an HDF5 view"

    def __init__(self, ino: int, parent: int, table: Context, key: object) -> None:
        super().__init__(ino, parent, [])  # its files once made
        self.table = table
        self.key = key  # what the table made it from: unchanged, a reload keeps this node
        self.made: H5File | None = None  # once the kernel is told of it
        self.lock = trio.Lock()  # held while it is made

    def size(self) -> int:
        return 0 if self.made is None else self.made.layout.size

    async def ready(self) -> None:
        if self.made is not None:
            return
        async with self.lock:
            if self.made is None:
                top = self.table[self.parent]
                assert isinstance(top, Directory)
                entries, files = await subtree(self.table, top)
                # a quarter of a second for 10,000 arrays: off the request loop
                made = await trio.to_thread.run_sync(h5_file, entries)
                self.files = [files[region.path] for region in made.layout.data_regions]
                self.made = made

    def handle(self) -> Hdf5Handle:
        if self.made is None:  # the kernel opens what it looked up: ready
            raise FsError(errno.EIO, "an HDF5 view opened before it was made")
        return Hdf5Handle(self, self.made)


class Hdf5Handle(RegionHandle):
    """The file as it was made when opened: a reload that makes another leaves it be."""

    __slots__ = ("layout",)

    def __init__(self, file: Hdf5File, made: H5File) -> None:
        self.layout = layout = made.layout
        regions = layout.data_regions
        starts, sizes = [r.offset for r in regions], [r.size for r in regions]
        super().__init__(file, starts, sizes, layout.size, layout.header_size)

    def header(self, start: int, stop: int) -> bytes:
        try:
            return self.layout.header_range(start, stop)
        except TreeChanged as e:  # never a corrupt file
            log.error("an HDF5 view changed under its handle: %s", e)
            raise FsError(errno.EIO, str(e)) from e
