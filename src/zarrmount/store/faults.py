"""Faults injected into a store, for tests and for trying a mount by hand (``-o fault=``):
errors, delays, stalls, short and corrupt reads, on the keys a pattern finds or a
fraction of calls, and failing writes and syncs. The engine then talks to
:class:`FaultyStore`, which passes everything else to the store it wraps.

A fault is written ``KIND[@FRACTION][/SECONDS][:PATTERN]``: ``stall/60:c/0/``,
``error@0.1``, ``corrupt:^a/c/1/``. PATTERN is a regular expression searched in the key
(every key when left out), FRACTION the share of matching calls that fail (all of them by
default), SECONDS how long a ``delay`` or ``stall`` lasts (``delay`` 1 s; ``stall`` an
hour: longer than any deadline)."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from zarrmount.store.base import Store, StoreError
from zarrmount.store.wrapped import Wrapped

T = TypeVar("T")

READS = ("error", "delay", "stall", "short", "corrupt")
WRITES = ("write_error",)
SYNCS = ("sync_error",)
KINDS = (*READS, *WRITES, *SYNCS)
_DEFAULT_SECONDS = {"delay": 1.0, "stall": 3600.0}
_SPEC = re.compile(
    r"(?P<kind>[a-z_]+)(@(?P<fraction>[0-9.]+))?(/(?P<seconds>[0-9.]+))?(:(?P<keys>.*))?$"
)


class FaultSpecError(ValueError):
    """A fault is written in a way we cannot read; the message says how to write it."""


@dataclass(frozen=True)
class Fault:
    kind: str
    keys: re.Pattern = field(default_factory=lambda: re.compile(""))
    fraction: float = 1.0
    seconds: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Fault:
        found = _SPEC.match(text)
        if found is None or found["kind"] not in KINDS:
            raise FaultSpecError(
                f"bad fault {text!r}: KIND[@FRACTION][/SECONDS][:PATTERN], KIND one of "
                + ", ".join(KINDS)
            )
        try:
            fraction = float(found["fraction"] or 1.0)
            seconds = float(found["seconds"] or _DEFAULT_SECONDS.get(found["kind"], 0.0))
            keys = re.compile(found["keys"] or "")
        except (ValueError, re.error) as e:
            raise FaultSpecError(f"bad fault {text!r}: {e}") from None
        if not 0.0 <= fraction <= 1.0:
            raise FaultSpecError(f"bad fault {text!r}: the fraction is not within 0 and 1")
        return cls(found["kind"], keys, fraction, seconds)


class FaultyStore(Wrapped):
    """``inner`` with ``faults`` applied: which calls fail is drawn from ``seed``."""

    def __init__(self, inner: Store, faults: Iterable[Fault], seed: int = 0) -> None:
        super().__init__(inner)
        self.faults = list(faults)
        self.injected = 0  # faults applied so far
        self._random = random.Random(seed)
        self._lock = threading.Lock()  # calls come from many worker threads

    def _due(self, kinds: tuple[str, ...], key: str) -> Fault | None:
        """The first fault of ``kinds`` this call of ``key`` meets, if any."""
        for fault in self.faults:
            if fault.kind in kinds and fault.keys.search(key):
                with self._lock:
                    if self._random.random() >= fault.fraction:
                        continue
                    self.injected += 1
                return fault
        return None

    def _read(self, key: str, read: Callable[[], T], deadline_s: float | None = None) -> T:
        fault = self._due(READS, key)
        if fault is None:
            return read()
        if fault.kind == "error":
            raise StoreError(f"{key}: injected error")
        if fault.kind == "stall":
            self._stall(key, fault, deadline_s)
        if fault.kind == "delay":
            time.sleep(fault.seconds)
            return read()
        value = read()
        if not isinstance(value, bytes | bytearray | memoryview) or not len(value):
            return value
        data = bytes(value)
        if fault.kind == "short":
            return data[: len(data) // 2]
        return bytes(b ^ 0x5A for b in data[:64]) + data[64:]  # corrupt

    def _stall(self, key: str, fault: Fault, deadline_s: float | None) -> None:
        """No answer: as a store that can cancel a request does, give up a moment after
        the call's deadline (remote stores); a local store just hangs for the time."""
        deadline = self.deadline_s if deadline_s is None else deadline_s
        if not self.remote or not deadline:
            time.sleep(fault.seconds)
            return
        time.sleep(min(fault.seconds, deadline + 1.0))
        raise StoreError(f"{key}: injected stall, no answer within {deadline:g} s")

    def get(self, key: str, *, deadline_s: float | None = None) -> bytes | None:
        return self._read(key, lambda: self.inner.get(key, deadline_s=deadline_s), deadline_s)

    def get_buffer(self, key: str, *, deadline_s: float | None = None):
        return self.get(key, deadline_s=deadline_s)

    def get_range(
        self, key: str, start: int, length: int, *, deadline_s: float | None = None
    ) -> bytes | None:
        return self._read(
            key,
            lambda: self.inner.get_range(key, start, length, deadline_s=deadline_s),
            deadline_s,
        )

    def read_into(self, key: str, buffer_for: Callable[[int], bytearray]):
        return self._read(key, lambda: self.inner.read_into(key, buffer_for))

    def read_ranges(self, key: str, use: Callable[[int, Callable[[int, int], bytes]], T]):
        """Parts of a value: delays and stalls as for a whole one; any other fault fails
        the call (a short or corrupt part would only be a wrong part)."""
        fault = self._due(READS, key)
        if fault is not None and fault.kind not in ("delay", "stall"):
            raise StoreError(f"{key}: injected {fault.kind}")
        if fault is not None:
            time.sleep(fault.seconds)
        return self.inner.read_ranges(key, use)

    def set(self, key: str, value: bytes) -> None:
        if self._due(WRITES, key) is not None:
            raise StoreError(f"{key}: injected write error")
        self.inner.set(key, value)

    def delete(self, key: str) -> None:
        if self._due(WRITES, key) is not None:
            raise StoreError(f"{key}: injected write error")
        self.inner.delete(key)

    def sync(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        if any(self._due(SYNCS, key) is not None for key in keys):
            raise StoreError(f"{', '.join(keys[:3])}: injected sync error")
        self.inner.sync(keys)
