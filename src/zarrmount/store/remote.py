"""Any fsspec URL as a store (zip, S3, GCS, HTTP, memory, ...)."""

from __future__ import annotations

import fsspec

from zarrmount.store.base import Store, StoreError

_MISSING = (FileNotFoundError, KeyError)


class FsspecStore(Store):
    """Keys are paths below the URL's root in an fsspec filesystem."""

    def __init__(self, url: str, **storage_options: object) -> None:
        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url, **storage_options)
        self.root = root.rstrip("/")

    def _path(self, key: str) -> str:
        key = key.strip("/")
        if not key:
            return self.root
        return f"{self.root}/{key}" if self.root else key

    def get(self, key: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._path(key))
        except _MISSING:
            return None
        except IsADirectoryError:
            return None
        except Exception as e:
            raise StoreError(f"{key}: {e}") from e

    def get_range(self, key: str, start: int, length: int) -> bytes | None:
        path = self._path(key)
        try:
            if start < 0:
                size = self.fs.size(path)
                start = max(size + start, 0)
            return self.fs.cat_file(path, start=start, end=start + length)
        except _MISSING:
            return None
        except Exception as e:
            raise StoreError(f"{key}: {e}") from e

    def set(self, key: str, value: bytes) -> None:
        try:
            self.fs.pipe_file(self._path(key), value)
        except Exception as e:
            raise StoreError(f"{key}: {e}") from e

    def delete(self, key: str) -> None:
        try:
            self.fs.rm_file(self._path(key))
        except _MISSING:
            pass
        except Exception as e:
            raise StoreError(f"{key}: {e}") from e

    def list_dir(self, prefix: str) -> list[str]:
        path = self._path(prefix)
        try:
            entries = self.fs.ls(path, detail=False)
        except _MISSING:
            return []
        except Exception as e:
            raise StoreError(f"{prefix or '/'}: {e}") from e
        base = path.rstrip("/")
        names = set()
        for entry in entries:
            entry = entry.rstrip("/")
            name = entry[len(base) + 1 :] if base and entry.startswith(base + "/") else entry
            name = name.rsplit("/", 1)[-1]
            if name:
                names.add(name)
        return sorted(names)
