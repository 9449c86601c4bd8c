"""The ``-o`` mount options, in the comma-separated form fstab and mount.fuse3 pass.

``OPTIONS`` is the one table of them: the parser, ``zarrmount --help`` and the test that
checks the README's table all read it, so the three cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from zarrmount.metrics import parse_address
from zarrmount.store.faults import Fault, FaultSpecError

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
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


SIDECAR_KINDS = ("envi", "nrrd", "npy", "tiff", "fits", "netcdf", "text")
DEFAULT_SIDECARS = ("envi", "text")
BYTE_ORDERS = ("stored", "little", "big", "native")
CLIENTS = ("fsspec", "obstore")
LOG_LEVELS = ("debug", "info", "warning", "error")
CONFLICTS = ("fail", "ours")  # the store's own names: store/icechunk_branch.py


@dataclass
class MountOptions:
    read_only: bool = True
    cache_size: int = 512 << 20
    allow_other: bool = False
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    umask: int = 0o022
    file_mode: int | None = None  # permission bits of files (write bits where writable)
    dir_mode: int | None = None  # permission bits of directories
    log_file: str | None = None
    log_level: str = "info"
    metrics: str | None = None  # [ADDR:]PORT of a Prometheus endpoint
    faults: list[str] = field(default_factory=list)  # injected into the store (store/faults.py)
    # fsspec storage options (``so.KEY=VALUE``; values are JSON where they parse as JSON).
    storage_options: dict[str, Any] = field(default_factory=dict)
    timeout: float = 30.0  # seconds a remote request may take, retries included
    client: str = "fsspec"  # what speaks to object stores (store/remote.py, store/objstore.py)
    # which version of a versioned store (Icechunk): branch, tag, snapshot, as_of
    version: dict[str, str] = field(default_factory=dict)
    show_snapshots: bool = False  # .snapshots listed in the root (found by name always)
    commit_message: str | None = None  # rw on a branch: each commit's (None: what changed)
    on_conflict: str = "fail"  # rw on a branch: another writer changed the same chunk
    # where references and virtual chunks may point besides their own place
    virtual_prefixes: list[str] = field(default_factory=list)
    max_fetches: int = 0  # concurrent store requests; 0: 16 local, 64 remote
    # seconds metadata, listings and cached chunks are trusted before they are checked
    # against the store again (other writers), and absent names and chunks; None: for good
    metadata_ttl: float | None = 10.0
    negative_ttl: float | None = 5.0
    # where fetched objects of a remote store are kept on local disk ("auto": the cache
    # directory), and how many bytes at most; None: no disk cache
    disk_cache: str | None = None
    disk_cache_size: int = 10 << 30
    direct_io: bool = False  # no page cache: each read is the application's (no shared mmap)
    write_empty_chunks: bool = False  # store chunks that are all fill value (else delete them)
    nolock: bool = False  # rw without the store's writer lock (another writer may clash)
    writable: bool = False  # read-write also through mount(8), which adds "rw" on its own
    writeback_delay: float = 5.0  # seconds a dirty chunk may wait before it is stored
    # where acknowledged writes wait until stored (a directory; "auto": the cache
    # directory for local stores, none for object stores; "none")
    journal: str = "auto"
    # files shown beside each array file for other programs (vfs/sidecars.py)
    sidecars: list[str] = field(default_factory=lambda: [*DEFAULT_SIDECARS])
    text_max: int = 64 << 20  # arrays of strings with more text are not shown
    # the name of the root group's netCDF file (NAME.nc); None: the source's last component
    dataset_name: str | None = None
    byteorder: str = "stored"  # of the bytes array files show: stored, little, big, native
    # 1 MiB kernel reads where we may set them (root); None leaves the kernel default.
    read_ahead_kb: int | None = field(default_factory=lambda: 1024 if os.getuid() == 0 else None)

    def apply(self, text: str) -> None:
        """Apply one ``-o`` argument (``a,b=c,...``) on top of the current values."""
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, sep, value = item.partition("=")
            option = find_option(name)
            if option is None:
                if name in PASSIVE or name.startswith("x-"):
                    continue
                raise OptionError(f"unknown option {name!r}")
            option.apply(self, name, value if sep else None)

    def summary(self) -> str:
        """The options that differ from the defaults, for the log: storage options by
        name only (their values may be credentials)."""
        default = MountOptions()
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            if f.name == "storage_options":
                parts += [f"so.{key}=(hidden)" for key in sorted(value)]
            elif f.name in ("umask", "file_mode", "dir_mode") and value is not None:
                parts.append(f"{f.name}={value:03o}")
            else:
                parts.append(f"{f.name}={value}")
        return ", ".join(parts) or "defaults"

    def to_json(self) -> str:
        """The options for the daemon process (values may hold commas: no ``-o`` text)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> MountOptions:
        return cls(**json.loads(text))


Setter = Callable[[MountOptions, str, str], None]  # (options, name, value)


@dataclass(frozen=True)
class Option:
    """One ``-o`` option: how it is written, what it means, how it is applied."""

    usage: str  # "cache_size=SIZE"; a name ending in ".KEY" is a family ("so.KEY=VALUE")
    help: str
    setter: Setter
    takes_value: bool = True

    @property
    def name(self) -> str:
        return self.usage.partition("=")[0]

    def matches(self, name: str) -> bool:
        if self.name.endswith(".KEY"):
            prefix = self.name.removesuffix("KEY")
            return name.startswith(prefix) and len(name) > len(prefix)
        return name == self.name

    def apply(self, options: MountOptions, name: str, value: str | None) -> None:
        if self.takes_value and not value:
            raise OptionError(f"option {name!r} needs a value: {self.usage}")
        if not self.takes_value and value is not None:
            raise OptionError(f"option {name!r} takes no value")
        try:
            self.setter(options, name, value or "")
        except OptionError:
            raise
        except ValueError:
            raise OptionError(f"option {name!r}: bad value {value!r}") from None


def _flag(attr: str, value: bool = True) -> Setter:
    return lambda o, _name, _value: setattr(o, attr, value)


def _number(attr: str, parse: Callable[[str], float], low: float, low_ok: bool = True) -> Setter:
    """A number of at least ``low`` (or above it, when ``low_ok`` is false)."""

    def setter(o: MountOptions, _name: str, text: str) -> None:
        value = parse(text)
        if value < low or (value == low and not low_ok):
            raise ValueError(text)
        setattr(o, attr, value)

    return setter


def _size(attr: str) -> Setter:
    def setter(o: MountOptions, name: str, text: str) -> None:
        try:
            setattr(o, attr, parse_size(text))
        except OptionError as e:
            raise OptionError(f"option {name!r}: {e}") from None

    return setter


def _sidecars(o: MountOptions, name: str, text: str) -> None:
    """``envi+npy``: kinds joined with ``+`` (``,`` separates options); ``none``."""
    kinds = [] if text == "none" else text.split("+")
    unknown = [k for k in kinds if k not in SIDECAR_KINDS]
    if unknown:
        raise OptionError(
            f"option {name!r}: unknown kind {unknown[0]!r} (known: {', '.join(SIDECAR_KINDS)})"
        )
    o.sidecars = list(dict.fromkeys(kinds))


def _dataset_name(o: MountOptions, name: str, text: str) -> None:
    if not text or "/" in text or text in (".", "..") or "\0" in text:
        raise OptionError(f"option {name!r}: {text!r} is not a file name")
    o.dataset_name = text


def dataset_name(source: str) -> str:
    """The root group's name for the files that name it: the source's last path
    component without its ``.zarr`` or ``.zip`` suffixes (``era5.zarr.zip``: ``era5``)."""
    path = urlsplit(source).path if "://" in source else source
    name = path.rstrip("/").rpartition("/")[2]
    for suffix in (".zip", ".zarr"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name if name not in ("", ".", "..") else "root"


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


def _choice(attr: str, choices: tuple[str, ...]) -> Setter:
    def setter(o: MountOptions, name: str, text: str) -> None:
        if text not in choices:
            raise OptionError(f"option {name!r}: {text!r} is not one of {', '.join(choices)}")
        setattr(o, attr, text)

    return setter


def _octal(attr: str) -> Setter:
    return lambda o, _name, text: setattr(o, attr, int(text, 8) & 0o777)


def json_object(text: str, what: str) -> dict[str, Any]:
    """``text``, a JSON object (fsspec storage options with nested values or commas)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise OptionError(f"{what} is not a JSON object")
    return value


def _fault(o: MountOptions, name: str, text: str) -> None:
    try:
        Fault.parse(text)
    except FaultSpecError as e:
        raise OptionError(f"option {name!r}: {e}") from None
    o.faults.append(text)


def _journal(o: MountOptions, name: str, text: str) -> None:
    if not text:
        raise OptionError(f"{name} needs a directory, or none")
    o.journal = text if text in ("none", "auto") else os.path.abspath(text)


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


OPTIONS: tuple[Option, ...] = (
    Option("ro", "read-only (the default)", _flag("read_only"), False),
    Option(
        "rw", "read-write: writes change the arrays in the store", _flag("read_only", False), False
    ),
    Option(
        "writable",
        "read-write, also through mount(8) and fstab (where rw is ignored)",
        lambda o, _n, _v: (setattr(o, "writable", True), setattr(o, "read_only", False)),
        False,
    ),
    Option(
        "cache_size=SIZE",
        "decoded-chunk cache budget, suffixes K/M/G (default 512M)",
        _size("cache_size"),
    ),
    Option(
        "write_empty_chunks",
        "with rw: store chunks that are all fill value",
        _flag("write_empty_chunks"),
        False,
    ),
    Option(
        "nolock",
        "with rw: mount even while another rw mount holds the store",
        _flag("nolock"),
        False,
    ),
    Option(
        "writeback_delay=SECONDS",
        "with rw: how long written data may wait (default 5)",
        _number("writeback_delay", float, 0),
    ),
    Option(
        "journal=DIR",
        "with rw: keep each write in a journal under DIR until it is stored, so a killed "
        "daemon loses none (default for local stores: the cache directory; none: off)",
        _journal,
    ),
    Option(
        "read_ahead_kb=N",
        "kernel read-ahead of the mount (default 1024 as root)",
        _number("read_ahead_kb", int, 0),
    ),
    Option("direct_io", "bypass the kernel page cache (no shared mmap)", _flag("direct_io"), False),
    Option(
        "timeout=SECONDS",
        "remote stores: time one request may take (default 30)",
        _number("timeout", float, 0, low_ok=False),
    ),
    Option(
        "client=NAME",
        "object stores: fsspec (the default; reads and writes) or obstore (S3, Azure "
        "and HTTP, read-only: native requests off the GIL, faster cold reads)",
        _choice("client", CLIENTS),
    ),
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
        _flag("show_snapshots"),
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
        _choice("on_conflict", CONFLICTS),
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
        _number("max_fetches", int, 1),
    ),
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
        _size("disk_cache_size"),
    ),
    Option(
        "immutable",
        "the store never changes: trust everything for good (both TTLs indefinite)",
        _immutable,
        False,
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
    Option(
        "sidecars=LIST",
        "files for other programs: envi, nrrd, npy, tiff, fits, text beside each array, "
        "netcdf in each group, joined with +, or none (default envi+text)",
        _sidecars,
    ),
    Option(
        "dataset_name=NAME",
        "the root group's netCDF file is NAME.nc (default: the source's last component "
        "without .zarr or .zip)",
        _dataset_name,
    ),
    Option(
        "text_max=SIZE",
        "arrays of strings with more text than this are not shown (default 64M)",
        _size("text_max"),
    ),
    Option(
        "byteorder=ORDER",
        "byte order of array files and views: stored (the default), little, big, native",
        _choice("byteorder", BYTE_ORDERS),
    ),
    Option("allow_other", "let other users use the mount", _flag("allow_other"), False),
    Option("uid=N", "owner of every file and directory", _number("uid", int, 0)),
    Option("gid=N", "group of every file and directory", _number("gid", int, 0)),
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
        _choice("log_level", LOG_LEVELS),
    ),
)


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
