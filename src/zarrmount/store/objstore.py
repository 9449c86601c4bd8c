"""S3, Azure and HTTP through obstore (``-o client=obstore``): read-only.

obstore's requests run in its own native threads without the GIL, so a mount's decoding
and FUSE replies no longer queue behind the Python HTTP stack of fsspec's backends: on
two cores that stack alone costs about as much CPU as all the rest of a cold read.

Its own retries are off: ``store/retry.py`` decides, as for every store. Each request
may take the store's deadline (obstore's timeout is one per client, not per call); a
request past a shorter deadline is abandoned by ``store/aio.py``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import BaseError, GenericError, NotFoundError
from obstore.store import from_url

from zarrmount.store.base import Store, StoreError, key_parts, public_url

log = logging.getLogger(__name__)

# fsspec's names of options obstore names otherwise: one ``so.`` set serves both clients
_ALIASES = {"anon": "skip_signature", "region_name": "region", "endpoint_url": "endpoint"}
# The parts of an Azure connection string (adlfs takes one as an option, or from the
# environment) and obstore's names for them
_CONNECTION = {
    "AccountName": "account_name",
    "AccountKey": "account_key",
    "BlobEndpoint": "endpoint",
    "SharedAccessSignature": "sas_key",
}
AZURE_SCHEMES = ("az", "abfs", "abfss", "azure")


def _azure(options: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``options`` with a connection string (the option's, else the environment's when no
    account is named) taken apart."""
    options = dict(options)
    text = options.pop("connection_string", None)
    if text is None and not any(key.startswith("account") for key in options):
        text = environ.get("AZURE_STORAGE_CONNECTION_STRING")
    parts = dict(p.split("=", 1) for p in (text or "").split(";") if "=" in p)
    found = {_CONNECTION[k]: v for k, v in parts.items() if k in _CONNECTION}
    return {**found, **options}


def _config(
    url: str, options: dict[str, Any], environ: Mapping[str, str] = os.environ
) -> tuple[dict[str, Any], dict[str, Any]]:
    """obstore's configuration and client options from fsspec-style ``so.`` options."""
    scheme = urlsplit(url).scheme
    if scheme in AZURE_SCHEMES:
        options = _azure(options, environ)
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for key, value in options.items():
        if key == "allow_http":
            client[key] = value
        else:
            config[_ALIASES.get(key, key)] = value
    endpoint = url if scheme in ("http", "https") else config.get("endpoint", "")
    client.setdefault("allow_http", str(endpoint).startswith("http://"))
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
        self.suffix_ranges = urlsplit(url).scheme not in AZURE_SCHEMES  # Azure has none
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

        return self.answered(attempt, what, deadline)

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
        if start < 0 and self.suffix_ranges:  # one request, no HEAD for the size
            found = self._get(key, {"range": {"suffix": -start}}, deadline_s)
            return None if found is None else found.to_bytes()[:length]
        if start < 0:
            meta = self._head(key)
            if meta is None:
                return None
            start = max(meta["size"] + start, 0)
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

    def _head(self, key: str) -> dict[str, Any] | None:
        return self._call(key, obstore.head, self.objects, self._key(key))

    def validator(self, key: str) -> str | None:
        meta = self._head(key)
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
    """ETag (unquoted: Azure quotes it in a HEAD, not in a listing), else version or
    modification time; and the size."""
    tag = (meta.get("e_tag") or "").strip('"')
    found = tag or meta.get("version") or meta.get("last_modified") or ""
    return f"{found}:{meta.get('size', '')}"
