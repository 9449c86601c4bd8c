"""What a versioned store (an Icechunk repository) tells of its history: branches and tags
by name, and every snapshot they reach, each a fixed version a mount can show."""

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
