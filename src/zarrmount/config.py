"""``--config FILE``: a mount described in TOML, for servers (``/etc/zarrmount/NAME.conf``,
read by the systemd template unit): ``source``, ``mountpoint``, an ``[options]`` table
(the ``-o`` options by name: ``true`` for a flag, a string or number for a value) and a
``[storage_options]`` table passed to fsspec as it is (nested values and commas
allowed). Credentials belong here (mode 0600) or in the environment, never on a command
line, where ``ps`` shows them."""

from __future__ import annotations

import logging
import os
import stat
import tomllib
from dataclasses import dataclass
from typing import Any

from zarrmount.options import MountOptions, OptionError, find_option

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """The file cannot be read or says something we cannot do; the message says what."""


@dataclass
class MountConfig:
    source: str
    mountpoint: str
    options: MountOptions


def _apply(options: MountOptions, name: str, value: Any) -> None:
    option = find_option(name)
    if option is None:
        raise ConfigError(f"unknown option {name!r}")
    if not option.takes_value:
        if value is not True:
            raise ConfigError(f"option {name!r} is a flag: write {name} = true, or leave it out")
        option.apply(options, name, None)
        return
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"option {name!r} takes a string or a number, not {value!r}")
    option.apply(options, name, str(value))


def load(path: str) -> MountConfig:
    """The mount ``path`` describes; warns when others may read credentials in it."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
            mode = os.fstat(f.fileno()).st_mode
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    source, mountpoint = doc.get("source"), doc.get("mountpoint")
    if not isinstance(source, str) or not isinstance(mountpoint, str):
        raise ConfigError(f'{path}: needs source = "..." and mountpoint = "..."')
    unknown = set(doc) - {"source", "mountpoint", "options", "storage_options"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    options = MountOptions()
    try:
        for name, value in (doc.get("options") or {}).items():
            _apply(options, name, value)
    except OptionError as e:
        raise ConfigError(f"{path}: {e}") from None
    storage = doc.get("storage_options") or {}
    if not isinstance(storage, dict):
        raise ConfigError(f"{path}: storage_options is not a table")
    options.storage_options.update(storage)
    if storage and mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning("%s holds storage options and others may read it: chmod 600 it", path)
    return MountConfig(source, os.path.abspath(mountpoint), options)
