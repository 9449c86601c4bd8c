"""pyfuse3 operations over :class:`Filesystem`: type conversion and errno mapping only.

Only ``FUSEError`` may leave a pyfuse3 handler (anything else ends the main loop and
the mount with it), so every handler turns unexpected exceptions into EIO and a log line.
"""

from __future__ import annotations

import errno
import functools
import logging
import os

import numpy as np
import pyfuse3
import trio

from zarrmount.memory import aligned_empty
from zarrmount.store import deadline
from zarrmount.vfs import Attr, Filesystem, FsError

log = logging.getLogger(__name__)


def _guard(fn, bounded: bool = True):
    """Count the request; map :class:`FsError` to its errno and any other exception to EIO.
    A ``bounded`` request shares one deadline among all it waits for from the store."""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        ops = args[0]  # the Operations
        ops.fs.requests[fn.__name__] += 1
        try:
            with deadline.request(ops.deadline_s if bounded else None):
                return await fn(*args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except FsError as e:
            raise pyfuse3.FUSEError(e.errno) from None
        except Exception:
            log.exception("internal error in %s", fn.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper


# Writes and what stores them (flush, fsync, release) wait for every dirty chunk they
# store, each within its own deadline: on a slow link that may rightly take longer than
# one deadline in all, and an unreachable store fails them at once anyway.
_storing = functools.partial(_guard, bounded=False)


def _refusing(name: str, otherwise: int):
    """A handler for a request that changes metadata: EROFS on read-only mounts, else
    ``otherwise``."""

    async def refuse(self, *args):
        self._refuse(otherwise)

    refuse.__name__ = refuse.__qualname__ = name
    return _guard(refuse)


def _entry(attr: Attr) -> pyfuse3.EntryAttributes:
    e = pyfuse3.EntryAttributes()
    e.st_ino = attr.ino
    e.generation = 0
    e.entry_timeout, e.attr_timeout = attr.entry_timeout, attr.attr_timeout
    e.st_mode = attr.mode
    e.st_nlink = attr.nlink
    e.st_uid = attr.uid
    e.st_gid = attr.gid
    e.st_size = attr.size
    e.st_blksize = attr.blksize
    e.st_blocks = attr.blocks
    e.st_atime_ns = e.st_mtime_ns = e.st_ctime_ns = attr.mtime_ns
    return e


def _name(raw: bytes) -> str:
    return os.fsdecode(raw)


class ReplyBuffers:
    """Reply buffers used again from request to request.

    pyfuse3 sends a read's reply as soon as the handler returns, before any other task
    runs; so once another read starts, every buffer returned before it has been sent.
    """

    SIZE = (1 << 20) + (1 << 16)  # the largest FUSE read, plus room for element rounding

    def __init__(self) -> None:
        # one made at start: a first read does not wait for fresh memory
        self._free: list[np.ndarray] = [aligned_empty(self.SIZE)]
        self._sent: list[np.ndarray] = []

    def take(self) -> np.ndarray:
        self._free.extend(self._sent)
        self._sent.clear()
        return self._free.pop() if self._free else aligned_empty(self.SIZE)

    def sent(self, buffer: np.ndarray) -> None:
        self._sent.append(buffer)


class Operations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, fs: Filesystem, deadline_s: float | None = None) -> None:
        super().__init__()
        self.fs = fs
        self.deadline_s = deadline_s  # of each request's waits on a remote store, in all
        # Directory handle -> [inode, entries listed by the first readdir (None until then)].
        self._dir_handles: dict[int, list] = {}
        self._next_dir_fh = 1
        self.initialized = trio.Event()
        self._replies = ReplyBuffers()

    def init(self) -> None:
        """The kernel's INIT request arrived: the mount now answers requests."""
        self.initialized.set()

    @_guard
    async def lookup(self, parent_inode, name, ctx=None):
        return _entry(await self.fs.lookup(parent_inode, _name(name)))

    @_guard
    async def getattr(self, inode, ctx=None):
        return _entry(await self.fs.fresh_attr(inode))

    @_guard
    async def forget(self, inode_list):
        """Nodes a reload retired go with the kernel's last lookup of them."""
        self.fs.forget(inode_list)

    @_guard
    async def opendir(self, inode, ctx):
        if not self.fs.getattr(inode).mode & 0o040000:
            raise FsError(errno.ENOTDIR)
        fh = self._next_dir_fh
        self._next_dir_fh += 1
        self._dir_handles[fh] = [inode, None]
        return fh

    @_guard
    async def readdir(self, fh, start_id, token):
        handle = self._dir_handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        if handle[1] is None:
            handle[1] = await self.fs.readdir(handle[0])
        entries = handle[1]
        for i in range(start_id, len(entries)):
            name, attr = entries[i]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), _entry(attr), i + 1):
                break
            self.fs.listed(attr.ino)  # the kernel holds one more lookup of it

    @_guard
    async def releasedir(self, fh):
        self._dir_handles.pop(fh, None)

    @_guard
    async def open(self, inode, flags, ctx):
        fh = self.fs.open(inode, flags)
        if self.fs.direct_io(fh):
            return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    @_guard
    async def read(self, fh, off, size):
        buffer = self._replies.take()
        try:
            return await self.fs.read(fh, off, size, buffer)
        finally:
            self._replies.sent(buffer)  # from here on pyfuse3 replies without yielding

    @_storing
    async def write(self, fh, off, buf):
        return await self.fs.write(fh, off, buf)

    @_storing
    async def flush(self, fh):
        await self.fs.flush(fh)

    @_storing
    async def fsync(self, fh, datasync):
        await self.fs.fsync(fh)

    @_storing
    async def release(self, fh):
        await self.fs.release(fh)

    @_guard
    async def setattr(self, inode, attr, fields, fh, ctx):
        size = attr.st_size if fields.update_size else None
        mtime = attr.st_mtime_ns if fields.update_mtime else None
        other = fields.update_mode or fields.update_uid or fields.update_gid
        return _entry(self.fs.setattr(inode, size, mtime, other))

    @_guard
    async def getxattr(self, inode, name, ctx):
        return self.fs.getxattr(inode, os.fsdecode(name), ctx.uid)

    @_guard
    async def listxattr(self, inode, ctx):
        return [os.fsencode(n) for n in self.fs.listxattr(inode)]

    def _refuse(self, otherwise: int) -> None:
        raise FsError(errno.EROFS if self.fs.options.read_only else otherwise)

    # Extended attributes are the metadata's: none is set or removed through the mount,
    # but for the mount root's controls (the faults of a mount that tries them).
    @_guard
    async def setxattr(self, inode, name, value, ctx):
        if not self.fs.control(inode, os.fsdecode(name), bytes(value), ctx.uid):
            self._refuse(errno.ENOTSUP)

    removexattr = _refusing("removexattr", errno.ENOTSUP)
    # The tree is the hierarchy's metadata: no file or directory is made, removed or
    # renamed through the mount (EROFS on read-only mounts, EPERM on rw ones).
    create = _refusing("create", errno.EPERM)
    mknod = _refusing("mknod", errno.EPERM)
    mkdir = _refusing("mkdir", errno.EPERM)
    unlink = _refusing("unlink", errno.EPERM)
    rmdir = _refusing("rmdir", errno.EPERM)
    rename = _refusing("rename", errno.EPERM)
    symlink = _refusing("symlink", errno.EPERM)
    link = _refusing("link", errno.EPERM)

    @_guard
    async def access(self, inode, mode, ctx):
        self.fs.getattr(inode)
        if mode & os.W_OK and self.fs.options.read_only:
            raise FsError(errno.EROFS)
        return True

    @_guard
    async def statfs(self, ctx):
        info = self.fs.statfs()
        s = pyfuse3.StatvfsData()
        s.f_bsize = info["bsize"]
        s.f_frsize = info["frsize"]
        s.f_blocks = info["blocks"]
        s.f_bfree = s.f_bavail = 0
        s.f_files = info["files"]
        s.f_ffree = s.f_favail = 0
        s.f_namemax = info["namemax"]
        return s
