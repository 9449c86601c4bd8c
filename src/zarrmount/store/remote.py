"""Any fsspec URL as a store (zip, S3, GCS, HTTP, memory, ...), with retries."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import fsspec
import fsspec.asyn
from fsspec.exceptions import FSTimeoutError

from zarrmount.store.base import Store, StoreError, key_parts, public_url
from zarrmount.store.lease import WriterLease, take_lease

_MISSING = (FileNotFoundError, KeyError, IsADirectoryError)


def _protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


def _is_http(fs: fsspec.AbstractFileSystem) -> bool:
    """HTTP has no listing of keys (an HTML page's links at best)."""
    return bool(_protocols(fs) & {"http", "https"})


def _whole_get(fs: fsspec.AbstractFileSystem) -> dict[str, Any]:
    """What ``cat_file`` of a whole object needs to be one GET: s3fs first asks the size
    (a HEAD, and a listing when it is missing) to fetch a large object in ranges at once."""
    return {"max_concurrency": 1} if "s3" in _protocols(fs) else {}


def _suffix_ranges(fs: fsspec.AbstractFileSystem) -> bool:
    """``cat_file`` with a negative start and no end asks for the object's last bytes in
    one request (S3, GCS, HTTP: ``Range: bytes=-N``; files seek from their end)."""
    return not getattr(fs, "async_impl", False) or bool(
        _protocols(fs) & {"s3", "gs", "gcs", "http", "https"}
    )


def _pooled(url: str, options: dict[str, Any], connections: int) -> dict[str, Any]:
    """``options`` with S3's connection pool as large as our requests at once: botocore
    keeps 10 connections, and an 11th request waits for one, so no more than 10 round
    trips overlapped whatever ``max_fetches`` said (a pool the user sized stands)."""
    if fsspec.core.split_protocol(url)[0] not in ("s3", "s3a"):
        return options
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("max_pool_connections", connections)
    return {**options, "config_kwargs": config}


def _read_only_reason(fs: fsspec.AbstractFileSystem) -> str | None:
    """Why zarrmount can never store chunks in ``fs``, if it cannot."""
    protocols = _protocols(fs)
    if _is_http(fs):
        return "HTTP sources are read-only"
    if "zip" in protocols and getattr(fs, "mode", "r") == "r":
        return "zip files are opened read-only"
    return None


class FsspecStore(Store):
    """Keys are paths below the URL's root in an fsspec filesystem."""

    remote = True
    concurrency = 64  # requests wait on the network, not on the CPU

    def __init__(self, url: str, deadline_s: float = 30.0, **storage_options: Any) -> None:
        self.url = public_url(url)
        self.deadline_s = deadline_s
        options = _pooled(url, storage_options, self.concurrency)
        self.fs, root = fsspec.core.url_to_fs(url, **options)
        self.root = root.rstrip("/")
        self.read_only_reason = _read_only_reason(self.fs)
        self.lists_chunks = self.lists_deep = not _is_http(self.fs)
        self._whole = _whole_get(self.fs)
        self._suffixes = _suffix_ranges(self.fs)
        # One call at a time into a zip file: from Python 3.13 on, reads of one ZipFile
        # from several threads race on its file position and return wrong bytes.
        zipped = "zip" in _protocols(self.fs)
        self._serial = threading.Lock() if zipped else contextlib.nullcontext()

    def _path(self, key: str) -> str:
        key = "/".join(key_parts(key))
        if not key:
            return self.root
        return f"{self.root}/{key}" if self.root else key

    def _call(self, what: str, method: str, *args, deadline_s: float | None = None, **kwargs):
        """``fs.<method>(*args, **kwargs)`` with retries, within the deadline.

        Async filesystems (S3, GCS, HTTP, ...) get the time left as the timeout of each
        try: a stalled request is cancelled there, not left to the backend's own timeouts
        (s3fs: 15 s a try), so no caller, the mount command included, waits past it.
        """
        deadline = self.deadline_s if deadline_s is None else deadline_s

        def attempt(left: float):
            with self._serial:
                if not getattr(self.fs, "async_impl", False):
                    return getattr(self.fs, method)(*args, **kwargs)
                coroutine = getattr(self.fs, f"_{method}")
                # fsspec treats a timeout of 0 as none at all
                return fsspec.asyn.sync(
                    self.fs.loop, coroutine, *args, timeout=max(left, 1e-3), **kwargs
                )

        try:
            return self.retrying(attempt, what, deadline)
        except _MISSING:
            return None
        except StoreError:
            raise  # typed already (Unreachable)
        except FSTimeoutError:
            raise StoreError(f"{what}: no answer from {self.url} within {deadline:g} s") from None
        except Exception as e:
            raise StoreError(f"{what}: {type(e).__name__}: {e}") from e

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        return self._call(key, "cat_file", self._path(key), deadline_s=deadline_s, **self._whole)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        path = self._path(key)
        if start < 0 and start + length >= 0 and self._suffixes:  # the last bytes
            return self._call(key, "cat_file", path, start=start, deadline_s=deadline_s)
        if start < 0:
            size = self._call(key, "size", path, deadline_s=deadline_s)
            if size is None:
                return None
            start = max(size + start, 0)
        return self._call(
            key, "cat_file", path, start=start, end=start + length, deadline_s=deadline_s
        )

    def set(self, key: str, value: bytes) -> None:
        self._call(key, "pipe_file", self._path(key), value)

    def delete(self, key: str) -> None:
        self._call(key, "rm_file", self._path(key))

    def lock_writer(self, holder: str) -> WriterLease | None:
        """A renewed lease object at the root (see store/lease.py): object stores have no
        flock. None where writes can never succeed anyway."""
        if self.read_only_reason:
            return None
        return take_lease(self, holder)

    def root_exists(self) -> bool:
        return bool(self._call("/", "exists", self._path("")))

    def forget_listings(self) -> None:
        self.fs.invalidate_cache()  # fsspec keeps directory listings

    def list_dir(self, prefix: str) -> list[str]:
        return sorted(self._listing(prefix, detail=False))

    def list_validated(self, prefix: str) -> dict[str, str]:
        """Asked to see changes: never from fsspec's cache of listings."""
        self.fs.invalidate_cache(self._path(prefix))
        return self._listing(prefix, detail=True)

    def validator(self, key: str) -> str | None:
        """One HEAD request (never fsspec's cached listings)."""
        path = self._path(key)
        self.fs.invalidate_cache(path)
        info = self._call(key, "info", path)
        return None if info is None else _validator(info)

    def list_tree(self, prefix: str) -> dict[str, str]:
        """One listing of every key below ``prefix`` (object stores list without
        delimiters: a request per thousand keys, whatever their depth)."""
        self.list_calls += 1
        path = self._path(prefix).rstrip("/")
        self.fs.invalidate_cache(path)
        found = self._call(prefix or "/", "find", path, detail=True) or {}
        start = len(path) + 1 if path else 0
        return {name[start:]: _validator(info) for name, info in found.items()}

    def _listing(self, prefix: str, detail: bool) -> dict[str, str]:
        """Names directly below ``prefix``, with validators when ``detail`` (one request:
        the listing's own details)."""
        self.list_calls += 1
        path = self._path(prefix)
        entries = self._call(prefix or "/", "ls", path, detail=detail) or []
        base = path.rstrip("/")
        names: dict[str, str] = {}
        for entry in entries:
            full = (entry["name"] if detail else entry).rstrip("/")
            name = full[len(base) + 1 :] if base and full.startswith(base + "/") else full
            name = name.rsplit("/", 1)[-1]
            if name:
                names[name] = _validator(entry) if detail else ""
        return names


# What tells one version of an object from another, by backend: S3's ETag, GCS's
# generation, Azure's etag, a local or memory file's mtime; the size joins each.
_VALIDATORS = ("ETag", "etag", "generation", "version_id", "mtime", "LastModified", "created")


def _validator(info: dict[str, Any]) -> str:
    if info.get("type") == "directory":
        return ""
    found = next((info[k] for k in _VALIDATORS if info.get(k) is not None), "")
    return f"{found}:{info.get('size', '')}"
