"""Kerchunk reference sets (JSON, or parquet: ``refs.json``, ``refs.parq/``,
``reference://`` with ``-o so.fo=``): each key is inline data or a byte range of a target
file, read in place.

A reference set is data, and data may point anywhere: each target is read only when it
lies below an authorized prefix (``-o virtual_prefix=``; by default the directory holding
the reference set), a local one after its symbolic links are resolved. A target shorter
than its reference (the file changed) fails the read; nothing is read from elsewhere.
"""

from __future__ import annotations

import base64
import logging
import os
import posixpath
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import fsspec

from zarrmount.store.base import Store, StoreError, key_parts, public_url

log = logging.getLogger(__name__)

PARQUET_SUFFIXES = (".parq", ".parquet")
# the reference filesystem's own options; the others are the target's (remote_options)
_OWN = ("fo", "target_protocol", "target_options", "remote_protocol", "remote_options")


def as_url(where: str) -> str:
    """A target or prefix as a URL: a local path as ``file://`` with symbolic links and
    ``..`` resolved (what the kernel would open); others with ``..`` resolved."""
    parts = urlsplit(where)
    if parts.scheme in ("", "file"):
        return "file://" + os.path.realpath(parts.path if parts.scheme else where)
    path = posixpath.normpath(parts.path) if parts.path else ""
    return f"{parts.scheme}://{parts.netloc}{path}"


def authorized(url: str, prefixes: Iterable[str]) -> bool:
    """``url`` lies below one of ``prefixes`` (each a directory, whole components)."""
    return any(url == p or url.startswith(p.rstrip("/") + "/") for p in prefixes)


def is_parquet_set(path: str) -> bool:
    """A directory of parquet references (kerchunk's layout: a ``.zmetadata`` naming the
    record size), by name or by that document."""
    if path.endswith(PARQUET_SUFFIXES):
        return True
    try:
        with open(os.path.join(path, ".zmetadata"), "rb") as f:
            return b'"record_size"' in f.read(1 << 20)
    except OSError:
        return False


class ReferencesStore(Store):
    """Keys of a reference set; values inline or read from the targets' byte ranges."""

    remote = True  # targets may be remote: every read gets a deadline
    lists_chunks = False  # listing chunk keys would walk the whole set: never needed
    read_only_reason = "reference sets are read-only"

    def __init__(
        self,
        fo: str,
        options: Mapping[str, Any],
        prefixes: Iterable[str] = (),
        deadline_s: float = 30.0,
    ) -> None:
        self.url = public_url(fo)
        self.deadline_s = deadline_s
        own = {k: v for k, v in options.items() if k in _OWN and k != "fo"}
        # targets are read by our own filesystems (_target): fsspec need not guess their
        # protocol, for which it reads every reference (and trips on parquet sets' groups)
        own.setdefault("remote_protocol", "file")
        self._target_options = dict(own.get("remote_options") or {})
        home = posixpath.dirname(fo.rstrip("/"))  # where the set (a file, a directory) is
        self.prefixes = [as_url(p) for p in (*prefixes, home or ".")]
        try:
            self.refs = fsspec.filesystem("reference", fo=fo, **own)
        except Exception as e:  # unreadable or malformed: fsspec says which
            raise StoreError(f"{public_url(fo)}: {type(e).__name__}: {e}") from None
        self._targets: dict[str, fsspec.AbstractFileSystem] = {}
        self._lock = threading.Lock()  # the targets made so far; parquet pages read

    def _reference(self, key: str) -> Any:
        try:
            with self._lock:
                return self.refs.references[key]
        except (KeyError, FileNotFoundError):
            return None

    def _target(self, url: str) -> fsspec.AbstractFileSystem:
        """The filesystem of ``url``'s protocol, made once."""
        protocol = urlsplit(url).scheme or "file"
        with self._lock:
            fs = self._targets.get(protocol)
            if fs is None:
                options = {} if protocol == "file" else self._target_options
                fs = self._targets[protocol] = fsspec.filesystem(protocol, **options)
        return fs

    def _read(self, key: str, ref: Any, start: int, length: int | None) -> bytes:
        """``length`` bytes (None: to the end) from ``start`` of the referenced value."""
        url = as_url(ref[0])
        if not authorized(url, self.prefixes):
            raise StoreError(
                f"{key}: its reference to {public_url(url)} lies outside the authorized "
                f"prefixes ({', '.join(public_url(p) for p in self.prefixes)}; "
                "-o virtual_prefix= adds one)"
            )
        offset, size = (int(ref[1]), int(ref[2])) if len(ref) == 3 else (0, None)
        end = None if size is None else offset + size
        if length is not None:
            end = offset + start + length if end is None else min(end, offset + start + length)
        fs = self._target(url)

        def attempt(_left: float) -> bytes:
            return fs.cat_file(url, start=offset + start, end=end)

        try:
            data = self.retrying(attempt, key, self.deadline_s)
        except FileNotFoundError:
            raise StoreError(f"{key}: its target {public_url(url)} is missing") from None
        except Exception as e:
            raise StoreError(f"{key}: {public_url(url)}: {type(e).__name__}: {e}") from e
        if end is not None and len(data) != end - offset - start:
            raise StoreError(
                f"{key}: {public_url(url)} holds {len(data)} of the {end - offset - start} "
                f"bytes referenced at {offset + start} (the file changed)"
            )
        return data

    def _value(self, key: str, start: int, length: int | None) -> bytes | None:
        ref = self._reference("/".join(key_parts(key)))
        if ref is None:
            return None
        if isinstance(ref, str | bytes):  # inline
            data = ref.encode() if isinstance(ref, str) else ref
            if data.startswith(b"base64:"):
                data = base64.b64decode(data[7:])
            return data[start : None if length is None else start + length]
        return self._read(key, ref, start, length)

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        return self._value(key, 0, None)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        if start < 0:
            whole = self._value(key, 0, None)
            return None if whole is None else whole[start:][:length]
        return self._value(key, start, length)

    def set(self, key: str, value: bytes) -> None:
        raise StoreError(f"{key}: {self.read_only_reason}")

    def delete(self, key: str) -> None:
        raise StoreError(f"{key}: {self.read_only_reason}")

    def origins(self, prefix: str) -> list[str]:
        """The files the references directly below ``prefix`` point into."""
        try:
            with self._lock:
                names = self.refs.ls("/".join(key_parts(prefix)), detail=False)
        except (FileNotFoundError, KeyError):  # nothing there, or a set fsspec cannot list
            return []
        refs = (self._reference(name.rstrip("/")) for name in names)
        return sorted({public_url(as_url(ref[0])) for ref in refs if isinstance(ref, list)})

    def list_dir(self, prefix: str) -> list[str]:
        self.list_calls += 1
        path = "/".join(key_parts(prefix))
        try:
            with self._lock:
                found = self.refs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return sorted({name.rstrip("/").rsplit("/", 1)[-1] for name in found} - {""})
