"""A mount's parts made from its options and wired together: the store wrapper, the chunk
cache and its buffer pool, the decoding threads, the array engines and the filesystem.
Nothing below builds its own parts, so each is testable with others in their place."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from functools import partial

from zarrmount.array import Arrays, Shared
from zarrmount.array.background import Background
from zarrmount.array.decoders import Decoders
from zarrmount.array.freshness import Revalidation, Ttl
from zarrmount.array.warm import Warming
from zarrmount.cache import BufferPool, ChunkCache
from zarrmount.cache.chunks import REMOTE_WRITE_BACKS, WRITE_BACKS
from zarrmount.codecs import Pipeline
from zarrmount.controls import WARM_PROGRESS_XATTR, WARM_XATTR
from zarrmount.format.model import ArrayNode, GroupNode
from zarrmount.hierarchy import Dialect
from zarrmount.hierarchy.tree import Tree
from zarrmount.journal import Journal
from zarrmount.options import MountOptions
from zarrmount.paths import cache_home
from zarrmount.store import Store
from zarrmount.store.aio import AsyncStore
from zarrmount.store.diskcache import DiskCache
from zarrmount.store.faults import Fault, FaultyStore
from zarrmount.store.kept_documents import KeptDocuments
from zarrmount.versions import StoreVersions
from zarrmount.vfs import Filesystem, snapshots
from zarrmount.vfs.sidecars import SIDECARS
from zarrmount.vfs.table import InodeTable

log = logging.getLogger(__name__)

FAULTS_XATTR = "user.zarrmount.faults"


@dataclass
class Mount(Shared):
    """The parts of one mount (those its array engines share, and the rest); the session
    runs their background tasks."""

    options: MountOptions
    journal: Journal | None = None  # where writes wait until stored (-o journal)
    versions: StoreVersions | None = None  # a versioned store's other versions
    arrays: Arrays = field(init=False)
    fs: Filesystem = field(init=False)
    started: float = field(default_factory=time.monotonic)

    def statistics(self) -> dict[str, int]:
        """The counters of the store and the cache (``fs.stats`` adds its own)."""
        cache = self.cache
        return (
            {"uptime_s": int(time.monotonic() - self.started)}
            | self.store.stats.as_dict("store_")
            | {"store_lists": self.store.list_calls, "store_retries": self.store.retries}
            | self.store.health.statistics()
            | {f"store_{name}": n for name, n in self.store.store.counters().items()}
            | cache.stats.as_dict("cache_")
            | self.revalidation.stats.as_dict("cache_")
            | {
                "cache_dirty_bytes": cache.dirty_bytes,
                "cache_loading": cache.in_flight,
                "cache_used_bytes": cache.used,
                "cache_capacity_bytes": cache.capacity,
                "cache_entries": len(cache),
                "cache_open_files": len(self.revalidation.files),
                "decode_ms": self.decoders.decode_ns // 1_000_000,
            }
            | self._disk_statistics()
            | self._journal_statistics()
            | self.arrays.refusals.statistics()
            | self._fault_statistics()
        )

    def _fault_statistics(self) -> dict[str, int]:
        faulty = self.store.store
        return {"store_faults_injected": faulty.injected} if isinstance(faulty, FaultyStore) else {}

    def _disk_statistics(self) -> dict[str, int]:
        disk = self.store.disk
        if disk is None:
            return {}
        return disk.stats.as_dict("disk_cache_") | {"disk_cache_used_bytes": disk.used}

    def _journal_statistics(self) -> dict[str, int]:
        journal = self.journal
        if journal is None:
            return {}
        return {
            "journal_entries": journal.entries,
            "journal_bytes": journal.written,
            "journal_segments": len(journal.sealed) + (journal.active_bytes > 0),
        }

    def status(self) -> str:
        """One line for systemd's ``STATUS=``: what the mount holds and how it fares."""
        cache, mib = self.cache, 1 << 20
        return (
            f"{self.fs.table.arrays_seen} arrays listed; cache {cache.used // mib} of "
            f"{cache.capacity // mib} MiB, {cache.dirty_bytes // mib} MiB dirty; "
            f"{self.store.stats.errors} store errors; {self.store.health.status()}"
        )

    async def warm_up(self) -> None:
        """Once mounted, where it pays (local stores: not where the network sets a first
        read's latency and a listing costs requests): ready the root's arrays for their
        first read within a sixteenth of the cache."""
        if self.store.warm_start:
            await self.fs.warm_up(self.options.cache_size // 16)


def _with_faults(store: Store, options: MountOptions) -> Store:
    """The store the engine talks to: with ``-o fault=`` faults injected."""
    if not options.faults:
        return store
    log.warning("injecting store faults: %s", "; ".join(options.faults))
    return FaultyStore(store, [Fault.parse(text) for text in options.faults])


def _fault_control(store: FaultyStore):
    """``setfattr -n user.zarrmount.faults -v 'SPEC\nSPEC' MNT``: the faults from now on
    (none: an empty value), for a mount started with ``-o fault=``."""

    def set_faults(value: bytes) -> None:
        specs = [line for line in value.decode(errors="replace").splitlines() if line.strip()]
        store.faults = [Fault.parse(spec) for spec in specs]  # FaultSpecError: EINVAL
        log.warning("store faults now: %s", "; ".join(specs) or "none")

    return set_faults


def keep_documents(store: Store, options: MountOptions) -> Store:
    """``store``, its metadata documents and group listings kept in the disk cache
    (``-o disk_cache``): served first where the store never changes (``-o immutable``),
    else only while it is unreachable. Checked first here: the cache itself is made (and
    a local store's refusal logged) once, by ``assemble``."""
    if not store.remote or options.disk_cache is None:
        return store
    disk = _disk_cache(store, options)
    return KeptDocuments(store, disk) if disk is not None else store


def _disk_cache(store: Store, options: MountOptions) -> DiskCache | None:
    """Fetched objects kept on local disk (``-o disk_cache``): remote stores only, where
    the page cache does not serve them. Entries of a store that never changes (a read-only
    mount trusting everything for good) are served whatever their validator."""
    if isinstance(store, KeptDocuments):
        return store.disk  # made for the documents: one cache, one count of its bytes
    where = options.disk_cache
    if where is None:
        return None
    if not store.remote:
        log.info("no disk cache for a local store: the page cache serves it")
        return None
    directory = str(cache_home() / "objects") if where == "auto" else where
    immutable = options.read_only and _ttl(options, store).period is None
    return DiskCache(directory, store.identity, options.disk_cache_size, immutable)


def _unwarmable(store: Store, disk: DiskCache | None) -> str | None:
    """Why ``zarrmount warm`` has nothing to do on this mount, if so."""
    if not store.remote:
        return "its store is local: reads are at local speed already"
    if disk is None:
        return "it has no disk cache (mount it with -o disk_cache=DIR)"
    return None


def _ttl(options: MountOptions, store: Store) -> Ttl:
    """How long cached answers are trusted: a writable mount holds the store's writer lock
    or lease, so nobody else changes what it caches; a fixed store never changes."""
    if not options.read_only or store.fixed:
        return Ttl(None, None)
    return Ttl(options.metadata_ttl, options.negative_ttl)


def assemble(
    dialect: Dialect,
    root: GroupNode | ArrayNode,
    root_pipeline: Pipeline | None,
    options: MountOptions,
    journal: Journal | None = None,
) -> Mount:
    ttl = _ttl(options, dialect.store)
    disk = _disk_cache(dialect.store, options)
    if disk is not None and not options.read_only:
        ttl = replace(ttl, list_once=True)  # validators to key the disk cache
    store = AsyncStore(_with_faults(dialect.store, options), options.max_fetches, disk)
    cache_size = options.cache_size
    cache: ChunkCache
    # Freed chunk buffers wait in the pool for the next decode, within the cache's budget.
    pool = BufferPool(cache_size, lambda: cache.used)
    write_backs = REMOTE_WRITE_BACKS if dialect.store.remote else WRITE_BACKS
    cache = ChunkCache(cache_size, recycle=pool.give, write_backs=write_backs)
    revalidation = Revalidation(ttl, store, cache)
    mount = Mount(store, cache, pool, Decoders(), Background(), revalidation, options, journal)
    mount.arrays = _arrays(mount, options, root_pipeline, options.read_only, journal)
    sidecars = tuple(SIDECARS[kind] for kind in options.sidecars if kind in SIDECARS)
    dataset = options.dataset_name if "netcdf" in options.sidecars else None
    table = InodeTable(
        Tree(dialect, store),
        mount.arrays,
        sidecars,
        "text" in options.sidecars,
        dataset,
        options.dataset_name or "root",
        "hdf5" in options.sidecars,
    )
    mount.fs = Filesystem(table, root, options, mount.statistics, revalidation.ttl)
    if isinstance(store.store, FaultyStore):
        mount.fs.controls[FAULTS_XATTR] = _fault_control(store.store)
    warming = Warming(mount.arrays, _unwarmable(dialect.store, disk))
    mount.fs.asks[WARM_XATTR] = lambda ino: warming.add(*mount.fs.arrays_of(ino))
    mount.fs.reports[WARM_PROGRESS_XATTR] = warming.report
    if dialect.store.versioned:
        mount.versions = StoreVersions(store, options.metadata_ttl, partial(_engines, mount))
        snapshots.attach(table, mount.versions, options.show_snapshots)
    return mount


def _engines(
    mount: Mount, store: Store, pipeline: Pipeline | None, space: str
) -> tuple[AsyncStore, Arrays]:
    """The engines of another version of the mount's store (``.snapshots/``): read-only,
    fixed, over the mount's cache, pool and threads, their cache keys in ``space``."""
    options = mount.options
    shown = AsyncStore(store, options.max_fetches, _disk_cache(store, options))
    revalidation = Revalidation(Ttl(None, None), shown, mount.cache)
    shared = Shared(
        shown, mount.cache, mount.pool, mount.decoders, mount.background, revalidation, space=space
    )
    return shown, _arrays(shared, options, pipeline, True)


def _arrays(
    shared: Shared,
    options: MountOptions,
    root_pipeline: Pipeline | None,
    read_only: bool,
    journal: Journal | None = None,
) -> Arrays:
    """The array engines over ``shared``, as the options set them."""
    return Arrays(
        shared,
        read_only=read_only,
        write_empty_chunks=options.write_empty_chunks,
        dirty_limit=options.cache_size // 2,
        root_pipeline=root_pipeline,
        byteorder=options.byteorder,
        text_max=options.text_max,
        journal=journal,
    )
