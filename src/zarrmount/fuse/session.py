"""One mount's life: mount, serve until unmounted or signalled, clean up, exit."""

from __future__ import annotations

import logging
import signal

import pyfuse3
import trio

from zarrmount.assemble import Mount
from zarrmount.fuse import records
from zarrmount.fuse.adapter import Operations
from zarrmount.fuse.notify import UNMOUNT_SIGNAL, ReadyPipe, sd_notify
from zarrmount.fuse.readahead import set_read_ahead
from zarrmount.options import MountOptions
from zarrmount.store import public_url

log = logging.getLogger(__name__)

_STOP_SIGNALS = (UNMOUNT_SIGNAL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _stop_reason(signum: int) -> str:
    if signum == UNMOUNT_SIGNAL:
        return "unmount requested (zarrmount -u)"
    return f"received {signal.Signals(signum).name}, stopping"


def fuse_options(source: str, options: MountOptions) -> set[str]:
    name = "".join(c if c.isprintable() and c not in ", " else "_" for c in public_url(source))
    opts = {"fsname=" + (name or "zarrmount"), "subtype=zarrmount", "default_permissions"}
    if options.read_only:
        opts.add("ro")
    if options.allow_other:
        opts.add("allow_other")
    return opts


async def _serve(ops: Operations, mount: Mount, mountpoint: str, ready: ReadyPipe) -> None:
    options = mount.options
    async with trio.open_nursery() as nursery:
        mount.background.nursery = nursery

        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
                async for signum in signals:
                    log.info("%s: storing dirty data, then unmounting", _stop_reason(signum))
                    sd_notify("STOPPING=1")
                    await mount.arrays.flush_all()  # while the mount still answers requests
                    pyfuse3.terminate()
                    return

        async def announce() -> None:
            # The kernel applies its own read-ahead when INIT is answered: set ours after.
            await ops.initialized.wait()
            if options.read_ahead_kb is not None:
                await trio.to_thread.run_sync(set_read_ahead, mountpoint, options.read_ahead_kb)
            ready.ready()
            await mount.warm_up()
            await mount.decoders.keep_alive()

        nursery.start_soon(stop_on_signal)
        nursery.start_soon(announce)
        if not options.read_only:
            nursery.start_soon(mount.cache.write_back_idle, options.writeback_delay)
        await pyfuse3.main()
        mount.background.nursery = None
        nursery.cancel_scope.cancel()
    if await mount.arrays.flush_all():
        log.error("some dirty data could not be stored before exit")


def run(mount: Mount, source: str, mountpoint: str, ready: ReadyPipe) -> int:
    """Mount ``mount``'s filesystem at ``mountpoint`` and serve it; returns the exit status."""
    ops = Operations(mount.fs)
    try:
        pyfuse3.init(ops, mountpoint, fuse_options(source, mount.options))
    except RuntimeError as e:
        reason = f"cannot mount at {mountpoint}: {e}"
        log.error(reason)
        ready.failed(reason)
        return 1
    log.info("mounted %s at %s", public_url(source), mountpoint)
    record = records.write_record(mountpoint)
    status = 0
    try:
        trio.run(_serve, ops, mount, mountpoint, ready)
    except BaseException:
        log.exception("FUSE main loop failed")
        status = 1
    finally:
        pyfuse3.close(unmount=True)
        records.remove_record(record)
        log.info("unmounted %s", mountpoint)
    return status
