"""The ``-o`` mount options, in the comma-separated form fstab and mount.fuse3 pass."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# Options that mount(8) and mount.fuse3 add on their own; accepted and ignored.
_PASSIVE = {"defaults", "auto", "noauto", "nofail", "user", "users",
            "nouser", "_netdev", "dev", "nodev", "suid", "nosuid", "exec", "noexec",
            "atime", "noatime", "relatime", "x-systemd.automount"}


def _option_value(text: str) -> Any:
    """``so.`` values: JSON (numbers, true/false, objects) where they parse, else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class OptionError(ValueError):
    """An option is unknown or its value is malformed; the message names it."""


def parse_size(text: str) -> int:
    """``512M`` -> bytes; suffixes K, M, G, T (powers of 1024), optional trailing ``B``."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, suffix = (t[:-1], t[-1]) if t and t[-1] in _SUFFIXES else (t, "")
    try:
        value = float(num)
    except ValueError:
        raise OptionError(f"bad size {text!r}") from None
    if value < 0:
        raise OptionError(f"bad size {text!r}")
    return int(value * _SUFFIXES[suffix])


@dataclass
class MountOptions:
    read_only: bool = True
    cache_size: int = 512 << 20
    allow_other: bool = False
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    umask: int = 0o022
    log_file: str | None = None
    # fsspec storage options (``so.KEY=VALUE``; values are JSON where they parse as JSON).
    storage_options: dict[str, Any] = field(default_factory=dict)
    timeout: float = 30.0  # seconds a remote request may take, retries included
    max_fetches: int = 0  # concurrent store requests; 0: 16 local, 64 remote
    direct_io: bool = False  # no page cache: each read is the application's (no shared mmap)
    write_empty_chunks: bool = False  # store chunks that are all fill value (else delete them)
    writeback_delay: float = 5.0  # seconds a dirty chunk may wait before it is stored
    # 1 MiB kernel reads where we may set them (root); None leaves the kernel default.
    read_ahead_kb: int | None = field(default_factory=lambda: 1024 if os.getuid() == 0 else None)

    def apply(self, text: str) -> None:
        """Apply one ``-o`` argument (``a,b=c,...``) on top of the current values."""
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, _, value = item.partition("=")
            self._apply_one(name, value)

    def _apply_one(self, name: str, value: str) -> None:
        try:
            if name == "ro":
                self.read_only = True
            elif name == "rw":
                self.read_only = False
            elif name == "direct_io":
                self.direct_io = True
            elif name == "write_empty_chunks":
                self.write_empty_chunks = True
            elif name == "writeback_delay":
                self.writeback_delay = float(value)
                if self.writeback_delay < 0:
                    raise ValueError(value)
            elif name == "cache_size":
                try:
                    self.cache_size = parse_size(value)
                except OptionError as e:
                    raise OptionError(f"option 'cache_size': {e}") from None
            elif name == "allow_other":
                self.allow_other = True
            elif name == "uid":
                self.uid = int(value)
            elif name == "gid":
                self.gid = int(value)
            elif name == "umask":
                self.umask = int(value, 8) & 0o777
            elif name.startswith("so.") and len(name) > 3:
                self.storage_options[name[3:]] = _option_value(value)
            elif name == "timeout":
                self.timeout = float(value)
                if self.timeout <= 0:
                    raise ValueError(value)
            elif name == "max_fetches":
                self.max_fetches = int(value)
                if self.max_fetches < 1:
                    raise ValueError(value)
            elif name == "read_ahead_kb":
                self.read_ahead_kb = int(value)
            elif name == "log":
                if not value:
                    raise OptionError("option 'log' needs a path: log=PATH")
                self.log_file = os.path.abspath(value)
            elif name not in _PASSIVE:
                raise OptionError(f"unknown option {name!r}")
        except ValueError as e:
            if isinstance(e, OptionError):
                raise
            raise OptionError(f"option {name!r}: bad value {value!r}") from None

    def to_json(self) -> str:
        """The options for the daemon process (values may hold commas: no ``-o`` text)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> MountOptions:
        return cls(**json.loads(text))
