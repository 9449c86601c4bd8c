"""The FUSE ceiling for scripts/bench: a trivial pyfuse3 file served from memory.

One read-only file, ``file``, of the given size, whose every MiB is the same 1 MiB of
random bytes, answered with a view of one buffer: no decoding, no copy, no allocation.
It runs with the same FUSE options and page-cache policy (keep_cache) as zarrmount, so the
bench can hold the mount's figures against what FUSE and this machine allow at all.

Usage: python _bench_triv.py MOUNTPOINT SIZE_BYTES   (foreground; SIGTERM or unmount ends it)
"""

from __future__ import annotations

import errno
import os
import stat
import sys

import pyfuse3
import trio

BLOCK = 1 << 20
NAME = b"file"


class Ceiling(pyfuse3.Operations):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        # twice the pattern, so a read of up to BLOCK bytes from any offset is one slice
        self.block = memoryview(bytearray(os.urandom(BLOCK)) * 2)

    async def getattr(self, inode, ctx=None):
        e = pyfuse3.EntryAttributes()
        e.st_ino = inode
        e.attr_timeout = e.entry_timeout = 3600.0
        if inode == pyfuse3.ROOT_INODE:
            e.st_mode = stat.S_IFDIR | 0o755
        else:
            e.st_mode = stat.S_IFREG | 0o444
            e.st_size = self.size
        return e

    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode == pyfuse3.ROOT_INODE and name == NAME:
            return await self.getattr(pyfuse3.ROOT_INODE + 1)
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def open(self, inode, flags, ctx):
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(self, fh, off, size):
        start = off % BLOCK
        return self.block[start : start + max(0, min(size, self.size - off, BLOCK))]


def main() -> None:
    mountpoint, size = sys.argv[1], int(sys.argv[2])
    # zarrmount's own options for a read-only mount (zarrmount.fuse.session)
    options = {"fsname=bench-ceiling", "subtype=bench", "default_permissions", "ro"}
    pyfuse3.init(Ceiling(size), mountpoint, options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


if __name__ == "__main__":
    main()
