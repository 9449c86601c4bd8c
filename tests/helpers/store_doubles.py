"""Test doubles of stores: the parts that tests of reads do not exercise, and a local
store that holds one key's store until the test lets it go."""

from __future__ import annotations

import threading

from zarrmount.store.base import Store
from zarrmount.store.local import LocalStore


class ReadOnlyRemoteDouble(Store):
    """A remote store that only answers gets (subclasses say how); writes and listings
    are no-ops, and a range is cut from the whole value."""

    remote = True

    def get_range(self, key, start, length, *, deadline_s=None):
        return self.get(key, deadline_s=deadline_s)[start : start + length]

    def set(self, key, value):
        pass

    def delete(self, key):
        pass

    def list_dir(self, prefix):
        return []


class GatedStore(LocalStore):
    """Holds the store of one key until the test opens the gate; lists what was stored,
    in order."""

    def __init__(self, root: str, gated: str) -> None:
        super().__init__(root)
        self.gated = gated
        self.gate = threading.Event()
        self.stored: list[str] = []

    def set(self, key: str, value: bytes) -> None:
        if key == self.gated:
            assert self.gate.wait(60), "the test never opened the gate"
        super().set(key, value)
        self.stored.append(key)
