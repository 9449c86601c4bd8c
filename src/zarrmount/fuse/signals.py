"""What each signal an administrator may send does; none leaves a dead mount behind.
SIGTERM, SIGINT, SIGQUIT and ``zarrmount -u``'s signal store every dirty chunk, then
unmount; SIGHUP reloads the hierarchy's metadata without unmounting; SIGUSR1 writes the
statistics to the log; the others that would end the process are logged and ignored."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

from zarrmount.assemble import Mount
from zarrmount.errors import FsError
from zarrmount.fuse.notify import UNMOUNT_SIGNAL, sd_notify
from zarrmount.hierarchy import SourceError
from zarrmount.store import StoreError

log = logging.getLogger(__name__)

STOP = (UNMOUNT_SIGNAL, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
IGNORED = (signal.SIGUSR2, signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGIO)


def stop_reason(signum: int) -> str:
    if signum == UNMOUNT_SIGNAL:
        return "unmount requested (zarrmount -u)"
    return f"received {signal.Signals(signum).name}, stopping"


async def handle(mount: Mount, stop: Callable[[str], Awaitable[None]]) -> None:
    """Act on signals until one asks to stop; then ``stop(reason)``."""
    with trio.open_signal_receiver(*STOP, signal.SIGHUP, signal.SIGUSR1, *IGNORED) as signals:
        async for signum in signals:
            if signum in STOP:
                await stop(stop_reason(signum))
                return
            if signum == signal.SIGHUP:
                await reload(mount)
            elif signum == signal.SIGUSR1:
                log.info("statistics: %s", json.dumps(mount.fs.stats()))
            else:
                name = signal.Signals(signum).name
                log.info("received %s: ignored (SIGHUP reloads, SIGUSR1 logs statistics)", name)


def forget_names(stale: list[tuple[int, str]]) -> None:
    """The kernel forgets these (directory inode, name) entries: they changed."""
    for ino, name in stale:
        pyfuse3.invalidate_entry_async(ino, os.fsencode(name), ignore_enoent=True)


async def reload(mount: Mount) -> None:
    """Read the hierarchy's metadata again and show it: new arrays appear, removed ones
    go (open handles keep working until closed), changed ones are shown anew. The
    kernel forgets the names that changed. On failure the mount shows what it did."""
    now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    sd_notify(f"RELOADING=1\nMONOTONIC_USEC={now_us}")
    try:
        dialect, root, pipeline = await mount.fs.table.tree.reopen()
        done = await mount.fs.reload(dialect, root, pipeline)
    except (SourceError, StoreError, FsError) as e:
        log.error("reload failed, the mount shows the hierarchy as before: %s", e)
        said = f"reload failed: {e}"
    except Exception as e:  # a reload never takes the mount down
        log.exception("reload failed, the mount shows the hierarchy as it can")
        said = f"reload failed: {type(e).__name__}"
    else:
        forget_names(done.stale)
        log.info("reloaded the hierarchy: %s", done)
        said = f"reloaded: {done}"
    sd_notify(f"READY=1\nSTATUS={said}; {mount.status()}")
