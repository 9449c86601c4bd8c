"""Open files of chunks read straight into replies, least recently used first: a stream
reads each chunk file once per request of its rows, and opening it each time would cost
more than the read. Their number is bounded (file descriptors are), and they are checked
as cached chunks are: a revalidation that finds a chunk's object changed closes its file,
so the next read opens the new one."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Protocol

# Open files kept at most, for the whole mount: a sequential reader of a 2-D array needs
# a row of chunks, a random reader of a region its chunks.
OPEN_FILES = 256


class Closable(Protocol):
    def close(self) -> None: ...


class OpenEntry:
    """An open file and, as for cached chunks, since when it is known current."""

    __slots__ = ("file", "since")

    def __init__(self, file: Closable, since: float) -> None:
        self.file, self.since = file, since


class OpenFiles:
    def __init__(self, capacity: int = OPEN_FILES) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, OpenEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Closable | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.file

    def put(self, key: Hashable, file: Closable, since: float) -> None:
        self.forget(key)
        self._entries[key] = OpenEntry(file, since)
        while len(self._entries) > self.capacity:
            _, oldest = self._entries.popitem(last=False)
            oldest.file.close()

    def forget(self, key: Hashable) -> None:
        """Close ``key``'s file, if open: its object changed, or it is no use any more."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.file.close()

    def recheck(self, keep: Callable[[Hashable, OpenEntry], bool]) -> int:
        """Close the files ``keep`` refuses (as ``ChunkCache.recheck``); how many."""
        gone = [key for key, entry in self._entries.items() if not keep(key, entry)]
        for key in gone:
            self.forget(key)
        return len(gone)

    def close_all(self) -> None:
        for key in list(self._entries):
            self.forget(key)
