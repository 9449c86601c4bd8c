"""Options of what is cached and for how long: the chunk cache, the kernel's page cache,
the disk cache of remote stores and the TTLs that decide when other writers are seen."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from zarrmount.options.option import Option, Setter, flag, number, size

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions


def _ttl(attr: str) -> Setter:
    """Seconds (0: check every time), or ``indefinite``: trusted for good."""

    def setter(o: MountOptions, _name: str, text: str) -> None:
        value = None if text == "indefinite" else float(text)
        if value is not None and not 0 <= value < float("inf"):
            raise ValueError(text)
        setattr(o, attr, value)

    return setter


def _disk_cache(o: MountOptions, _name: str, text: str) -> None:
    o.disk_cache = None if text == "none" else text if text == "auto" else os.path.abspath(text)


def _immutable(o: MountOptions, _name: str, _value: str) -> None:
    o.metadata_ttl = o.negative_ttl = None


CACHING: tuple[Option, ...] = (
    Option(
        "cache_size=SIZE",
        "decoded-chunk cache budget, suffixes K/M/G (default 512M)",
        size("cache_size"),
    ),
    Option(
        "read_ahead_kb=N",
        "kernel read-ahead of the mount (default 1024 as root)",
        number("read_ahead_kb", int, 0),
    ),
    Option("direct_io", "bypass the kernel page cache (no shared mmap)", flag("direct_io"), False),
    Option(
        "metadata_ttl=SECONDS",
        "how long metadata, listings and cached chunks are trusted before they are checked "
        "against the store again (other writers), or indefinite (default 10)",
        _ttl("metadata_ttl"),
    ),
    Option(
        "negative_ttl=SECONDS",
        "how long an absent name or chunk is trusted, or indefinite (default 5)",
        _ttl("negative_ttl"),
    ),
    Option(
        "disk_cache=DIR",
        "remote stores: keep fetched chunks on local disk under DIR (auto: the cache "
        "directory), so remounts and restarts do not fetch them again (default none)",
        _disk_cache,
    ),
    Option(
        "disk_cache_size=SIZE",
        "the most the disk cache holds, least recently used first (default 10G)",
        size("disk_cache_size"),
    ),
    Option(
        "immutable",
        "the store never changes: trust everything for good (both TTLs indefinite)",
        _immutable,
        False,
    ),
)
