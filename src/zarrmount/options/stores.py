"""Options of how the store is reached: requests, clients, fsspec storage options and
where references may point."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from zarrmount.options.option import Option, choice, number
from zarrmount.options.values import OptionError, json_object

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions

CLIENTS = ("fsspec", "obstore")


def _storage_file(o: MountOptions, name: str, path: str) -> None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise OptionError(f"option {name!r}: {e}") from None
    o.storage_options.update(json_object(text, f"option {name!r}: {path}"))


def _storage_option(o: MountOptions, name: str, text: str) -> None:
    """``so.`` values: JSON (numbers, true/false, objects) where they parse, else text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text
    o.storage_options[name.partition(".")[2]] = value


STORES: tuple[Option, ...] = (
    Option(
        "timeout=SECONDS",
        "remote stores: time one request may take (default 30)",
        number("timeout", float, 0, low_ok=False),
    ),
    Option(
        "client=NAME",
        "object stores: fsspec (the default; reads and writes) or obstore (S3, Azure "
        "and HTTP, read-only: native requests off the GIL, faster cold reads)",
        choice("client", CLIENTS),
    ),
    Option(
        "virtual_prefix=PREFIX",
        "reference sets and Icechunk virtual chunks: also read targets below PREFIX (a "
        "directory or URL prefix; repeatable); others fail their reads",
        lambda o, _n, v: o.virtual_prefixes.append(v if "://" in v else os.path.abspath(v)),
    ),
    Option(
        "max_fetches=N",
        "concurrent store requests (default 16 local, 64 remote)",
        number("max_fetches", int, 1),
    ),
    Option(
        "so.KEY=VALUE",
        "an fsspec storage option (repeatable; JSON values allowed)",
        _storage_option,
    ),
    Option(
        "so_json=FILE",
        "fsspec storage options from a JSON file (nested values, commas; mode 0600)",
        _storage_file,
    ),
)
