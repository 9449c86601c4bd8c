"""A hierarchy's large documents (consolidated metadata) read a part at a time.

A local file is read a window at a time and never held whole; a remote store's GET gives
the whole value, which is then read through views rather than copied again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from zarrmount.format.windowed import STEP, Stored, held
from zarrmount.store import Store

T = TypeVar("T")


def with_stored(store: Store, key: str, use: Callable[[Stored], T]) -> T | None:
    """``use`` of ``key``'s document (None when it is missing), in parts where the store
    reads parts of a value; all of it within one open file, so one version of it."""
    if store.reads_parts:
        return store.read_ranges(key, lambda size, read: use(Stored(size, read)))
    raw = store.get(key)
    return None if raw is None else use(held(raw))


def digest(stored: Stored) -> bytes:
    """What tells a document read again from the one read before, without keeping it."""
    found = hashlib.blake2b(digest_size=16)
    for at in range(0, stored.size, STEP):
        found.update(stored.read(at, STEP))
    return found.digest()
