"""Any fsspec URL as a store (zip, S3, GCS, HTTP, memory, ...), with retries."""

from __future__ import annotations

from typing import Any

import fsspec

from zarrmount.store.base import Store, StoreError
from zarrmount.store.retry import with_retries

_MISSING = (FileNotFoundError, KeyError, IsADirectoryError)


class FsspecStore(Store):
    """Keys are paths below the URL's root in an fsspec filesystem."""

    remote = True

    def __init__(self, url: str, deadline_s: float = 30.0, **storage_options: Any) -> None:
        self.url = url
        self.deadline_s = deadline_s
        self.fs, root = fsspec.core.url_to_fs(url, **storage_options)
        self.root = root.rstrip("/")

    def _path(self, key: str) -> str:
        key = key.strip("/")
        if not key:
            return self.root
        return f"{self.root}/{key}" if self.root else key

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return with_retries(lambda: fn(*args, **kwargs), what, self.deadline_s)
        except _MISSING:
            return None
        except Exception as e:
            raise StoreError(f"{what}: {type(e).__name__}: {e}") from e

    def get(self, key: str) -> bytes | None:
        return self._call(key, self.fs.cat_file, self._path(key))

    def get_range(self, key: str, start: int, length: int) -> bytes | None:
        path = self._path(key)
        if start < 0:
            size = self._call(key, self.fs.size, path)
            if size is None:
                return None
            start = max(size + start, 0)
        return self._call(key, self.fs.cat_file, path, start=start, end=start + length)

    def set(self, key: str, value: bytes) -> None:
        self._call(key, self.fs.pipe_file, self._path(key), value)

    def delete(self, key: str) -> None:
        self._call(key, self.fs.rm_file, self._path(key))

    def list_dir(self, prefix: str) -> list[str]:
        self.list_calls += 1
        path = self._path(prefix)
        entries = self._call(prefix or "/", self.fs.ls, path, detail=False) or []
        base = path.rstrip("/")
        names = set()
        for entry in entries:
            entry = entry.rstrip("/")
            name = entry[len(base) + 1 :] if base and entry.startswith(base + "/") else entry
            name = name.rsplit("/", 1)[-1]
            if name:
                names.add(name)
        return sorted(names)
