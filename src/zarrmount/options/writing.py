"""Options of writing: read-only or read-write, the writer lock, write-back and the
crash journal."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from zarrmount.options.option import Option, flag, number
from zarrmount.options.values import OptionError

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions


def _journal(o: MountOptions, name: str, text: str) -> None:
    if not text:
        raise OptionError(f"{name} needs a directory, or none")
    o.journal = text if text in ("none", "auto") else os.path.abspath(text)


WRITING: tuple[Option, ...] = (
    Option("ro", "read-only (the default)", flag("read_only"), False),
    Option(
        "rw", "read-write: writes change the arrays in the store", flag("read_only", False), False
    ),
    Option(
        "writable",
        "read-write, also through mount(8) and fstab (where rw is ignored)",
        lambda o, _n, _v: (setattr(o, "writable", True), setattr(o, "read_only", False)),
        False,
    ),
    Option(
        "write_empty_chunks",
        "with rw: store chunks that are all fill value",
        flag("write_empty_chunks"),
        False,
    ),
    Option(
        "nolock",
        "with rw: mount even while another rw mount holds the store",
        flag("nolock"),
        False,
    ),
    Option(
        "writeback_delay=SECONDS",
        "with rw: how long written data may wait (default 5)",
        number("writeback_delay", float, 0),
    ),
    Option(
        "journal=DIR",
        "with rw: keep each write in a journal under DIR until it is stored, so a killed "
        "daemon loses none (default for local stores: the cache directory; none: off)",
        _journal,
    ),
)
