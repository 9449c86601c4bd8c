"""``zarrmount --stats MOUNTPOINT``: the counters a running mount keeps (its root's
``user.zarrmount.stats`` attribute), read only from a mount this user's daemon serves."""

from __future__ import annotations

import json
import os

from zarrmount.fuse import records
from zarrmount.vfs.fs import STATS_XATTR

# (heading, counter prefix): counters are printed under the heading of their prefix
_GROUPS = (
    ("requests", "requests_"),
    ("store", "store_"),
    ("cache", "cache_"),
    ("disk cache", "disk_cache_"),
    ("journal", "journal_"),
    ("memory", "memory_"),
)


class NotOurs(Exception):
    """No mount of this user's daemon is there: its answers are not to be trusted."""


def read_stats(mountpoint: str) -> dict[str, int]:
    mountpoint = os.path.abspath(mountpoint)
    if records.find_daemon(mountpoint) is None:
        raise NotOurs(f"{mountpoint}: no zarrmount daemon of this user serves it")
    return json.loads(os.getxattr(mountpoint, STATS_XATTR))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _shown(stats: dict[str, int]) -> str:
    return ", ".join(
        f"{name.replace('_', ' ')} {_mib(v) if name.endswith('bytes') else v}"
        for name, v in stats.items()
    )


def format_stats(stats: dict[str, int]) -> str:
    """A few lines a person reads: one per group of counters (a mount without a journal
    has none of its own), sizes in MiB."""
    rest = dict(stats)
    lines = []
    for heading, prefix in _GROUPS:
        found = {k[len(prefix) :]: rest.pop(k) for k in list(rest) if k.startswith(prefix)}
        if found or prefix not in ("journal_", "disk_cache_"):  # only where in use
            lines.append(f"{heading}: " + (_shown(found) or "none"))
    lines.append("mount: " + _shown(rest))
    return "\n".join(lines)
