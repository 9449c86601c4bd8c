"""Any zarr-python store (``zarr.abc.store.Store``: Icechunk's sessions, a VirtualiZarr
manifest) behind zarrmount's blocking interface.

Such a store is asynchronous and bound to the event loop it was first used on: its calls
run on one private asyncio loop in a thread of their own, each waited for at most the
store's deadline, so a worker thread of ``store/aio.py`` blocks here as on any other
store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.abc.store import Store as ZarrStore
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer

from zarrmount.store.base import Store, StoreError, key_parts, public_url
from zarrmount.store.retry import Permanent

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopThread:
    """One asyncio loop, running in a daemon thread, that every call of a store goes to."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """The coroutine's result; past ``timeout`` it is cancelled and TimeoutError."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class ZarrPythonStore(Store):
    """Keys are the zarr store's own keys; a missing key reads as None."""

    remote = True  # requests may stall: each gets a deadline
    concurrency = 64
    # errors of the store's own that no second try changes (it retries on its own)
    final: tuple[type[Exception], ...] = ()

    def __init__(
        self, store: ZarrStore, url: str, deadline_s: float = 30.0, loop: LoopThread | None = None
    ) -> None:
        """``loop``: the loop of other stores over the same data (closed by its owner)."""
        self.inner: ZarrStore | None = store
        self.url = public_url(url)
        self.deadline_s = deadline_s
        self.lists_chunks = self.lists_deep = store.supports_listing
        if store.read_only or not store.supports_writes:
            self.read_only_reason = f"{self.url} is opened read-only"
        self._owns_loop = loop is None
        self._loop = loop or LoopThread(f"zarr-store {self.url}")

    def _call(self, what: str, make: Any, deadline_s: float | None = None) -> Any:
        """``await make()`` on the store's loop, with retries, within the deadline."""
        deadline = self.deadline_s if deadline_s is None else deadline_s

        def attempt(left: float):
            try:
                return self._loop.run(make(), max(left, 1e-3))
            except self.final as e:
                raise Permanent(one_line(e)) from None

        return self.answered(attempt, what, deadline, _described)

    @staticmethod
    def _key(key: str) -> str:
        return "/".join(key_parts(key))

    def _get(self, key: str, byte_range: Any, deadline_s: float | None) -> Buffer | None:
        path = self._key(key)
        prototype = default_buffer_prototype()
        return self._call(
            key, lambda: self.inner.get(path, prototype, byte_range), deadline_s=deadline_s
        )

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        found = self._get(key, None, deadline_s)
        return None if found is None else found.to_bytes()

    def get_buffer(self, key: str, *, deadline_s: float | None = None):
        """The value without a copy (a chunk about to be decoded)."""
        found = self._get(key, None, deadline_s)
        return None if found is None else memoryview(found.as_numpy_array())

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        if start < 0:
            found = self._get(key, SuffixByteRequest(-start), deadline_s)
            return None if found is None else found.to_bytes()[:length]
        found = self._get(key, RangeByteRequest(start, start + length), deadline_s)
        return None if found is None else found.to_bytes()

    def set(self, key: str, value: bytes) -> None:
        if self.read_only_reason:
            raise StoreError(f"{key}: {self.read_only_reason}")
        path = self._key(key)
        self._call(key, lambda: self.inner.set(path, Buffer.from_bytes(value)))

    def delete(self, key: str) -> None:
        if self.read_only_reason:
            raise StoreError(f"{key}: {self.read_only_reason}")
        path = self._key(key)
        self._call(key, lambda: self.inner.delete(path))

    def list_dir(self, prefix: str) -> list[str]:
        self.list_calls += 1
        path = self._key(prefix)

        async def names() -> list[str]:
            return [name async for name in self.inner.list_dir(path)]

        found = self._call(prefix or "/", names)
        return sorted({name.rstrip("/") for name in found} - {""})

    def list_tree(self, prefix: str) -> dict[str, str]:
        """Every key below ``prefix``; no validators (a zarr store gives none)."""
        self.list_calls += 1
        path = self._key(prefix)
        start = len(path) + 1 if path else 0

        async def keys() -> list[str]:
            return [key async for key in self.inner.list_prefix(f"{path}/" if path else "")]

        return {key[start:]: "" for key in self._call(prefix or "/", keys)}

    def close(self) -> None:
        if self.inner is not None:  # let go of while idle (icechunk_repo.py)
            self.inner.close()
        if self._owns_loop:
            self._loop.close()


def _described(error: Exception) -> str:
    """A failure in a log line: a permanent one was described when it was raised."""
    return str(error) if isinstance(error, Permanent) else one_line(error)


def one_line(error: Exception) -> str:
    """The error's kind and the first line of its text (some stores append pages of
    their internals)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
