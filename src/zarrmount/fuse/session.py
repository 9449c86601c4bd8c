"""One mount's life: mount, serve until unmounted or signalled, clean up, exit."""

from __future__ import annotations

import gc
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pyfuse3
import trio

from zarrmount import metrics, recovery
from zarrmount.assemble import Mount
from zarrmount.fuse import records, signals
from zarrmount.fuse.adapter import Operations
from zarrmount.fuse.notify import ReadyPipe, sd_notify
from zarrmount.fuse.readahead import set_read_ahead
from zarrmount.options import MountOptions
from zarrmount.process_memory import give_back_freed
from zarrmount.store import public_url

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often systemd hears the mount's one-line status, and how much more time a final
# flush asks for each time it says it is still storing.
STATUS_EVERY_S = 10.0
EXTEND_BY_S = 30
# How often freed memory malloc keeps is looked at, and how much of it it may keep.
GIVE_BACK_S = 10.0
GIVE_BACK_LEAST = 8 << 20


def fuse_options(source: str, options: MountOptions) -> set[str]:
    name = "".join(c if c.isprintable() and c not in ", " else "_" for c in public_url(source))
    opts = {"fsname=" + (name or "zarrmount"), "subtype=zarrmount", "default_permissions"}
    if options.read_only:
        opts.add("ro")
    if options.allow_other:
        opts.add("allow_other")
    return opts


async def _asking_for_time(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()``, asking systemd for more time now and then while it runs (a final
    flush, a journal's replay: storing takes as long as the store needs). What ``work``
    raises is raised as it is, not in an exception group."""

    async def extend() -> None:
        while True:
            sd_notify(f"EXTEND_TIMEOUT_USEC={EXTEND_BY_S * 1_000_000}")
            await trio.sleep(EXTEND_BY_S / 3)

    failed: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(extend)
        try:
            done = await work()
        except Exception as e:  # noqa: BLE001 - raised again below, whole
            failed = e
        nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return done


async def _flush_all(mount: Mount) -> int:
    """Store every dirty chunk; returns how many arrays failed to store theirs."""
    if not mount.cache.dirty_bytes:
        return await mount.arrays.flush_all()
    return await _asking_for_time(mount.arrays.flush_all)


async def _tell_systemd(mount: Mount) -> None:
    """``STATUS=`` now and then, and ``WATCHDOG=1`` when systemd watches us: sent from the
    loop that answers requests, so they stop when it does."""
    watchdog_s = _watchdog_interval()
    every = min(STATUS_EVERY_S, watchdog_s) if watchdog_s else STATUS_EVERY_S
    while True:
        sd_notify(f"STATUS={mount.status()}" + ("\nWATCHDOG=1" if watchdog_s else ""))
        await trio.sleep(every)


def _watchdog_interval() -> float | None:
    """Half the watchdog period systemd set for this process, if it set one."""
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2e6


async def _forget_pages(inodes: list[int]) -> None:
    """The kernel drops what it cached of these files (other writers changed them), after
    the request that found it has been answered: never from inside a handler."""
    for ino in inodes:
        try:
            await trio.to_thread.run_sync(pyfuse3.invalidate_inode, ino)
        except OSError as e:  # a file the kernel does not know (yet): nothing it kept
            log.debug("inode %d: nothing to invalidate: %s", ino, e)


async def _give_back_freed() -> None:
    """Every ``GIVE_BACK_S``, the freed memory malloc keeps goes back to the kernel when it
    is more than ``GIVE_BACK_LEAST``: the resident set follows what the mount holds, not
    its busiest moment's (in a thread: other threads' arenas are locked meanwhile)."""
    while True:
        await trio.sleep(GIVE_BACK_S)
        await trio.to_thread.run_sync(give_back_freed, GIVE_BACK_LEAST)


async def _serve(ops: Operations, mount: Mount, mountpoint: str, ready: ReadyPipe) -> int:
    """Serve until stopped; returns how many arrays failed to store their dirty data."""
    options = mount.options
    failed = 0
    async with trio.open_nursery() as nursery:
        mount.background.nursery = nursery
        mount.revalidation.moved = lambda paths: nursery.start_soon(
            _forget_pages, mount.fs.table.array_files(paths)
        )

        async def stop(reason: str) -> None:
            nonlocal failed
            log.info("%s: storing dirty data, then unmounting", reason)
            sd_notify("STOPPING=1")
            failed = await _flush_all(mount)  # while the mount still answers requests
            pyfuse3.terminate()

        async def announce() -> None:
            # The kernel applies its own read-ahead when INIT is answered: set ours after.
            await ops.initialized.wait()
            if options.read_ahead_kb is not None:
                await trio.to_thread.run_sync(set_read_ahead, mountpoint, options.read_ahead_kb)
            ready.ready()
            nursery.start_soon(_tell_systemd, mount)
            await mount.warm_up()
            # What start-up made (modules, the hierarchy) lives as long as the mount: out
            # of the collector's way, full collections stay short however long it serves.
            gc.freeze()
            await mount.decoders.keep_alive()

        nursery.start_soon(signals.handle, mount, stop)
        nursery.start_soon(announce)
        if not options.read_only:
            nursery.start_soon(mount.cache.write_back_idle, options.writeback_delay)
        if mount.journal is not None:
            nursery.start_soon(recovery.keep, mount.journal, mount.arrays, mount.cache)
        if mount.versions is not None:
            nursery.start_soon(mount.versions.keep)
        nursery.start_soon(_give_back_freed)
        nursery.start_soon(mount.store.watch_health)
        await pyfuse3.main()
        mount.arrays.refusals.settle()
        mount.background.nursery = None
        nursery.cancel_scope.cancel()
    failed += await mount.arrays.flush_all()
    if failed:
        log.error("some dirty data could not be stored before exit (see above)")
    return failed


def _serve_metrics(mount: Mount) -> None:
    """``-o metrics``: the endpoint, and its histograms fed by reads and store requests."""
    if mount.options.metrics is None:
        return
    reads, requests = metrics.serve(mount.options.metrics, mount.fs.stats)
    mount.fs.read_latency = reads
    mount.store.latency = requests


def _init(ops: Operations, mountpoint: str, options: set[str]) -> None:
    """``pyfuse3.init``; when mounting fails, what libfuse and fusermount3 wrote on
    stderr (the reason: "option allow_other only allowed if ...") joins the error."""
    with tempfile.TemporaryFile() as said:
        saved = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            pyfuse3.init(ops, mountpoint, options)
        except RuntimeError as e:
            os.dup2(saved, 2)
            said.seek(0)
            reason = " ".join(said.read().decode(errors="replace").split())
            raise RuntimeError(f"{e}: {reason}" if reason else str(e)) from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)


async def _replay(mount: Mount, ready: ReadyPipe) -> bool:
    """Apply what a killed daemon left in the journal before serving; False (the mount
    fails, the journal kept) when the store cannot take it."""
    if mount.journal is None or not mount.journal.pending:
        return True
    try:
        journal = mount.journal
        await _asking_for_time(lambda: recovery.replay(journal, mount.fs, mount.arrays))
    except recovery.ReplayError as e:
        where = mount.journal.directory
        reason = f"cannot apply the journal {where} (kept for the next mount): {e}"
        log.error(reason)
        ready.failed(reason)
        return False
    return True


async def _run(ops: Operations, mount: Mount, source: str, mountpoint: str, ready: ReadyPipe):
    if not await _replay(mount, ready):
        return 1
    try:
        _serve_metrics(mount)
        _init(ops, mountpoint, fuse_options(source, mount.options))
    except (RuntimeError, OSError, metrics.MetricsUnavailable) as e:
        reason = f"cannot mount at {mountpoint}: {e}"
        log.error(reason)
        ready.failed(reason)
        return 1
    log.info("mounted %s at %s", public_url(source), mountpoint)
    mount.fs.table.stale_names = signals.forget_names
    record = records.write_record(mountpoint)
    status = 0
    try:
        status = 2 if await _serve(ops, mount, mountpoint, ready) else 0
    except Exception:
        log.exception("FUSE main loop failed")
        status = 1
    finally:
        pyfuse3.close(unmount=True)
        records.remove_record(record)
        log.info("unmounted %s; statistics: %s", mountpoint, json.dumps(mount.fs.stats()))
    return status


def run(mount: Mount, source: str, mountpoint: str, ready: ReadyPipe) -> int:
    """Mount ``mount``'s filesystem at ``mountpoint`` and serve it (the journal's writes
    applied first); returns the exit status."""
    try:
        ops = Operations(mount.fs, mount.options.timeout)
        return trio.run(_run, ops, mount, source, mountpoint, ready)
    except BaseException:
        log.exception("the mount's event loop failed")
        return 1
