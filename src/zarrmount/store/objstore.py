"""S3, GCS, Azure and HTTP through obstore (``-o client=obstore``): read-only.

obstore's requests run in its own native threads without the GIL, so a mount's decoding
and FUSE replies no longer queue behind the Python HTTP stack of fsspec's backends: on
two cores that stack alone costs about as much CPU as all the rest of a cold read.

Its own retries are off: ``store/retry.py`` decides, as for every store. Each request
may take the store's deadline (obstore's timeout is one per client, not per call); a
request past a shorter deadline is abandoned by ``store/aio.py``.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import BaseError, GenericError, NotFoundError
from obstore.store import from_url

from zarrmount.store.base import Store, StoreError, key_parts, public_url
from zarrmount.store.retry import with_retries

log = logging.getLogger(__name__)

# fsspec's names for what obstore calls otherwise, so one ``so.`` set serves both clients
_ENDPOINT = {"s3": "endpoint", "gs": "base_url", "az": "endpoint"}
_ALIASES = {"anon": "skip_signature", "region_name": "region"}


def _cloud(scheme: str) -> str:
    if scheme in ("s3", "s3a"):
        return "s3"
    if scheme in ("gs", "gcs"):
        return "gs"
    return "http" if scheme in ("http", "https") else "az"


def _config(url: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """obstore's configuration and client options from fsspec-style ``so.`` options."""
    cloud = _cloud(urlsplit(url).scheme)
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for key, value in options.items():
        if key == "endpoint_url" and cloud in _ENDPOINT:
            config[_ENDPOINT[cloud]] = value
            client["allow_http"] = str(value).startswith("http://")
        elif key == "allow_http":
            client[key] = value
        else:
            config[_ALIASES.get(key, key)] = value
    if cloud == "http":
        client["allow_http"] = url.startswith("http://")
    return config, client


class ObstoreStore(Store):
    """Keys are paths below the URL's root, in an obstore ``ObjectStore``."""

    remote = True
    concurrency = 64  # requests wait on the network, not on the CPU
    read_only_reason = "the obstore client mounts read-only (-o client=fsspec writes)"

    def __init__(self, url: str, deadline_s: float = 30.0, **options: Any) -> None:
        self.url = public_url(url)
        self.deadline_s = deadline_s
        self.lists_chunks = self.lists_deep = not url.startswith(("http://", "https://"))
        config, client = _config(url, options)
        client["timeout"] = f"{max(deadline_s, 0.001)}s"
        try:
            self.objects = from_url(
                url, config=config or None, client_options=client, retry_config={"max_retries": 0}
            )
        except Exception as e:  # unknown keys, a bad URL: obstore says which
            raise StoreError(f"{type(e).__name__}: {e}") from None

    def _call(self, what: str, fn, *args, deadline_s: float | None = None, **kwargs):
        deadline = self.deadline_s if deadline_s is None else deadline_s

        def attempt(_left: float):
            try:
                return fn(*args, **kwargs)
            except (NotFoundError, FileNotFoundError):  # obstore raises the builtin one
                return None
            except BaseError as e:
                raise Failure(e) from None

        try:
            return with_retries(attempt, what, deadline, self._retried)
        except Exception as e:
            raise StoreError(f"{what}: {e}") from e

    def _retried(self) -> None:
        self.retries += 1

    @staticmethod
    def _key(key: str) -> str:
        return "/".join(key_parts(key))

    def _get(self, key: str, options: dict | None, deadline_s: float | None):
        """The value as obstore's buffer (no copy), or None."""

        path = self._key(key)  # a key that would leave the root: refused, never retried

        def fetch() -> obstore.Bytes:
            return obstore.get(self.objects, path, options=options).bytes()

        return self._call(key, fetch, deadline_s=deadline_s)

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        found = self._get(key, None, deadline_s)
        return None if found is None else found.to_bytes()

    def get_buffer(self, key: str, *, deadline_s: float | None = None):
        """The value without a copy into Python's heap (a chunk about to be decoded)."""
        found = self._get(key, None, deadline_s)
        return None if found is None else memoryview(found)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        if start < 0:  # a suffix: one request, no HEAD for the size
            wanted = {"suffix": -start}
            found = self._get(key, {"range": wanted}, deadline_s)
            return None if found is None else found.to_bytes()[:length]
        found = self._get(key, {"range": (start, start + length)}, deadline_s)
        return None if found is None else found.to_bytes()

    def set(self, key: str, value: bytes) -> None:
        raise StoreError(f"{key}: {self.read_only_reason}")

    def delete(self, key: str) -> None:
        raise StoreError(f"{key}: {self.read_only_reason}")

    def root_exists(self) -> bool:
        def first():
            return next(iter(obstore.list(self.objects, chunk_size=1)), [])

        return bool(self._call("/", first))

    def list_dir(self, prefix: str) -> list[str]:
        return sorted(self.list_validated(prefix))

    def list_validated(self, prefix: str) -> dict[str, str]:
        self.list_calls += 1
        path = self._key(prefix)
        found = self._call(
            prefix or "/", obstore.list_with_delimiter, self.objects, path or None
        ) or {"common_prefixes": [], "objects": []}
        names = {p.rstrip("/").rsplit("/", 1)[-1]: "" for p in found["common_prefixes"]}
        for meta in found["objects"]:
            names[meta["path"].rsplit("/", 1)[-1]] = _validator(meta)
        names.pop("", None)
        return names

    def list_tree(self, prefix: str) -> dict[str, str]:
        self.list_calls += 1
        path = self._key(prefix)

        def walk() -> dict[str, str]:
            start = len(path) + 1 if path else 0
            return {
                meta["path"][start:]: _validator(meta)
                for batch in obstore.list(self.objects, path or None)
                for meta in batch
            }

        return self._call(prefix or "/", walk) or {}

    def validator(self, key: str) -> str | None:
        meta = self._call(key, obstore.head, self.objects, self._key(key))
        return None if meta is None else _validator(meta)


# obstore's errors by what a second try would change: nothing for these (as 4xx)
_REFUSED = {"PermissionDeniedError": 403, "UnauthenticatedError": 401}
_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]{1,64})</Code>")


class Failure(Exception):
    """One line for the log from obstore's error (whose text runs to a page), and the
    HTTP status ``store/retry.py`` decides by."""

    def __init__(self, error: BaseError) -> None:
        text = str(error).split("\n\nDebug source")[0]
        found = _STATUS.search(text)
        self.status = int(found.group(1)) if found else _REFUSED.get(type(error).__name__)
        if self.status is None and not isinstance(error, GenericError):
            self.status = 400  # a bad path, an unsupported call, a failed precondition
        code = _CODE.search(text)
        if found:
            line = f"HTTP {self.status}" + (f" ({code.group(1)})" if code else "")
        else:
            line = " ".join(text.split())[:300]
        super().__init__(f"{type(error).__name__}: {line}")


def _validator(meta: dict[str, Any]) -> str:
    found = meta.get("e_tag") or meta.get("version") or meta.get("last_modified") or ""
    return f"{found}:{meta.get('size', '')}"
