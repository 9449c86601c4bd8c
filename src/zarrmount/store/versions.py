"""What a versioned store (an Icechunk repository) tells of its history: branches and tags
by name, and every snapshot they reach, each a fixed version a mount can show; and how a
mount that writes to it commits."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Snapshot:
    id: str
    parent: str | None
    written: datetime.datetime
    message: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class History:
    branches: dict[str, str]  # name -> the snapshot at its tip
    tags: dict[str, str]  # name -> snapshot
    snapshots: dict[str, Snapshot]  # every snapshot a branch or a tag reaches, by id


@dataclass(frozen=True)
class Commits:
    """How an ``rw`` mount of a branch commits: its message (None: one naming the arrays
    changed), and who wins where another writer changed the same chunk ("fail": nobody,
    the commit fails; "ours")."""

    message: str | None = None
    on_conflict: str = "fail"
