"""Options of the mount as a service: who may use it and with which permissions, where
its log goes, its metrics endpoint, and faults injected for trying things."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from zarrmount.metrics import parse_address
from zarrmount.options.option import Option, Setter, choice, flag, number
from zarrmount.options.values import OptionError
from zarrmount.store.faults import Fault, FaultSpecError

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions

LOG_LEVELS = ("debug", "info", "warning", "error")


def _octal(attr: str) -> Setter:
    return lambda o, _name, text: setattr(o, attr, int(text, 8) & 0o777)


def _fault(o: MountOptions, name: str, text: str) -> None:
    try:
        Fault.parse(text)
    except FaultSpecError as e:
        raise OptionError(f"option {name!r}: {e}") from None
    o.faults.append(text)


SERVICE: tuple[Option, ...] = (
    Option("allow_other", "let other users use the mount", flag("allow_other"), False),
    Option("uid=N", "owner of every file and directory", number("uid", int, 0)),
    Option("gid=N", "group of every file and directory", number("gid", int, 0)),
    Option("umask=OCT", "permission bits to clear (default 022)", _octal("umask")),
    Option(
        "file_mode=OCT",
        "permission bits of files, before umask (default 644; files that cannot be written "
        "lose the write bits)",
        _octal("file_mode"),
    ),
    Option(
        "dir_mode=OCT",
        "permission bits of directories, before umask (default 555)",
        _octal("dir_mode"),
    ),
    Option(
        "log=PATH",
        "append the daemon's log to PATH (reopened when logrotate moves it)",
        lambda o, _n, v: setattr(o, "log_file", os.path.abspath(v)),
    ),
    Option(
        "metrics=ADDR:PORT",
        "serve Prometheus metrics there (a PORT alone: on loopback; zarrmount[metrics])",
        lambda o, _n, v: setattr(o, "metrics", parse_address(v) and v),
    ),
    Option(
        "fault=SPEC",
        "inject a store fault, for trying things (repeatable): KIND[@FRACTION][/SECONDS]"
        "[:PATTERN], KIND error, delay, stall, short, corrupt, write_error or sync_error",
        _fault,
    ),
    Option(
        "log_level=LEVEL",
        "debug, info (the default), warning or error",
        choice("log_level", LOG_LEVELS),
    ),
)
