"""The ``-o`` mount options, in the comma-separated form fstab and mount.fuse3 pass."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# Options that mount(8) and mount.fuse3 add on their own; accepted and ignored.
_PASSIVE = {"defaults", "auto", "noauto", "nofail", "user", "users",
            "nouser", "_netdev", "dev", "nodev", "suid", "nosuid", "exec", "noexec",
            "atime", "noatime", "relatime", "x-systemd.automount"}


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

    def to_args(self) -> str:
        """The same options as one ``-o`` string (passed on to the daemon process)."""
        parts = ["ro" if self.read_only else "rw", f"cache_size={self.cache_size}",
                 f"uid={self.uid}", f"gid={self.gid}", f"umask={self.umask:o}"]
        if self.allow_other:
            parts.append("allow_other")
        if self.write_empty_chunks:
            parts.append("write_empty_chunks")
        parts.append(f"writeback_delay={self.writeback_delay:g}")
        if self.read_ahead_kb is not None:
            parts.append(f"read_ahead_kb={self.read_ahead_kb}")
        if self.log_file:
            parts.append(f"log={self.log_file}")
        return ",".join(parts)
