"""Writes refused after they began (the journal or the dirty-data limit said no), counted
for ``--stats`` and logged once a kind and storm: a full journal refuses every write that
follows, and a line per write would bury what happened under thousands of copies.

A storm of a kind begins with its first refusal (one line, at once) and ends when a write
is accepted again or the mount ends (one line with how many more it refused, if any).
"""

from __future__ import annotations

import errno
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class Refused(Exception):
    """A write (or the rest of it) refused: ``kind`` names why, the same for every write
    refused for one cause; ``errno`` is what the caller is told."""

    def __init__(self, kind: str, err: int, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.errno = err


def kind_of(what: str, error: OSError | None) -> str:
    """``what`` refused, with the errno's name (ENOSPC, EROFS...) where there is one."""
    code = getattr(error, "errno", None)
    return f"{what} ({errno.errorcode.get(code, code)})" if code else what


@dataclass
class _Storm:
    began: float = field(default_factory=time.monotonic)
    writes: int = 0  # refused after the first
    nbytes: int = 0


class Refusals:
    """The refused writes of one mount, whichever array they were for."""

    def __init__(self) -> None:
        self.writes = 0
        self.nbytes = 0
        self._storms: dict[str, _Storm] = {}

    def refused(self, refusal: Refused, path: str, nbytes: int, accepted: int) -> None:
        """``nbytes`` of a write to ``path`` refused, after ``accepted`` bytes of it were
        taken (a short write)."""
        self.writes += 1
        self.nbytes += nbytes
        storm = self._storms.get(refusal.kind)
        if storm is not None:
            storm.writes += 1
            storm.nbytes += nbytes
            return
        self._storms[refusal.kind] = _Storm()
        log.error(
            "write to %s: %d bytes refused%s, nothing of them applied: %s "
            "(more refusals for this cause are counted until a write is accepted)",
            path or "/",
            nbytes,
            f" after {accepted} accepted" if accepted else "",
            refusal,
        )

    def accepted(self) -> None:
        """A write was accepted whole: any storm is over."""
        if self._storms:
            self.settle()

    def settle(self) -> None:
        """End every storm, with a line for those that refused more than their first."""
        for kind, storm in self._storms.items():
            if storm.writes:
                log.warning(
                    "%s: %d more writes refused (%d bytes) in %.1f s",
                    kind,
                    storm.writes,
                    storm.nbytes,
                    time.monotonic() - storm.began,
                )
        self._storms.clear()

    def statistics(self) -> dict[str, int]:
        return {"writes_refused": self.writes, "writes_refused_bytes": self.nbytes}
