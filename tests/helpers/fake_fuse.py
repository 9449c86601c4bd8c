"""A hostile FUSE filesystem for tests: ``python fake_fuse.py MOUNTPOINT PID`` mounts an
empty root whose ``user.zarrmount.pid`` attribute names PID, as if it were our daemon."""

from __future__ import annotations

import errno
import stat
import sys

import pyfuse3
import trio


class Liar(pyfuse3.Operations):
    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid

    async def getattr(self, inode, ctx=None):
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.st_mode = stat.S_IFDIR | 0o755
        return entry

    async def getxattr(self, inode, name, ctx):
        if name == b"user.zarrmount.pid":
            return str(self.pid).encode()
        raise pyfuse3.FUSEError(errno.ENODATA)

    async def opendir(self, inode, ctx):
        return inode

    async def readdir(self, fh, start_id, token):
        return


def main() -> None:
    mountpoint, pid = sys.argv[1], int(sys.argv[2])
    pyfuse3.init(Liar(pid), mountpoint, {"fsname=zarrmount", "subtype=zarrmount"})
    print("mounted", flush=True)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
