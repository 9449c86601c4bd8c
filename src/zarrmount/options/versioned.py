"""Options of versioned stores (Icechunk): which version is mounted, whether
``.snapshots`` is listed, and how an ``rw`` mount of a branch commits."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from zarrmount.options.option import Option, choice, flag
from zarrmount.options.values import OptionError

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions

CONFLICTS = ("fail", "ours")  # the store's own names: store/icechunk_branch.py


def _version(o: MountOptions, name: str, text: str) -> None:
    """One of branch, tag and snapshot, and as_of (a time, on a branch)."""
    if name == "as_of":
        datetime.datetime.fromisoformat(text)  # a bad time: ValueError, named by the caller
    names = {*o.version, name}
    if len(names - {"as_of"}) > 1:
        raise OptionError(f"options {' and '.join(sorted(names))}: pick one version")
    if "as_of" in names and names & {"tag", "snapshot"}:
        raise OptionError("option 'as_of' goes with a branch, not a tag or a snapshot")
    o.version[name] = text


VERSIONED: tuple[Option, ...] = (
    Option("branch=NAME", "versioned stores: the tip of this branch", _version),
    Option("tag=NAME", "versioned stores: the version this tag names", _version),
    Option("snapshot=ID", "versioned stores: this snapshot", _version),
    Option(
        "as_of=TIME",
        "versioned stores: the branch (default main) as it was at this ISO 8601 time",
        _version,
    ),
    Option(
        "show_snapshots",
        "versioned stores: list .snapshots (every version) in the root; else it is "
        "there by name only",
        flag("show_snapshots"),
        False,
    ),
    Option(
        "commit_message=TEXT",
        "versioned stores, with rw: the message of each commit (default: naming the "
        "arrays changed)",
        lambda o, _n, v: setattr(o, "commit_message", v),
    ),
    Option(
        "on_conflict=CHOICE",
        "versioned stores, with rw: where another writer committed the same chunk, fail "
        "the commit (the default: fsync fails, the data stays here uncommitted) or ours",
        choice("on_conflict", CONFLICTS),
    ),
)
