"""The filesystem's requests, shaped like FUSE's, testable without a mount."""

from zarrmount.errors import FsError
from zarrmount.vfs.fs import Attr, Filesystem

__all__ = ["Attr", "FsError", "Filesystem"]
