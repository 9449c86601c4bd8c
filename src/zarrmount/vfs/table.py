"""The inode table: every node listed so far, by number, and what nodes share (the
hierarchy to list, the array engines to open, the mount's settings)."""

from __future__ import annotations

import copy
import itertools
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

from zarrmount.array import Arrays, TooLong
from zarrmount.errors import FsError, enoent
from zarrmount.format.georef import Found, Place
from zarrmount.format.model import ArrayNode, GroupNode, HiddenNode
from zarrmount.format.multiscales import Pyramid, pyramid
from zarrmount.format.physical import Space, spaces
from zarrmount.headers import NotApplicable
from zarrmount.headers.hdf5_group import file_name as h5_name
from zarrmount.headers.netcdf_group import STRINGS, Member, file_name, group_file
from zarrmount.hierarchy.base import Child
from zarrmount.hierarchy.tree import Tree
from zarrmount.vfs.arrayfile import ArrayFile
from zarrmount.vfs.directory import Directory
from zarrmount.vfs.hdf5file import Hdf5File
from zarrmount.vfs.listing import Listing
from zarrmount.vfs.netcdffile import NetcdfFile
from zarrmount.vfs.node import Node
from zarrmount.vfs.places import places
from zarrmount.vfs.sidecarfile import SidecarFile, subject
from zarrmount.vfs.sidecars import Sidecar, header_size, tiff_tags
from zarrmount.vfs.textfile import TextFile
from zarrmount.vfs.tiledtiff import TiledTiff, layout_of, ome_layout, tiled_levels
from zarrmount.vfs.xattrs import warn_conventions

log = logging.getLogger(__name__)

ROOT_INODE = 1


# Read-only array files whose engine is kept after their last close, most recent first: a
# file opened again soon keeps its plans. Each may hold a few MiB (see docs/cache.md).
KEEP_CLOSED = 8


class InodeTable:
    def __init__(
        self,
        tree: Tree,
        arrays: Arrays,
        sidecars: tuple[Sidecar, ...] = (),
        text: bool = True,
        dataset: str | None = None,
        root_name: str = "root",
        hdf5: bool = False,
    ) -> None:
        self.tree = tree
        self.arrays = arrays
        self.sidecars = sidecars  # shown beside each array file that has them
        self.text = text  # arrays of strings shown as NAME.txt
        self.dataset = dataset  # the root group's name: each group is a NAME.nc; None: not
        self.root_name = root_name  # the root group's name in the files named for groups
        self._netcdf: dict[int, NetcdfFile] = {}  # by directory: kept while unchanged
        self.hdf5 = hdf5  # each group's subtree shown as NAME.h5
        self._hdf5: dict[int, Hdf5File] = {}  # by directory: kept while its subtree is
        self.read_only = arrays.read_only
        self.mtime_ns = time.time_ns()  # of the mount: every node's until written
        self.total_bytes = 0  # of every array file (statfs)
        self.arrays_seen = 0  # arrays listed (a reload counts changed ones again)
        self._nodes: dict[int, Node] = {}
        self._inos = itertools.count(ROOT_INODE + 1)  # never one number for two nodes
        # the kernel's lookups and the open handles of each node (see release)
        self._refs: Counter[int] = Counter()
        self._retired: set[int] = set()  # shown by no listing any more, still referenced
        self._closed: OrderedDict[int, Node] = OrderedDict()  # see KEEP_CLOSED
        # directory inode -> entries not from the store (.snapshots): name -> (inode, listed)
        self.extras: dict[int, dict[str, tuple[int, bool]]] = {}
        # told the (directory inode, name) pairs whose kernel entries are stale
        self.stale_names: Callable[[list[tuple[int, str]]], None] = lambda _pairs: None

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, ino: int) -> Node:
        node = self._nodes.get(ino)
        if node is None:
            raise enoent(f"inode {ino}")
        return node

    def add(self, node: Node) -> Node:
        self._nodes[node.ino] = node
        return node

    def view(self, tree: Tree, arrays: Arrays) -> InodeTable:
        """A table for another version of the hierarchy (vfs/snapshots.py): its own tree
        and engines, read-only, adding its nodes to this table's inodes."""
        other = copy.copy(self)
        other.tree, other.arrays, other.read_only = tree, arrays, True
        return other

    def array_files(self, paths: set[str] | None) -> list[int]:
        """The inodes of this table's files showing the bytes of arrays at ``paths`` (None:
        of every array): array files, and the sidecar views of them."""

        def shows(node: Node) -> bool:
            return any(
                isinstance(file, ArrayFile)
                and file.table is self
                and (paths is None or file.array.path in paths)
                for file in node.shown_files()
            )

        return [ino for ino, node in self._nodes.items() if shows(node)]

    def add_extra(self, parent: int, name: str, node: Node, listed: bool) -> None:
        """``name`` in directory ``parent``, found by lookup, listed only if ``listed``;
        never over a node of the store's of the same name."""
        self.extras.setdefault(parent, {})[name] = (node.ino, listed)

    def next_ino(self) -> int:
        return next(self._inos)

    def hold(self, ino: int, count: int = 1) -> None:
        """The kernel learnt of ``ino`` (a lookup, a listed entry) or opened it."""
        self._refs[ino] += count

    def release(self, ino: int, count: int = 1) -> None:
        """The kernel forgot ``count`` lookups of ``ino``, or closed it: a node no listing
        shows any more goes with its last reference."""
        left = self._refs[ino] - count
        if left > 0:
            self._refs[ino] = left
            return
        self._refs.pop(ino, None)
        if ino in self._retired:
            self._drop(ino)

    def retire(self, inos: Iterable[int]) -> None:
        """Nodes that left their listings (a reload), with what they hold (a group's
        entries): each goes now if nothing references it, else with its last reference."""
        stack = list(inos)
        while stack:
            ino = stack.pop()
            node = self._nodes.get(ino)
            if node is None or ino == ROOT_INODE or ino in self._retired:
                continue
            self._retired.add(ino)
            if isinstance(node, Directory) and node.listing is not None:
                stack += node.listing.entries.values()
            stack += [i for i, _listed in self.extras.get(ino, {}).values()]
            if ino not in self._refs:
                self._drop(ino)

    def _drop(self, ino: int) -> None:
        self._retired.discard(ino)
        self._nodes.pop(ino, None)
        self._closed.pop(ino, None)
        self._netcdf.pop(ino, None)  # a directory's
        self._hdf5.pop(ino, None)
        self.extras.pop(ino, None)

    async def adopt(self, parent: Node, children: list[Child], kept: Listing | None = None):
        """The listing of ``parent`` holding ``children``: their nodes, and the sidecars of
        the array files among them, which never shadow a real node. ``kept``: entries
        that stay from an earlier listing (a reload), whose names a sidecar never takes."""
        listing = Listing() if kept is None else kept
        # what the group's HDF5 file was made of (a reload below may change it)
        hdf5 = self.hdf5 and kept is not None
        before = self._members(parent.listing) if hdf5 and isinstance(parent, Directory) else None
        files: list[tuple[str, ArrayFile]] = []
        texts: list[tuple[str, ArrayNode, ArrayFile | None]] = []
        for child in children:
            model = child.node
            if isinstance(model, HiddenNode):
                log.warning("not shown: %s %r: %s", model.kind, model.path or "/", model.reason)
                if model.kind == "array":
                    listing.unshown[child.name] = model.reason
            elif isinstance(model, GroupNode):
                node = self.add(Directory(self.next_ino(), parent.ino, model, self))
                listing.put(child.name, child.name, node.ino)
            elif model.meta.strings is not None:  # no raw form: its text alone
                texts.append((child.name, model, None))
            else:
                file = self.add(ArrayFile(self.next_ino(), parent.ino, model, self))
                listing.put(child.name, child.name, file.ino)
                files.append((child.name, file))
                if model.meta.dtype.kind in "US":
                    texts.append((child.name, model, file))
        placed = await self._places(parent, files)
        pyramid = self._pyramid(parent, files)
        levels = self._levels(pyramid, files)
        overviews = {pyramid.levels[0].path: levels[1:]} if pyramid and levels else {}
        spaced = self._spaces(parent, files)
        for name, file in files:
            found = placed.get(name)
            place = found if isinstance(found, Place) else None
            below = overviews.get(name, [])
            self._add_sidecars(parent, name, file, listing, place, below, spaced.get(name))
        for name, array, file in texts:
            await self._add_text(parent, name, array, file, listing)
        self._add_hdf5(parent, listing)
        self._add_netcdf(parent, listing)
        self._add_ome_tiff(parent, listing, pyramid, levels)
        if hdf5 and before != self._members(listing):
            self._renew_above(parent)
        return listing

    async def _places(self, parent: Node, files: list[tuple[str, ArrayFile]]) -> dict[str, Found]:
        """Where the arrays lie, where a header shown says so."""
        if not any(s.placed for s in self.sidecars):
            return {}
        group = parent.model
        attributes = group.attributes if isinstance(group, GroupNode) else {}
        return await places(attributes, dict(files))

    def _spaces(self, parent: Node, files: list[tuple[str, ArrayFile]]) -> dict[str, Space]:
        """Where the arrays' elements lie in physical space (format/physical.py), where a
        header shown says so; from the group's attributes alone."""
        group = parent.model
        if not any(s.spaced for s in self.sidecars) or not isinstance(group, GroupNode):
            return {}
        arrays = {n: (f.array.meta.shape, f.array.meta.dtype.str) for n, f in files}
        found = spaces(group.attributes, arrays)
        return {name: space for name, space in found.items() if isinstance(space, Space)}

    def _pyramid(self, parent: Node, files: list[tuple[str, ArrayFile]]) -> Pyramid | None:
        """The group's pyramid (format/multiscales.py), where a tiled view shows it."""
        group = parent.model
        if not any(s.tiled for s in self.sidecars) or not isinstance(group, GroupNode):
            return None
        arrays = {n: (f.array.meta.shape, f.array.meta.dtype.str) for n, f in files}
        found = pyramid(group.attributes, arrays)
        return found if isinstance(found, Pyramid) else None

    @staticmethod
    def _levels(found: Pyramid | None, files: list[tuple[str, ArrayFile]]) -> list[ArrayFile]:
        """The pyramid's levels that can be tiles of one TIFF, full resolution first."""
        if found is None:
            return []
        by_name = dict(files)
        return tiled_levels([by_name[level.path] for level in found.levels])

    def _add_ome_tiff(
        self, parent: Node, listing: Listing, found: Pyramid | None, levels: list[ArrayFile]
    ) -> None:
        """``GROUP.ome.tif``: the group's pyramid (``levels``, those that can be tiles) as
        one OME-TIFF, where it has one; the full resolution's view shows the others as
        overviews."""
        if found is None or not levels:
            return
        group = parent.model
        name = (group.path.rpartition("/")[2] or self.root_name) + ".ome.tif"
        if name in listing.entries:
            log.warning("%s: no OME-TIFF: a node of that name exists", name)
            return
        try:
            layout = ome_layout(levels, name.removesuffix(".ome.tif"), found, group.attributes)
        except NotApplicable as e:
            log.info("%s: no OME-TIFF: %s", group.path or "/", e)
            return
        node = TiledTiff(self.next_ino(), parent.ino, levels, layout, self)
        listing.put(name, name, self.add(node).ino)

    def _add_sidecars(
        self,
        parent: Node,
        name: str,
        file: ArrayFile,
        listing: Listing,
        place: Place | None,
        overviews: list[ArrayFile],
        space: Space | None = None,
    ) -> None:
        for sidecar in self.sidecars:
            if name + sidecar.suffix in listing.entries:
                log.warning("%s: no %s sidecar: a node of that name exists", name, sidecar.kind)
                continue
            node = self._sidecar(parent, name, file, sidecar, place, overviews, space)
            if node is not None:  # else --inspect says why
                listing.put(name + sidecar.suffix, name, self.add(node).ino)

    def _sidecar(
        self,
        parent: Node,
        name: str,
        file: ArrayFile,
        sidecar: Sidecar,
        place: Place | None,
        overviews: list[ArrayFile],
        space: Space | None = None,
    ) -> Node | None:
        """The sidecar node of ``file``: tiled where the format and the chunks allow."""
        described = subject(file, name, place, space)
        if sidecar.tiled:
            levels = [file, *overviews]
            try:
                # a microscope's stack as pages (as Fiji reads them), a map's as bands
                planes = space is not None and place is None
                layout = layout_of(levels, tiff_tags(described, imagej=planes), planes)
                return TiledTiff(self.next_ino(), parent.ino, levels, layout, self)
            except NotApplicable:
                pass  # strips
        size = header_size(sidecar, described)
        if size is None:
            return None
        ino = self.next_ino()
        return SidecarFile(ino, parent.ino, file, name, sidecar, size, self, place, space)

    def _add_netcdf(self, parent: Node, listing: Listing) -> None:
        """``NAME.nc``: the group's arrays in one netCDF file, made again only when they or
        the group's attributes change."""
        group = parent.model
        if self.dataset is None or not isinstance(group, GroupNode):
            return
        name = file_name(group.path, self.dataset)
        if name in listing.entries:
            log.warning("%s: no netCDF file: a node of that name exists", name)
            return
        members, files = [], {}
        for owner in dict.fromkeys(listing.owners.values()):
            model = self.model(listing, owner)
            if not isinstance(model, ArrayNode):
                continue
            node = self._nodes.get(listing.entries.get(owner, 0))
            if isinstance(node, ArrayFile):
                files[owner] = node
                members.append(Member(owner, model.meta, node.dtype()))
            else:
                members.append(Member(owner, None, None, STRINGS))
        members += [Member(array, None, None, why) for array, why in listing.unshown.items()]
        key = (group, tuple(f.ino for f in files.values()))
        made = self._netcdf.get(parent.ino)
        if made is None or made.key != key:
            found = group_file(group.attributes, members, group.path or "/")
            shown = [files[m.name] for m in found.members]
            made = NetcdfFile(self.next_ino(), parent.ino, found, shown, key)
            self._netcdf[parent.ino] = self.add(made)
        listing.put(name, name, made.ino)

    def _members(self, listing: Listing | None) -> tuple[int, ...] | None:
        """The nodes of the groups and arrays a listing shows (what its HDF5 file is made
        of, with theirs)."""
        if listing is None:
            return None
        return tuple(
            sorted(
                listing.entries.get(owner) or listing.entries[owner + ".txt"]
                for owner in dict.fromkeys(listing.owners.values())
                if isinstance(self.model(listing, owner), GroupNode | ArrayNode)
            )
        )

    def _add_hdf5(self, parent: Node, listing: Listing) -> None:
        """``NAME.h5``: the group and everything below it as one HDF5 file, made when the
        kernel is first told its size (``Hdf5File.ready``), and again only when a
        listing of its subtree changes (here, or ``_renew_above``)."""
        group = parent.model
        if not self.hdf5 or not isinstance(group, GroupNode):
            return
        name = h5_name(group.path, self.root_name)
        if name in listing.entries:
            log.warning("%s: no HDF5 file: a node of that name exists", name)
            return
        key = (group, self._members(listing))
        made = self._hdf5.get(parent.ino)
        if made is None or made.key != key:
            made = Hdf5File(self.next_ino(), parent.ino, self, key)
            self._hdf5[parent.ino] = self.add(made)
        listing.put(name, name, made.ino)

    def _renew_above(self, directory: Node) -> None:
        """The groups or arrays ``directory`` shows changed: the HDF5 files made of the
        groups above it are made anew (a new node, the kernel told; handles open on the
        old one keep it)."""
        below = directory
        while below.parent != below.ino and (above := self._nodes.get(below.parent)):
            old = self._hdf5.get(above.ino)
            if old is not None and old.made is not None and isinstance(above, Directory):
                assert above.listing is not None and above.group is not None  # it has one
                name = h5_name(above.group.path, self.root_name)
                new = self._hdf5[above.ino] = Hdf5File(self.next_ino(), above.ino, self, old.key)
                above.listing.put(name, name, self.add(new).ino)
                self.retire([old.ino])
                self.forget(above.ino, {name})
            below = above

    async def _add_text(
        self, parent: Node, name: str, array: ArrayNode, file: ArrayFile | None, listing: Listing
    ) -> None:
        """``name.txt`` where the mount shows text and the array's fits in ``text_max``."""
        if not self.text:
            if file is None:
                log.warning("not shown: array %r: strings (-o sidecars=...+text)", array.path)
                listing.unshown[name] = STRINGS
            return
        if name + ".txt" in listing.entries:
            log.warning("%s: no text sidecar: a node of that name exists", name)
            return
        text = self.arrays.text(array, file and file.contents)
        try:
            size = await text.measure()
        except (TooLong, FsError) as e:
            log.warning("not shown: %s.txt: %s", array.path or name, e)
            if file is None:
                listing.unshown[name] = STRINGS
            return
        if file is None:
            self.noticed(array.path, array.meta.attributes, size)
        node = TextFile(self.next_ino(), parent.ino, text, array if file is None else None)
        listing.put(name + ".txt", name, self.add(node).ino)

    def model(self, listing: Listing, name: str) -> object | None:
        """What the child ``name`` of a listing showed (a group, an array), if shown."""
        text = name + ".txt"  # all an array of variable-length strings shows
        ino = listing.entries.get(name)
        if ino is None and listing.owners.get(text) == name:
            ino = listing.entries[text]
        return None if ino is None else self[ino].model

    def noticed(self, path: str, attributes: dict, nbytes: int | None = None) -> None:
        """A node was added (an array when it has ``nbytes``): count it and its bytes, warn
        of malformed conventions once."""
        if nbytes is not None:
            self.arrays_seen += 1
            self.total_bytes += nbytes
        warn_conventions(path, attributes)

    def forget(self, ino: int, names: set[str]) -> None:
        if names:
            self.stale_names([(ino, name) for name in sorted(names)])

    def reopened(self, node: ArrayFile) -> None:
        self._closed.pop(node.ino, None)

    def closed(self, node: ArrayFile) -> None:
        """``node``'s last handle is closed: keep its engine among the KEEP_CLOSED most
        recent, then let go of the oldest's."""
        self._closed[node.ino] = node
        self._closed.move_to_end(node.ino)
        while len(self._closed) > KEEP_CLOSED:
            _, old = self._closed.popitem(last=False)
            old.let_go()
