"""The pyfuse3 adapter's handlers, called directly without a kernel.

The real :class:`Filesystem` over small stores written by zarr-python (Zarr v2 and v3,
nested groups, a sharded array, a big-endian one, an empty one, a root array) is wrapped
in :class:`Operations` as ``session.run`` does, and every handler is awaited under
``trio.run`` with the arguments pyfuse3 passes. ``pyfuse3.readdir_reply`` is replaced by a
collector. Expected values never come from our own output: bytes from zarr-python's
reading of the same store, sizes from shape and itemsize with NumPy, xattr values from
the metadata documents zarr-python wrote, errno values from the ``errno`` module.

ERANGE (a getxattr/listxattr buffer too small) is pyfuse3's own: its C layer compares
the length of the bytes the handler returns with the request's size, and the handler never
sees the size; the tests check that the handlers return ``bytes``.

A read's reply is copied as soon as the handler returns, before anything else is
awaited: pyfuse3 sends it at that point and the adapter reuses its reply buffers.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from types import SimpleNamespace

import numcodecs
import numpy as np
import pyfuse3
import pytest
import trio
import zarr
from zarr.codecs import BytesCodec

from zarrmount import hierarchy
from zarrmount.assemble import Mount, assemble
from zarrmount.fuse.adapter import Operations
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs import FsError

CTX = pyfuse3.RequestContext()  # what pyfuse3 passes; the adapter never reads it
ROOT = pyfuse3.ROOT_INODE

# path: create_array keywords (shape, chunks and dtype are also the test's expectations)
V2_ARRAYS = {
    "a": dict(
        shape=(23, 17),
        chunks=(8, 6),
        dtype="<i4",
        compressors=numcodecs.Zstd(level=1),
        fill_value=-7,
        order="F",
        attributes={"long_name": "a", "n": [1, 2]},
    ),
    "grp/sub/b": dict(
        shape=(41,), chunks=(8,), dtype=">f8", compressors=numcodecs.Zstd(level=1), fill_value=1.5
    ),
    "grp/c": dict(shape=(5, 3, 4), chunks=(2, 3, 4), dtype="u1", compressors=None, fill_value=9),
}
V3_ARRAYS = {
    "x": dict(
        shape=(30, 20),
        chunks=(8, 8),
        dtype="<u2",
        dimension_names=("y", "x"),
        attributes={"units": "m"},
    ),
    "deep/er/s": dict(shape=(40, 24), chunks=(4, 8), shards=(8, 24), dtype="<f4", fill_value=2.5),
    "deep/be": dict(
        shape=(9,), chunks=(4,), dtype=">i8", serializer=BytesCodec(endian="big"), compressors=None
    ),
    "deep/empty": dict(shape=(0, 5), chunks=(2, 5), dtype="<f8"),
}
LAYOUTS = {
    "v2": (2, V2_ARRAYS, {"grp": {"role": "nested"}, "grp/none": {}}),
    "v3": (3, V3_ARRAYS, {"deep": {"level": 1}, "deep/nothing": {}}),
}
ROOT_ARRAY = dict(shape=(10, 3), chunks=(4, 3), dtype="<i2", fill_value=0)


def nbytes(spec: dict) -> int:
    return int(np.prod(spec["shape"], dtype=np.int64)) * np.dtype(spec["dtype"]).itemsize


def values(shape: tuple, dtype: str, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    data = rng.integers(0, 100, size=shape)
    if dt.kind == "f":
        data = data + rng.random(shape)
    return data.astype(dt)


def _write(arr, rng) -> None:
    if arr.size == 0:
        return
    # about three quarters of each dimension: the trailing chunks stay missing (fill value)
    region = tuple(slice(0, max(1, n * 3 // 4)) for n in arr.shape)
    arr[region] = values(tuple(s.stop for s in region), arr.dtype, rng)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("adapter")
    rng = np.random.default_rng(3)
    roots = {}
    for name, (fmt, arrays, groups) in LAYOUTS.items():
        root = roots[name] = str(base / f"{name}.zarr")
        g = zarr.open_group(root, mode="w", zarr_format=fmt)
        g.attrs["title"] = f"{name} root"
        for path, attrs in groups.items():
            g.create_group(path, attributes=attrs)
        for path, spec in arrays.items():
            _write(g.create_array(path, **spec), rng)
    root = roots["root-array"] = str(base / "root-array.zarr")
    _write(zarr.create_array(root, zarr_format=3, **ROOT_ARRAY), rng)
    return roots


@dataclass(frozen=True)
class LayoutStore:
    """One store of ``stores`` with what ``LAYOUTS`` wrote to it."""

    name: str
    root: str
    fmt: int
    arrays: dict[str, dict]
    groups: dict[str, dict]


@pytest.fixture(params=sorted(LAYOUTS))
def layout_store(request, stores) -> LayoutStore:
    """Each layout's store in turn, for the tests that check a whole store."""
    fmt, arrays, groups = LAYOUTS[request.param]
    return LayoutStore(request.param, stores[request.param], fmt, arrays, groups)


def oracle(root: str, path: str | None = None) -> bytes:
    """zarr-python's reading of the array, in C order and the byte order the store keeps
    (README: ``>i8`` stored big-endian reads big-endian; zarr-python gives native order)."""
    arr = zarr.open_array(root, path=path, mode="r") if path else zarr.open_array(root, mode="r")
    spec = ROOT_ARRAY if path is None else {**V2_ARRAYS, **V3_ARRAYS}[path]
    return np.ascontiguousarray(arr[:], dtype=np.dtype(spec["dtype"])).tobytes()


def members(root: str) -> dict[str, str]:
    """Every node below the root, as zarr-python lists it: path -> "array" | "group"."""
    group = zarr.open_group(root, mode="r")
    return {
        key: "array" if isinstance(node, zarr.Array) else "group"
        for key, node in group.members(max_depth=None)
    }


def metadata(root: str, path: str, fmt: int) -> tuple[dict, dict]:
    """The array's metadata document and attributes, as zarr-python wrote them."""
    where = os.path.join(root, path)
    if fmt == 3:
        with open(os.path.join(where, "zarr.json")) as f:
            doc = json.load(f)
        return doc, doc.get("attributes", {})
    with open(os.path.join(where, ".zarray")) as f:
        doc = json.load(f)
    try:
        with open(os.path.join(where, ".zattrs")) as f:
            attrs = json.load(f)
    except FileNotFoundError:
        attrs = {}
    return doc, attrs


class MountedOps(Operations):
    """The adapter over a freshly assembled mount, whose parts tests reach as ``mount``."""

    def __init__(self, mount: Mount) -> None:
        super().__init__(mount.fs)
        self.mount = mount


def make_ops(root: str, **options) -> MountedOps:
    """The adapter over a fresh mount's Filesystem, wrapped as ``session.run`` wraps it;
    the arrays alone, with no sidecar files, unless ``options`` ask for some."""
    options.setdefault("sidecars", [])
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    return MountedOps(assemble(dialect, node, pipeline, MountOptions(**options)))


def run(ops: Operations, fn, *args):
    """Run ``fn(ops, *args)`` with a background nursery, as the session's ``_serve`` does."""

    async def main():
        result, error = None, None
        async with trio.open_nursery() as nursery:
            ops.mount.background.nursery = nursery
            try:
                result = await fn(ops, *args)
            except Exception as e:  # raised as is, not in the nursery's exception group
                error = e
            finally:
                ops.mount.background.nursery = None
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error
        return result

    return trio.run(main)


async def resolve(ops: Operations, path: str) -> pyfuse3.EntryAttributes:
    entry = await ops.getattr(ROOT, CTX)
    for part in filter(None, path.split("/")):
        entry = await ops.lookup(entry.st_ino, os.fsencode(part), CTX)
    return entry


async def read(ops: Operations, fh: int, off: int, size: int) -> bytes:
    reply = await ops.read(fh, off, size)
    # pyfuse3 takes the reply with PyBUF_CONTIG_RO and sends it before any task runs
    assert memoryview(reply).c_contiguous
    return bytes(reply)


async def read_all(ops: Operations, fh: int, step: int) -> bytes:
    out = bytearray()
    while piece := await read(ops, fh, len(out), step):
        assert len(piece) <= step
        out += piece
    return bytes(out)


async def expect(code: int, coro) -> None:
    with pytest.raises(pyfuse3.FUSEError) as info:
        await coro
    assert info.value.errno == code, (
        f"errno {errno.errorcode.get(info.value.errno)}, expected {errno.errorcode[code]}"
    )


class Token:
    """A readdir token whose reply buffer holds ``room`` entries (None: any number)."""

    def __init__(self, room: int | None = None) -> None:
        self.room = room
        self.entries: list[tuple[bytes, pyfuse3.EntryAttributes, int]] = []


@pytest.fixture(autouse=True)
def readdir_reply(monkeypatch):
    def reply(token, name, attr, next_id):
        assert isinstance(token, Token)
        assert isinstance(name, bytes)
        assert isinstance(attr, pyfuse3.EntryAttributes)
        if token.room is not None and len(token.entries) >= token.room:
            return False  # the kernel's buffer is full: this entry is not added
        token.entries.append((name, attr, next_id))
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)


async def listdir(ops: Operations, ino: int) -> list[tuple[bytes, pyfuse3.EntryAttributes, int]]:
    fh = await ops.opendir(ino, CTX)
    token = Token()
    await ops.readdir(fh, 0, token)
    await ops.releasedir(fh)
    return token.entries


def same_attributes(a: pyfuse3.EntryAttributes, b: pyfuse3.EntryAttributes) -> None:
    for field in (
        "st_ino",
        "st_mode",
        "st_nlink",
        "st_uid",
        "st_gid",
        "st_size",
        "st_blocks",
        "st_mtime_ns",
    ):
        assert getattr(a, field) == getattr(b, field), field


# -- the tree: lookup, getattr, readdir -------------------------------------------------


def test_tree_matches_zarr_python(layout_store):
    root, arrays = layout_store.root, layout_store.arrays
    nodes = members(root)
    assert {k for k, kind in nodes.items() if kind == "array"} == set(arrays)
    ops = make_ops(root)

    async def main(ops):
        inos = {"": ROOT}
        for path in sorted(nodes, key=lambda p: p.count("/")):
            entry = await resolve(ops, path)
            inos[path] = entry.st_ino
            assert entry.entry_timeout > 0 and entry.attr_timeout > 0
            assert entry.st_uid == os.getuid() and entry.st_gid == os.getgid()
            if nodes[path] == "array":
                size = nbytes(arrays[path])
                assert size == zarr.open_array(root, path=path, mode="r").nbytes
                assert stat.S_ISREG(entry.st_mode)
                assert stat.S_IMODE(entry.st_mode) == 0o444  # README: files 0444 (umask 022)
                assert (entry.st_size, entry.st_nlink) == (size, 1)
                assert entry.st_blocks == -(-size // 512)
            else:
                assert stat.S_ISDIR(entry.st_mode)
                assert stat.S_IMODE(entry.st_mode) == 0o555  # README: directories 0555
                assert entry.st_nlink == 2
            same_attributes(entry, await ops.getattr(entry.st_ino, CTX))
            parent = path.rpartition("/")[0]
            assert (
                await ops.lookup(inos[parent], os.fsencode(path.rpartition("/")[2]), CTX)
            ).st_ino == entry.st_ino
            if nodes[path] == "group":  # supports_dot_lookup: "." and ".." are looked up
                assert (await ops.lookup(entry.st_ino, b".", CTX)).st_ino == entry.st_ino
                assert (await ops.lookup(entry.st_ino, b"..", CTX)).st_ino == inos[parent]
        assert (await ops.lookup(ROOT, b".", CTX)).st_ino == ROOT
        assert (await ops.lookup(ROOT, b"..", CTX)).st_ino == ROOT
        assert len(set(inos.values())) == len(inos)

        for group in [""] + [p for p, kind in nodes.items() if kind == "group"]:
            expected = sorted(p.rpartition("/")[2] for p in nodes if p.rpartition("/")[0] == group)
            entries = await listdir(ops, inos[group])
            assert [os.fsdecode(name) for name, _, _ in entries] == expected
            assert [next_id for _, _, next_id in entries] == list(range(1, len(expected) + 1))
            for name, attr, _ in entries:
                path = f"{group}/{os.fsdecode(name)}".lstrip("/")
                same_attributes(attr, await ops.getattr(inos[path], CTX))

    run(ops, main)


def test_options_set_owner_and_mode(stores):
    ops = make_ops(stores["v2"], uid=1234, gid=4321, umask=0o027)

    async def main(ops):
        for path, perms, kind in (
            ("", 0o550, stat.S_ISDIR),
            ("grp", 0o550, stat.S_ISDIR),
            ("grp/sub/b", 0o440, stat.S_ISREG),
        ):
            entry = await resolve(ops, path)
            assert kind(entry.st_mode) and stat.S_IMODE(entry.st_mode) == perms
            assert (entry.st_uid, entry.st_gid) == (1234, 4321)

    run(ops, main)


@pytest.mark.parametrize("room", [1, 2, 3])
def test_readdir_resumes_after_a_full_buffer(stores, room):
    root = stores["v3"]
    expected = sorted(
        p.rpartition("/")[2] for p in members(root) if p.startswith("deep/") and p.count("/") == 1
    )
    assert len(expected) == 4
    ops = make_ops(root)

    async def main(ops):
        fh = await ops.opendir((await resolve(ops, "deep")).st_ino, CTX)
        seen, start, calls = [], 0, 0
        while True:
            token = Token(room)
            await ops.readdir(fh, start, token)
            calls += 1
            if not token.entries:
                break
            assert len(token.entries) <= room
            seen += [os.fsdecode(name) for name, _, _ in token.entries]
            start = token.entries[-1][2]
        await ops.releasedir(fh)
        assert seen == expected  # none skipped, none twice
        assert calls == -(-len(expected) // room) + 1

    run(ops, main)


def test_empty_group_and_root_array(stores):
    async def empty(ops):
        assert await listdir(ops, (await resolve(ops, "deep/nothing")).st_ino) == []

    run(make_ops(stores["v3"]), empty)

    root = stores["root-array"]
    expected = oracle(root)
    assert len(expected) == nbytes(ROOT_ARRAY)

    async def root_array(ops):
        entries = await listdir(ops, ROOT)
        assert [name for name, _, _ in entries] == [b"array"]  # README: root array's name
        entry = await ops.lookup(ROOT, b"array", CTX)
        assert stat.S_ISREG(entry.st_mode) and entry.st_size == len(expected)
        assert entries[0][1].st_ino == entry.st_ino
        info = await ops.open(entry.st_ino, os.O_RDONLY, CTX)
        assert await read_all(ops, info.fh, 7) == expected
        await ops.release(info.fh)
        # the directory holding a root array has (empty) attributes of its own
        assert json.loads(await ops.getxattr(ROOT, b"user.zarr.attributes", CTX)) == {}
        assert b"user.zarr.dtype" in await ops.listxattr(entry.st_ino, CTX)

    run(make_ops(root), root_array)


def test_lookup_and_directory_errors(stores):
    ops = make_ops(stores["v2"])

    async def main(ops):
        grp = (await resolve(ops, "grp")).st_ino
        array = (await resolve(ops, "grp/sub/b")).st_ino
        unknown = 10**6
        await expect(errno.ENOENT, ops.lookup(ROOT, b"missing", CTX))
        await expect(errno.ENOENT, ops.lookup(grp, b"b", CTX))  # b is in grp/sub
        await expect(errno.ENOENT, ops.lookup(grp, b"\xff\xfe", CTX))  # not UTF-8
        await expect(errno.ENOENT, ops.lookup(unknown, b"a", CTX))
        await expect(errno.ENOTDIR, ops.lookup(array, b"x", CTX))
        await expect(errno.ENOTDIR, ops.lookup(array, b".", CTX))
        await expect(errno.ENOENT, ops.getattr(unknown, CTX))
        await expect(errno.ENOTDIR, ops.opendir(array, CTX))
        await expect(errno.ENOENT, ops.opendir(unknown, CTX))
        await expect(errno.EBADF, ops.readdir(12345, 0, Token()))
        fh = await ops.opendir(grp, CTX)
        await ops.releasedir(fh)
        await expect(errno.EBADF, ops.readdir(fh, 0, Token()))
        await expect(errno.EISDIR, ops.open(ROOT, os.O_RDONLY, CTX))
        await expect(errno.EISDIR, ops.open(grp, os.O_RDONLY, CTX))
        await expect(errno.ENOENT, ops.open(unknown, os.O_RDONLY, CTX))
        await expect(errno.ENOENT, ops.access(unknown, os.R_OK, CTX))
        assert await ops.access(array, os.R_OK, CTX) is True
        await ops.forget([(array, 1), (grp, 3)])  # nothing to drop: inodes stay
        assert (await ops.getattr(array, CTX)).st_ino == array

    run(ops, main)


# -- open, read, release ----------------------------------------------------------------

ALL_ARRAYS = [
    (layout, path) for layout, (_, arrays, _) in sorted(LAYOUTS.items()) for path in arrays
]


@pytest.mark.parametrize(("layout", "path"), ALL_ARRAYS)
def test_reads_equal_zarr_python(stores, layout, path):
    root = stores[layout]
    spec = LAYOUTS[layout][1][path]
    expected = oracle(root, path)
    assert len(expected) == nbytes(spec)
    ops = make_ops(root)
    rng = np.random.default_rng(len(path))

    async def main(ops):
        entry = await resolve(ops, path)
        info = await ops.open(entry.st_ino, os.O_RDONLY, CTX)
        assert isinstance(info, pyfuse3.FileInfo)
        assert info.keep_cache and not info.direct_io
        for step in (1 << 20, 4096, 333, 7):
            assert await read_all(ops, info.fh, step) == expected
        size = len(expected)
        for _ in range(40):
            off = int(rng.integers(0, size + 20))
            n = int(rng.integers(0, 300))
            assert await read(ops, info.fh, off, n) == expected[off : off + n]
        assert await read(ops, info.fh, size, 4096) == b""  # at the end
        assert await read(ops, info.fh, size + 4096, 10) == b""  # past it
        assert await read(ops, info.fh, 0, 0) == b""
        if size:
            assert await read(ops, info.fh, size - 3, 100) == expected[-3:]  # short
        # a second handle on the same file reads the same; closing one keeps the other
        other = await ops.open(entry.st_ino, os.O_RDONLY, CTX)
        assert other.fh != info.fh
        await ops.flush(info.fh)
        await ops.fsync(info.fh, False)
        await ops.release(info.fh)
        assert await read_all(ops, other.fh, 4096) == expected
        await ops.release(other.fh)
        await expect(errno.EBADF, ops.read(info.fh, 0, 10))
        await expect(errno.EBADF, ops.read(4242, 0, 10))

    run(ops, main)


def test_direct_io_option_reaches_the_file_info(stores):
    ops = make_ops(stores["v3"], direct_io=True)

    async def main(ops):
        info = await ops.open((await resolve(ops, "x")).st_ino, os.O_RDONLY, CTX)
        assert info.direct_io and not info.keep_cache
        assert await read_all(ops, info.fh, 1000) == oracle(stores["v3"], "x")
        await ops.release(info.fh)

    run(ops, main)


def test_concurrent_reads_keep_their_replies_apart(stores):
    """Reads in flight at once each get their own reply (the adapter reuses buffers)."""
    jobs = [
        (layout, path) for layout, path in ALL_ARRAYS if layout == "v3" and nbytes(V3_ARRAYS[path])
    ]
    expected = {path: oracle(stores["v3"], path) for _, path in jobs}
    ops = make_ops(stores["v3"], cache_size=4096)  # small cache: reads keep loading

    async def main(ops):
        got: dict[tuple[str, int], bytes] = {}

        async def reader(path: str, fh: int, step: int) -> None:
            off = 0
            while piece := await read(ops, fh, off, step):
                got[path, off] = piece
                off += len(piece)

        handles = {}
        for _, path in jobs:
            handles[path] = (await ops.open((await resolve(ops, path)).st_ino, os.O_RDONLY, CTX)).fh
        async with trio.open_nursery() as nursery:
            for i, (path, fh) in enumerate(handles.items()):
                nursery.start_soon(reader, path, fh, 50 + 37 * i)
        for path, fh in handles.items():
            await ops.release(fh)
            pieces = sorted((off, b) for (p, off), b in got.items() if p == path)
            assert b"".join(b for _, b in pieces) == expected[path]

    run(ops, main)


# -- extended attributes ----------------------------------------------------------------


@pytest.mark.parametrize(("layout", "path"), ALL_ARRAYS)
def test_array_xattrs_describe_the_metadata(stores, layout, path):
    root = stores[layout]
    fmt, arrays, _ = LAYOUTS[layout]
    spec = arrays[path]
    doc, attributes = metadata(root, path, fmt)
    expected = {
        "user.zarr.dtype": np.dtype(spec["dtype"]).str,
        "user.zarr.shape": list(spec["shape"]),
        "user.zarr.chunks": list(spec["chunks"]),
        "user.zarr.fill_value": doc["fill_value"],
        "user.zarr.format": str(fmt),
        "user.zarr.attributes": attributes,
    }
    if fmt == 2:
        expected["user.zarr.order"] = spec.get("order", "C")
        expected["user.zarr.codecs"] = {"filters": doc["filters"], "compressor": doc["compressor"]}
    else:
        expected["user.zarr.codecs"] = {"codecs": doc["codecs"]}
    if "shards" in spec:
        expected["user.zarr.shards"] = list(spec["shards"])
    if "dimension_names" in spec:
        expected["user.zarr.dimension_names"] = list(spec["dimension_names"])
    ops = make_ops(root)

    async def main(ops):
        ino = (await resolve(ops, path)).st_ino
        names = await ops.listxattr(ino, CTX)
        assert all(type(n) is bytes for n in names)  # pyfuse3 joins them with b"\0"
        assert sorted(names) == sorted(os.fsencode(n) for n in expected)
        for name, value in expected.items():
            raw = await ops.getxattr(ino, os.fsencode(name), CTX)
            assert type(raw) is bytes  # pyfuse3 needs bytes to size the reply (ERANGE)
            got = (
                raw.decode()
                if name in ("user.zarr.dtype", "user.zarr.format", "user.zarr.order")
                else json.loads(raw)
            )
            assert got == value, name
        await expect(errno.ENODATA, ops.getxattr(ino, b"user.zarr.nonexistent", CTX))
        await expect(errno.ENODATA, ops.getxattr(ino, b"user.zarrmount.pid", CTX))  # root only
        await expect(errno.ENODATA, ops.getxattr(ino, b"security.selinux", CTX))

    run(ops, main)


def test_directory_xattrs(layout_store):
    root, groups = layout_store.root, layout_store.groups
    ops = make_ops(root)

    async def main(ops):
        names = await ops.listxattr(ROOT, CTX)
        assert sorted(names) == [
            b"user.zarr.attributes",
            b"user.zarrmount.pid",
            b"user.zarrmount.stats",
        ]
        assert json.loads(await ops.getxattr(ROOT, b"user.zarr.attributes", CTX)) == {
            "title": f"{layout_store.name} root"
        }
        assert await ops.getxattr(ROOT, b"user.zarrmount.pid", CTX) == str(os.getpid()).encode()
        stats = json.loads(await ops.getxattr(ROOT, b"user.zarrmount.stats", CTX))
        assert isinstance(stats, dict) and stats
        assert all(isinstance(v, int) for v in stats.values())
        for path, attrs in groups.items():
            ino = (await resolve(ops, path)).st_ino
            assert await ops.listxattr(ino, CTX) == [b"user.zarr.attributes"]
            raw = await ops.getxattr(ino, b"user.zarr.attributes", CTX)
            assert type(raw) is bytes and json.loads(raw) == attrs
            await expect(errno.ENODATA, ops.getxattr(ino, b"user.zarr.dtype", CTX))
            await expect(errno.ENODATA, ops.getxattr(ino, b"user.zarrmount.stats", CTX))
        await expect(errno.ENOENT, ops.getxattr(10**6, b"user.zarr.attributes", CTX))
        await expect(errno.ENOENT, ops.listxattr(10**6, CTX))

    run(ops, main)


# -- statfs -----------------------------------------------------------------------------


def test_statfs_once_the_tree_is_listed(layout_store):
    root, arrays = layout_store.root, layout_store.arrays
    nodes = members(root)
    total = sum(nbytes(spec) for spec in arrays.values())
    ops = make_ops(root)

    async def main(ops):
        for path, kind in nodes.items():
            entry = await resolve(ops, path)
            if kind == "group":
                await listdir(ops, entry.st_ino)
        s = await ops.statfs(CTX)
        assert isinstance(s, pyfuse3.StatvfsData)
        assert s.f_bsize > 0 and s.f_frsize > 0
        assert s.f_blocks == -(-total // s.f_frsize)
        assert s.f_files == len(nodes) + 1  # and the root
        assert (s.f_bfree, s.f_bavail, s.f_ffree, s.f_favail) == (0, 0, 0, 0)
        assert s.f_namemax == 255  # Linux NAME_MAX

    run(ops, main)


# -- read-only mounts: every write path is EROFS ----------------------------------------


def fields(**update) -> SimpleNamespace:
    """pyfuse3.SetattrFields (its attributes cannot be set from Python)."""
    names = (
        "update_atime",
        "update_mtime",
        "update_ctime",
        "update_mode",
        "update_uid",
        "update_gid",
        "update_size",
    )
    return SimpleNamespace(**{n: update.get(n.removeprefix("update_"), False) for n in names})


def new_attr(size: int = 0, mtime_ns: int = 0, mode: int = 0) -> pyfuse3.EntryAttributes:
    attr = pyfuse3.EntryAttributes()
    attr.st_size, attr.st_mtime_ns, attr.st_mode = size, mtime_ns, mode
    return attr


def snapshot(root: str) -> dict[str, bytes]:
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                files[os.path.relpath(os.path.join(dirpath, name), root)] = f.read()
    return files


def test_read_only_mount_refuses_writes_with_erofs(stores):
    root = stores["v3"]
    before = snapshot(root)
    ops = make_ops(root)  # MountOptions(): read-only by default
    assert ops.fs.options.read_only

    async def main(ops):
        entry = await resolve(ops, "x")
        ino, size = entry.st_ino, entry.st_size
        deep = (await resolve(ops, "deep")).st_ino
        for flags in (
            os.O_WRONLY,
            os.O_RDWR,
            os.O_RDONLY | os.O_TRUNC,
            os.O_WRONLY | os.O_TRUNC,
            os.O_RDWR | os.O_APPEND,
        ):
            await expect(errno.EROFS, ops.open(ino, flags, CTX))
        info = await ops.open(ino, os.O_RDONLY, CTX)
        await expect(errno.EROFS, ops.write(info.fh, 0, b"\1\2"))
        await expect(errno.EROFS, ops.write(info.fh, size, b"\1"))
        for target in (ino, deep, ROOT):
            for change in (
                dict(size=0),
                dict(size=size),
                dict(mtime=1),
                dict(atime=1),
                dict(mode=0o777),
                dict(uid=0),
                dict(gid=0),
            ):
                await expect(
                    errno.EROFS,
                    ops.setattr(target, new_attr(0, 1, 0o777), fields(**change), None, CTX),
                )
            await expect(errno.EROFS, ops.setxattr(target, b"user.x", b"1", CTX))
            await expect(errno.EROFS, ops.setxattr(target, b"user.zarr.dtype", b"<f8", CTX))
            await expect(errno.EROFS, ops.removexattr(target, b"user.zarr.attributes", CTX))
            await expect(errno.EROFS, ops.access(target, os.W_OK, CTX))
            assert await ops.access(target, os.R_OK | os.X_OK, CTX) is True
        await expect(
            errno.EROFS, ops.setattr(ino, new_attr(0), fields(size=True), info.fh, CTX)
        )  # ftruncate
        await ops.flush(info.fh)
        await ops.fsync(info.fh, True)
        await ops.release(info.fh)
        assert (await ops.getattr(ino, CTX)).st_size == size

    run(ops, main)
    assert snapshot(root) == before


# The tree is the hierarchy's metadata: these are refused with EROFS on read-only mounts
# (the kernel answers first there, as the session mounts with "ro") and EPERM on rw ones.
NAMESPACE_CALLS = {
    "create": lambda ops, d, f: ops.create(
        d, b"new", stat.S_IFREG | 0o644, os.O_CREAT | os.O_WRONLY, CTX
    ),
    "mknod": lambda ops, d, f: ops.mknod(d, b"new", stat.S_IFREG | 0o644, 0, CTX),
    "mkdir": lambda ops, d, f: ops.mkdir(d, b"newdir", 0o755, CTX),
    "unlink": lambda ops, d, f: ops.unlink(d, b"x", CTX),
    "rmdir": lambda ops, d, f: ops.rmdir(ROOT, b"deep", CTX),
    "rename": lambda ops, d, f: ops.rename(d, b"x", d, b"y", 0, CTX),
    "symlink": lambda ops, d, f: ops.symlink(d, b"link", b"x", CTX),
    "link": lambda ops, d, f: ops.link(f, d, b"hard", CTX),
}


@pytest.mark.parametrize(("read_only", "code"), [(True, errno.EROFS), (False, errno.EPERM)])
@pytest.mark.parametrize("op", sorted(NAMESPACE_CALLS))
def test_namespace_changes_are_refused_and_change_nothing(tmp_path, stores, op, read_only, code):
    root = str(tmp_path / "v3.zarr")
    shutil.copytree(stores["v3"], root)
    before = snapshot(root)
    ops = make_ops(root, read_only=read_only)

    async def main(ops):
        x = (await resolve(ops, "x")).st_ino
        await expect(code, NAMESPACE_CALLS[op](ops, ROOT, x))
        assert sorted(name for name, _, _ in await listdir(ops, ROOT)) == [b"deep", b"x"]

    run(ops, main)
    assert snapshot(root) == before


# -- read-write mounts ------------------------------------------------------------------


@pytest.fixture
def rw_copy(tmp_path, stores):
    def copy(layout: str) -> str:
        root = str(tmp_path / f"{layout}.zarr")
        shutil.copytree(stores[layout], root)
        return root

    return copy


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_rw_writes_read_back_and_reach_the_store(rw_copy, layout):
    root = rw_copy(layout)
    _, arrays, _ = LAYOUTS[layout]
    paths = [p for p in arrays if nbytes(arrays[p])]
    models = {p: bytearray(oracle(root, p)) for p in paths}
    ops = make_ops(root, read_only=False)
    rng = np.random.default_rng(11)

    async def main(ops):
        for path in paths:
            model = models[path]
            itemsize = np.dtype(arrays[path]["dtype"]).itemsize
            entry = await resolve(ops, path)
            assert stat.S_ISREG(entry.st_mode) and entry.st_mode & stat.S_IWUSR
            assert not entry.st_mode & (stat.S_IWGRP | stat.S_IWOTH)  # umask 022
            info = await ops.open(entry.st_ino, os.O_RDWR, CTX)
            assert info.keep_cache
            size = len(model)
            ranges = [(0, size), (1, itemsize + 1), (size - itemsize - 1, itemsize + 1)]
            ranges += [
                (int(o), int(rng.integers(1, min(300, size - o) + 1)))
                for o in rng.integers(0, size, 6)
            ]
            for off, n in ranges:
                data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                assert await ops.write(info.fh, off, data) == n
                model[off : off + n] = data
                assert await read(ops, info.fh, off, n) == data
            assert await read_all(ops, info.fh, 999) == model
            after = await ops.getattr(entry.st_ino, CTX)
            assert after.st_mtime_ns > entry.st_mtime_ns  # README: mtime changes on write
            assert after.st_size == size
            await ops.flush(info.fh)
            await ops.fsync(info.fh, False)
            await ops.release(info.fh)
            # O_TRUNC is accepted and changes nothing (cp, dd)
            info = await ops.open(entry.st_ino, os.O_WRONLY | os.O_TRUNC, CTX)
            assert (await ops.getattr(entry.st_ino, CTX)).st_size == size
            await ops.release(info.fh)

    run(ops, main)
    for path in paths:
        assert oracle(root, path) == bytes(models[path]), path


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_rw_errnos(rw_copy, layout):
    root = rw_copy(layout)
    path = {"v2": "a", "v3": "deep/er/s"}[layout]
    spec = LAYOUTS[layout][1][path]
    expected = oracle(root, path)
    size = nbytes(spec)
    ops = make_ops(root, read_only=False)

    async def main(ops):
        entry = await resolve(ops, path)
        ino = entry.st_ino
        group = (await resolve(ops, path.rpartition("/")[0])).st_ino
        info = await ops.open(ino, os.O_RDWR, CTX)
        fh = info.fh
        # the size is fixed: EFBIG past the end, nothing written
        await expect(errno.EFBIG, ops.write(fh, size - 1, b"\1\2"))
        await expect(errno.EFBIG, ops.write(fh, size, b"\1"))
        await expect(errno.EFBIG, ops.write(fh, size * 4, b"\1" * 8))
        await expect(errno.EFBIG, ops.write(fh, 0, b"\1" * (size + 1)))
        assert await ops.write(fh, size, b"") == 0
        assert await read_all(ops, fh, 4096) == expected
        await expect(errno.EBADF, ops.write(9999, 0, b"\1"))
        # setattr: no-op truncations and times only
        got = await ops.setattr(ino, new_attr(0), fields(size=True), fh, CTX)
        assert got.st_size == size
        got = await ops.setattr(ino, new_attr(size), fields(size=True), None, CTX)
        assert got.st_size == size
        for bad in (1, size - 1, size + 1):
            await expect(
                errno.EINVAL, ops.setattr(ino, new_attr(bad), fields(size=True), None, CTX)
            )
        await expect(errno.EINVAL, ops.setattr(group, new_attr(0), fields(size=True), None, CTX))
        for change in ("mode", "uid", "gid"):
            await expect(
                errno.EPERM,
                ops.setattr(ino, new_attr(mode=0o600), fields(**{change: True}), None, CTX),
            )
            await expect(
                errno.EPERM,
                ops.setattr(group, new_attr(mode=0o700), fields(**{change: True}), None, CTX),
            )
        stamp = 1_234_567_890_123_456_789
        got = await ops.setattr(ino, new_attr(mtime_ns=stamp), fields(mtime=True), None, CTX)
        assert got.st_mtime_ns == stamp
        assert (await ops.getattr(ino, CTX)).st_mtime_ns == stamp
        await expect(errno.ENOTSUP, ops.setxattr(ino, b"user.x", b"1", CTX))
        await expect(errno.ENOTSUP, ops.removexattr(ino, b"user.zarr.dtype", CTX))
        await expect(errno.ENOTSUP, ops.setxattr(group, b"user.x", b"1", CTX))
        assert await ops.access(ino, os.W_OK, CTX) is True
        await expect(errno.EISDIR, ops.open(group, os.O_RDWR, CTX))
        assert await read_all(ops, fh, 4096) == expected
        await ops.release(fh)

    run(ops, main)
    assert oracle(root, path) == expected


def test_rw_store_failures_reach_flush_and_fsync(rw_copy, caplog):
    root = rw_copy("v3")
    expected = bytearray(oracle(root, "x"))
    ops = make_ops(root, read_only=False)
    store = ops.mount.store.store
    real_set = store.set

    def full(key, value):
        raise OSError(errno.ENOSPC, "No space left on device")

    def broken(key, value):
        raise RuntimeError("the store is broken")

    async def main(ops):
        ino = (await resolve(ops, "x")).st_ino
        fh = (await ops.open(ino, os.O_RDWR, CTX)).fh
        data = bytes(range(1, 41))
        expected[40:80] = data
        store.set = full
        assert await ops.write(fh, 40, data) == len(data)  # kept in memory
        await expect(errno.ENOSPC, ops.flush(fh))
        await expect(errno.ENOSPC, ops.fsync(fh, False))  # still dirty: tried again
        store.set = broken
        await expect(errno.EIO, ops.fsync(fh, True))
        assert await read_all(ops, fh, 4096) == expected  # nothing dropped
        store.set = real_set
        await ops.fsync(fh, False)
        await ops.flush(fh)
        await ops.release(fh)

    with caplog.at_level(logging.ERROR):
        run(ops, main)
    assert "x/c/0/0" in caplog.text  # a failed key is logged (row 1: chunks (0, *))
    assert oracle(root, "x") == bytes(expected)


def test_rw_write_under_pressure_reports_the_store_failure(rw_copy):
    """Above the dirty limit a write waits for write-backs; a failed one fails the write."""
    root = rw_copy("v3")
    expected = oracle(root, "x")
    chunk = 8 * 8 * np.dtype("<u2").itemsize
    ops = make_ops(root, read_only=False, cache_size=2 * chunk)  # dirty limit: one chunk
    store = ops.mount.store.store
    real_set = store.set

    def full(key, value):
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main(ops):
        fh = (await ops.open((await resolve(ops, "x")).st_ino, os.O_RDWR, CTX)).fh
        store.set = full
        # the first element of chunks (0, 0), (0, 1), (0, 2): three dirty chunks
        assert await ops.write(fh, 0, b"\1\1") == 2
        assert await ops.write(fh, 16, b"\2\2") == 2
        await expect(errno.ENOSPC, ops.write(fh, 32, b"\3\3"))
        store.set = real_set
        assert await ops.write(fh, 32, b"\3\3") == 2
        try:  # README: a failed store fails the next fsync, even once stored since
            await ops.fsync(fh, False)
        except pyfuse3.FUSEError as e:
            assert e.errno == errno.ENOSPC
        await ops.fsync(fh, False)  # reported once: now everything is stored
        await ops.release(fh)

    run(ops, main)
    model = bytearray(expected)
    model[0:2], model[16:18], model[32:34] = b"\1\1", b"\2\2", b"\3\3"
    assert oracle(root, "x") == bytes(model)


def test_rw_release_after_a_failed_store_does_not_fail(rw_copy, caplog):
    root = rw_copy("v2")
    ops = make_ops(root, read_only=False)
    store = ops.mount.store.store

    def full(key, value):
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main(ops):
        ino = (await resolve(ops, "grp/sub/b")).st_ino
        fh = (await ops.open(ino, os.O_RDWR, CTX)).fh
        assert await ops.write(fh, 0, b"\7" * 16) == 16
        store.set = full
        await ops.release(fh)  # the kernel ignores release's errno: it is only logged

    with caplog.at_level(logging.ERROR):
        run(ops, main)
    assert "dirty data kept after the last close" in caplog.text


# -- a corrupt chunk --------------------------------------------------------------------

# layout, array, chunk key, byte ranges of the file inside that chunk, ranges outside it
CORRUPT = {
    "v2": (
        "grp/sub/b",
        "grp/sub/b/1",
        [(64, 8), (64, 64), (100, 3), (0, 328)],
        [(0, 64), (128, 64), (192, 136), (60, 4)],
    ),
    # x: 20 columns of 2 bytes; chunk (0, 1) holds rows 0-7, columns 8-15
    "v3": (
        "x",
        "x/c/0/1",
        [(16, 16), (40 * 3 + 20, 2), (0, 40), (0, 1200)],
        [(0, 16), (32, 8), (40 * 8, 800), (40 * 7, 16)],
    ),
}


@pytest.mark.parametrize("cache_size", [0, 64 << 20])
@pytest.mark.parametrize("layout", sorted(CORRUPT))
def test_corrupt_chunk_fails_only_its_reads(rw_copy, layout, cache_size, caplog):
    root = rw_copy(layout)
    path, key, bad, good = CORRUPT[layout]
    expected = oracle(root, path)
    with open(os.path.join(root, key), "wb") as f:
        f.write(b"not a chunk of this array, garbage " * 3)
    ops = make_ops(root, cache_size=cache_size)

    async def main(ops):
        fh = (await ops.open((await resolve(ops, path)).st_ino, os.O_RDONLY, CTX)).fh
        for _ in range(2):  # a failed chunk fails again; the file and mount stay usable
            for off, n in bad:
                await expect(errno.EIO, ops.read(fh, off, n))
            for off, n in good:
                assert await read(ops, fh, off, n) == expected[off : off + n], (off, n)
        await ops.release(fh)
        assert (await ops.getattr(ROOT, CTX)).st_ino == ROOT

    with caplog.at_level(logging.ERROR):
        run(ops, main)
    assert key in caplog.text  # README: one log line naming the store key
    assert "internal error" not in caplog.text  # an FsError, not a bug caught by _guard


@pytest.mark.parametrize("cache_size", [0, 64 << 20])
def test_two_corrupt_chunks_in_one_read(rw_copy, cache_size, caplog):
    """A read over several bad chunks (loaded concurrently) is one EIO, not an error group."""
    root = rw_copy("v3")
    expected = oracle(root, "x")
    for key in ("x/c/0/0", "x/c/0/2"):
        with open(os.path.join(root, key), "wb") as f:
            f.write(b"garbage" * 5)
    ops = make_ops(root, cache_size=cache_size)

    async def main(ops):
        fh = (await ops.open((await resolve(ops, "x")).st_ino, os.O_RDONLY, CTX)).fh
        await expect(errno.EIO, ops.read(fh, 0, 40))  # row 0: chunks (0, 0), (0, 1), (0, 2)
        await expect(errno.EIO, ops.read(fh, 0, 1200))
        assert await read(ops, fh, 16, 16) == expected[16:32]  # chunk (0, 1) is sound
        await ops.release(fh)

    with caplog.at_level(logging.ERROR):
        run(ops, main)
    assert "internal error" not in caplog.text


def test_group_that_cannot_be_listed_is_eio(stores, monkeypatch):
    from zarrmount.store import StoreError

    ops = make_ops(stores["v2"])
    real_children = ops.fs.table.tree.dialect.children

    def denied(node):
        raise StoreError(f"{node.path or '/'}: permission denied")

    async def main(ops):
        grp = (await resolve(ops, "grp")).st_ino
        monkeypatch.setattr(ops.fs.table.tree.dialect, "children", denied)
        await expect(errno.EIO, ops.lookup(grp, b"sub", CTX))
        fh = await ops.opendir(grp, CTX)
        await expect(errno.EIO, ops.readdir(fh, 0, Token()))
        monkeypatch.setattr(ops.fs.table.tree.dialect, "children", real_children)
        token = Token()
        await ops.readdir(fh, 0, token)  # a failed listing is not kept: listed now
        assert sorted(n for n, _, _ in token.entries) == [b"c", b"none", b"sub"]
        await ops.releasedir(fh)

    run(ops, main)


def test_array_whose_codecs_fail_to_build_is_eio_on_open(stores, monkeypatch):
    import zarrmount.array as engine
    from zarrmount.codecs import CodecError

    ops = make_ops(stores["v2"])

    def fail(meta):
        raise CodecError("codec vanished")

    async def main(ops):
        ino = (await resolve(ops, "a")).st_ino
        monkeypatch.setattr(engine, "shared_pipeline", fail)
        await expect(errno.EIO, ops.open(ino, os.O_RDONLY, CTX))
        monkeypatch.undo()
        fh = (await ops.open(ino, os.O_RDONLY, CTX)).fh
        assert await read_all(ops, fh, 4096) == oracle(stores["v2"], "a")
        await ops.release(fh)

    run(ops, main)


# -- _guard: unexpected exceptions become EIO, never escape -----------------------------


async def _call_getattr(ops, ino, fh):
    return await ops.getattr(ino, CTX)


async def _call_lookup(ops, ino, fh):
    return await ops.lookup(ROOT, b"x", CTX)


async def _call_opendir(ops, ino, fh):
    return await ops.opendir(ROOT, CTX)


async def _call_readdir(ops, ino, fh):
    dfh = await ops.opendir(ROOT, CTX)
    return await ops.readdir(dfh, 0, Token())


async def _call_open(ops, ino, fh):
    return await ops.open(ino, os.O_RDONLY, CTX)


async def _call_read(ops, ino, fh):
    return await ops.read(fh, 0, 100)


async def _call_write(ops, ino, fh):
    return await ops.write(fh, 0, b"\1\2")


async def _call_flush(ops, ino, fh):
    return await ops.flush(fh)


async def _call_fsync(ops, ino, fh):
    return await ops.fsync(fh, False)


async def _call_release(ops, ino, fh):
    return await ops.release(fh)


async def _call_setattr(ops, ino, fh):
    return await ops.setattr(ino, new_attr(0), fields(size=True), None, CTX)


async def _call_getxattr(ops, ino, fh):
    return await ops.getxattr(ino, b"user.zarr.dtype", CTX)


async def _call_listxattr(ops, ino, fh):
    return await ops.listxattr(ino, CTX)


async def _call_access(ops, ino, fh):
    return await ops.access(ino, os.R_OK, CTX)


async def _call_statfs(ops, ino, fh):
    return await ops.statfs(CTX)


# handler -> Filesystem method it calls, and whether that method is a coroutine
GUARDED = {
    "getattr": (_call_getattr, "getattr", False),
    "lookup": (_call_lookup, "lookup", True),
    "opendir": (_call_opendir, "getattr", False),
    "readdir": (_call_readdir, "readdir", True),
    "open": (_call_open, "open", False),
    "read": (_call_read, "read", True),
    "write": (_call_write, "write", True),
    "flush": (_call_flush, "flush", True),
    "fsync": (_call_fsync, "fsync", True),
    "release": (_call_release, "release", True),
    "setattr": (_call_setattr, "setattr", False),
    "getxattr": (_call_getxattr, "getxattr", False),
    "listxattr": (_call_listxattr, "listxattr", False),
    "access": (_call_access, "getattr", False),
    "statfs": (_call_statfs, "statfs", False),
}


def _raiser(error: BaseException, is_async: bool):
    def boom(*args, **kwargs):
        raise error

    async def aboom(*args, **kwargs):
        await trio.lowlevel.checkpoint()
        raise error

    return aboom if is_async else boom


@pytest.mark.parametrize("handler", sorted(GUARDED))
def test_guard_maps_unexpected_exceptions_to_eio(rw_copy, caplog, handler):
    call, method, is_async = GUARDED[handler]
    ops = make_ops(rw_copy("v3"), read_only=False)

    async def main(ops):
        ino = (await resolve(ops, "x")).st_ino
        fh = (await ops.open(ino, os.O_RDWR, CTX)).fh
        await call(ops, ino, fh)  # works before
        if handler == "release":
            fh = (await ops.open(ino, os.O_RDWR, CTX)).fh
        cases = [
            (RuntimeError("boom"), errno.EIO),
            (KeyError("boom"), errno.EIO),
            (OSError(errno.ENOSPC, "boom"), errno.EIO),  # only FsError carries an errno
            (FsError(errno.ESTALE, "boom"), errno.ESTALE),
            (pyfuse3.FUSEError(errno.EAGAIN), errno.EAGAIN),
        ]
        for error, code in cases:
            setattr(ops.fs, method, _raiser(error, is_async))  # shadows the method
            caplog.clear()
            try:
                await expect(code, call(ops, ino, fh))
            finally:
                delattr(ops.fs, method)
            logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
            if code == errno.EIO:
                assert any(
                    f"internal error in {handler}" in r.getMessage() and r.exc_info for r in logged
                )
            else:
                assert not logged
        await call(ops, ino, fh)  # and again after: nothing was left broken

    with caplog.at_level(logging.ERROR):
        run(ops, main)
