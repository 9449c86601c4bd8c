"""``OPTIONS``, the one table of ``-o`` options, put together from its groups in the
order ``zarrmount --help`` and the README list them (rw first, logging last)."""

from __future__ import annotations

import textwrap

from zarrmount.options.caching import CACHING
from zarrmount.options.option import Option
from zarrmount.options.service import SERVICE
from zarrmount.options.stores import STORES
from zarrmount.options.versioned import VERSIONED
from zarrmount.options.views import VIEWS
from zarrmount.options.writing import WRITING

# Options that mount(8) and mount.fuse3 add on their own; accepted and ignored.
PASSIVE = (
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "user",
    "users",
    "nouser",
    "_netdev",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "relatime",
    "x-*",
)
# The order of ``--help``: every option of the groups, each once.
HELP_ORDER = (
    *("ro", "rw", "writable", "cache_size", "write_empty_chunks", "nolock"),
    *("writeback_delay", "journal", "read_ahead_kb", "direct_io", "timeout", "client"),
    *("branch", "tag", "snapshot", "as_of", "show_snapshots", "commit_message"),
    *("on_conflict", "virtual_prefix", "max_fetches", "metadata_ttl", "negative_ttl"),
    *("disk_cache", "disk_cache_size", "immutable", "so.KEY", "so_json"),
    *("sidecars", "dataset_name", "text_max", "byteorder"),
    *("allow_other", "uid", "gid", "umask", "file_mode", "dir_mode"),
    *("log", "metrics", "fault", "log_level"),
)


def _in_help_order(*groups: tuple[Option, ...]) -> tuple[Option, ...]:
    """The groups' options in ``HELP_ORDER``; one missing from it, in two groups, or listed
    there but in no group is a mistake caught at import, not a line missing from ``--help``."""
    options = [o for group in groups for o in group]
    by_name = {o.name: o for o in options}
    if len(by_name) != len(options) or sorted(by_name) != sorted(HELP_ORDER):
        raise RuntimeError(f"options out of HELP_ORDER: {set(by_name) ^ set(HELP_ORDER)}")
    return tuple(by_name[name] for name in HELP_ORDER)


OPTIONS: tuple[Option, ...] = _in_help_order(WRITING, CACHING, STORES, VERSIONED, VIEWS, SERVICE)


def find_option(name: str) -> Option | None:
    return next((o for o in OPTIONS if o.matches(name)), None)


def options_help() -> str:
    """The table for ``zarrmount --help``."""
    width = max(len(o.usage) for o in OPTIONS) + 2
    lines = ["mount options (-o OPT[,OPT...]):"]
    lines += [f"  {o.usage:<{width}}{o.help}" for o in OPTIONS]
    ignored = "accepted and ignored (mount(8) adds them): " + ", ".join(PASSIVE)
    lines.append(textwrap.fill(ignored, 78, initial_indent="  ", subsequent_indent="    "))
    return "\n".join(lines) + "\n"
