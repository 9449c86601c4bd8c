"""``MountOptions``: every option's value, as the daemon and each part it builds read
them, applied from ``-o`` text and handed to the daemon process as JSON."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from zarrmount.options.table import PASSIVE, find_option
from zarrmount.options.values import OptionError
from zarrmount.options.views import DEFAULT_SIDECARS


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
