"""A store that passes every call to another: the base of stores that change a few calls
(injected faults, metadata documents kept on disk) and must keep all the others."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from zarrmount.store.base import Store
from zarrmount.store.versions import History

T = TypeVar("T")

# what the layers above read from a store, fixed when it is opened
_COPIED = ("url", "remote", "concurrency", "reads_parts", "deadline_s", "lists_chunks",
           "lists_deep", "read_only_reason", "fixed", "versioned", "transactional",
           "keeps_documents", "unanswered")  # fmt: skip


class Wrapped(Store):
    def __init__(self, inner: Store) -> None:
        self.inner = inner
        for name in _COPIED:
            setattr(self, name, getattr(inner, name))

    # what the layers above set on, or read from, the store they were given
    root_marker = property(
        lambda self: self.inner.root_marker,
        lambda self, value: setattr(self.inner, "root_marker", value),
    )
    list_calls = property(lambda self: self.inner.list_calls)
    retries = property(lambda self: self.inner.retries)
    identity = property(lambda self: self.inner.identity)

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        return self.inner.get(key, deadline_s=deadline_s)

    def get_buffer(self, key: str, *, deadline_s: float | None = None):
        return self.inner.get_buffer(key, deadline_s=deadline_s)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        return self.inner.get_range(key, start, length, deadline_s=deadline_s)

    def read_into(self, key: str, buffer_for: Callable[[int], bytearray]):
        return self.inner.read_into(key, buffer_for)

    def read_ranges(self, key: str, use: Callable[[int, Callable[[int, int], bytes]], T]):
        return self.inner.read_ranges(key, use)

    def set(self, key: str, value: bytes) -> None:
        self.inner.set(key, value)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def sync(self, keys: Iterable[str]) -> None:
        self.inner.sync(keys)

    def list_dir(self, prefix: str) -> list[str]:
        return self.inner.list_dir(prefix)

    def list_validated(self, prefix: str) -> dict[str, str]:
        return self.inner.list_validated(prefix)

    def list_tree(self, prefix: str) -> dict[str, str]:
        return self.inner.list_tree(prefix)

    def validator(self, key: str) -> str | None:
        return self.inner.validator(key)

    def lock_writer(self, holder: str) -> object | None:
        return self.inner.lock_writer(holder)

    def history(self) -> History:
        return self.inner.history()

    def at(self, snapshot_id: str) -> Store:
        return self.inner.at(snapshot_id)

    def root_exists(self) -> bool:
        return self.inner.root_exists()

    def forget_listings(self) -> None:
        self.inner.forget_listings()

    def release_if_idle(self, idle_s: float) -> bool:
        return self.inner.release_if_idle(idle_s)

    def changed_by_others(self) -> set[str] | None:
        return self.inner.changed_by_others()

    def origins(self, prefix: str) -> list[str]:
        return self.inner.origins(prefix)

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def close(self) -> None:
        self.inner.close()
