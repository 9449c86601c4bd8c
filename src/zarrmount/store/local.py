"""A local directory as a store: plain ``os`` calls, the fast path."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterable

from zarrmount.store.base import Store, StoreError, T


class LocalStore(Store):
    """Keys map to files below ``root``; missing files read as ``None``.

    Local calls have no deadline: ``deadline_s`` is accepted and ignored.
    """

    reads_parts = True

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.url = self.root

    def _path(self, key: str) -> str:
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise StoreError(f"invalid key {key!r}")
        return os.path.join(self.root, *parts)

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise StoreError(f"{key}: {e.strerror}") from e

    def read_into(self, key: str, buffer_for: Callable[[int], bytearray]) -> memoryview | None:
        try:
            with open(self._path(key), "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                view = memoryview(buffer_for(size))[:size]
                got = 0
                while got < size:
                    n = f.readinto(view[got:])
                    if not n:
                        break
                    got += n
                return view[:got]
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise StoreError(f"{key}: {e.strerror}") from e

    def read_ranges(
        self, key: str, use: Callable[[int, Callable[[int, int], bytes]], T]
    ) -> T | None:
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise StoreError(f"{key}: {e.strerror}") from e
        try:
            return use(os.fstat(fd).st_size, lambda offset, length: os.pread(fd, length, offset))
        except OSError as e:
            raise StoreError(f"{key}: {e.strerror}") from e
        finally:
            os.close(fd)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                if start < 0:
                    f.seek(start, os.SEEK_END)
                else:
                    f.seek(start)
                return f.read(length)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise StoreError(f"{key}: {e.strerror}") from e

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".zarrmount-tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(value)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def sync(self, keys: Iterable[str]) -> None:
        """fsync each key's file, then its directory and every one above it up to the
        root: they hold the rename that put the file in place (or the unlink that removed
        it) and the directories made for it."""
        directories: set[str] = set()
        for key in keys:
            path = self._path(key)
            with contextlib.suppress(FileNotFoundError):  # deleted: its directory says so
                _fsync(path, key)
            directory = os.path.dirname(path)
            while directory.startswith(self.root) and directory not in directories:
                directories.add(directory)
                directory = os.path.dirname(directory)
        for directory in sorted(directories, key=len, reverse=True):
            with contextlib.suppress(FileNotFoundError):  # a delete of a key never stored
                _fsync(directory, os.path.relpath(directory, self.root) + "/")

    def list_dir(self, prefix: str) -> list[str]:
        self.list_calls += 1
        try:
            return sorted(os.listdir(self._path(prefix)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            if e.errno == errno.EACCES:
                raise StoreError(f"{prefix or '/'}: permission denied") from e
            raise StoreError(f"{prefix or '/'}: {e.strerror}") from e


def _fsync(path: str, name: str) -> None:
    """fsync ``path``: FileNotFoundError if it is missing, StoreError for other failures."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise StoreError(f"{name}: fsync failed: {e.strerror}") from e
