"""The ``zarrmount`` command: mount, unmount, inspect."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys

from zarrmount import __version__, config, hierarchy, logs
from zarrmount.errors import CommandError
from zarrmount.options import MountOptions, OptionError, dataset_name, json_object, options_help
from zarrmount.store import Store, StoreError, Unreachable, open_store, public_url
from zarrmount.store.kept_documents import offline
from zarrmount.store.versions import Commits
from zarrmount.unmount import cleanup, unmount

log = logging.getLogger(__name__)

USAGE = """\
zarrmount SOURCE MOUNTPOINT [-o OPT[,OPT...]] [--storage-options JSON] [-f] [-d]
       zarrmount --config FILE [-o OPT[,OPT...]] [-f] [-d]
       zarrmount -u MOUNTPOINT | -u --config FILE
       zarrmount --cleanup MOUNTPOINT | --cleanup --config FILE
       zarrmount --inspect SOURCE [--json]
       zarrmount --stats MOUNTPOINT [--json]
       zarrmount warm MNT/PATH...
       zarrmount --version"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="zarrmount",
        usage=USAGE,
        description="Mount a Zarr hierarchy: groups as directories, arrays as raw C-order files.",
        epilog=options_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("args", nargs="*", help="SOURCE MOUNTPOINT, or MOUNTPOINT with -u")
    p.add_argument(
        "-o",
        dest="options",
        action="append",
        default=[],
        metavar="OPT[,OPT...]",
        help="mount options, listed below",
    )
    p.add_argument("-f", dest="foreground", action="store_true", help="stay in the foreground")
    p.add_argument("-d", dest="debug", action="store_true", help="log debug detail")
    p.add_argument("-u", dest="unmount", action="store_true", help="flush and unmount")
    p.add_argument("--inspect", action="store_true", help="print the tree of SOURCE")
    p.add_argument("--stats", action="store_true", help="print a mount's statistics")
    p.add_argument("--json", action="store_true", help="with --inspect or --stats: print JSON")
    p.add_argument("--version", action="version", version=f"zarrmount {__version__}")
    p.add_argument("--config", metavar="FILE", help="the mount described in a TOML file")
    p.add_argument(
        "--storage-options",
        metavar="JSON",
        help="fsspec options as a JSON object (nested values; credentials: use --config)",
    )
    p.add_argument(
        "--cleanup", action="store_true", help="clear a dead mount left by a killed daemon"
    )
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--options-fd", type=int, help=argparse.SUPPRESS)
    # from _spawn, whose own open found the store unreachable: not asked a second time
    p.add_argument("--unanswered", action="store_true", help=argparse.SUPPRESS)
    return p


def _check_mountpoint(mountpoint: str) -> None:
    cleanup(mountpoint)  # a dead mount a killed daemon left: the next start mounts anew
    if not os.path.isdir(mountpoint):
        raise CommandError(f"mountpoint {mountpoint} is not a directory")
    if os.path.ismount(mountpoint):
        raise CommandError(f"mountpoint {mountpoint} is busy (already mounted)")
    if not os.path.exists("/dev/fuse"):
        raise CommandError("no FUSE: /dev/fuse is missing (modprobe fuse)")


def _open(source: str, options: MountOptions, unanswered: bool = False):
    """The hierarchy at ``source``; every store request has ``options.timeout`` to answer
    (``unanswered``: none, the command found the store unreachable a moment ago)."""
    try:
        commits = (
            None if options.read_only else Commits(options.commit_message, options.on_conflict)
        )
        store = open_store(
            source,
            options.storage_options,
            options.timeout,
            options.client,
            options.version,
            commits,
            tuple(options.virtual_prefixes),
        )
        if not options.read_only and store.read_only_reason:
            # Refused up front: better than accepting writes that can never be stored.
            raise CommandError(
                f"cannot mount {public_url(source)} with -o rw: {store.read_only_reason}"
                " (mount it with -o ro)"
            )
        from zarrmount.assemble import keep_documents

        return _open_kept(keep_documents(store, options), unanswered)
    except (StoreError, hierarchy.SourceError) as e:
        raise CommandError(f"cannot open {public_url(source)}: {e}") from None


def _open_kept(store: Store, unanswered: bool = False):
    """The hierarchy in ``store``; with the store unreachable, as its documents kept on
    disk show it (``-o disk_cache``): a mount comes up through an outage."""
    if unanswered and store.keeps_documents:
        store.unanswered = Unreachable(f"{store.url} gave no answer when the mount began")
    else:
        try:
            return hierarchy.open_hierarchy(store)
        except hierarchy.SourceError as e:
            if not (store.keeps_documents and isinstance(e.__cause__, Unreachable)):
                raise
            log.warning("%s; mounting what the disk cache kept of it", e)
            store.unanswered = e.__cause__
    with offline():
        return hierarchy.open_hierarchy(store)


def _options(args: argparse.Namespace, found: config.MountConfig | None) -> MountOptions:
    """The config file's options, then ``-o`` and ``--storage-options`` over them."""
    if args.options_fd is not None:  # from _spawn: never on a command line (credentials)
        with os.fdopen(args.options_fd, "rb") as pipe:
            return MountOptions.from_json(pipe.read().decode())
    options = found.options if found else MountOptions()
    try:
        for text in args.options:
            options.apply(text)
        if args.storage_options:
            options.storage_options.update(json_object(args.storage_options, "--storage-options"))
    except OptionError as e:
        raise CommandError(str(e)) from None
    if not options.read_only and not options.writable and _run_by_mount():
        # mount(8) passes "rw" unless told "ro": only "writable" means what it says there
        print(
            "zarrmount: mounted read-only: through mount(8) and fstab, read-write needs "
            "-o writable",
            file=sys.stderr,
        )
        options.read_only = True
    return options


def _run_by_mount(levels: int = 4) -> bool:
    """True when mount(8) started us (fstab, ``mount -t fuse.zarrmount``, systemd .mount
    units): it or its fuse helper is among our nearest ancestors."""
    pid = os.getppid()
    for _ in range(levels):
        try:
            with open(f"/proc/{pid}/stat") as f:
                comm, rest = f.read().rsplit(")", 1)
        except OSError:
            return False
        name = comm.partition("(")[2]
        if name == "mount" or name.startswith("mount.fuse"):
            return True
        pid = int(rest.split()[1])
        if pid <= 1:
            return False
    return False


def _serve(source: str, mountpoint: str, options: MountOptions, args) -> int:
    """The daemon: mount and serve in this process until unmounted."""
    from zarrmount.assemble import assemble
    from zarrmount.fuse import session
    from zarrmount.fuse.notify import ReadyPipe
    from zarrmount.process_memory import share_arenas
    from zarrmount.recovery import open_journal

    # a daemon the command spawned runs with -f too, its stderr going nowhere
    foreground = args.foreground and args.ready_fd is None
    where = logs.setup(options, args.debug, foreground, mountpoint)
    log.info(
        "zarrmount %s: mounting %s at %s (log: %s; options: %s)",
        __version__,
        public_url(source),
        mountpoint,
        where,
        options.summary(),
    )
    ready = ReadyPipe(args.ready_fd)
    share_arenas()  # before the first threads
    try:
        _check_mountpoint(mountpoint)
        dialect, root, pipeline = _open(source, options, args.unanswered)
        lock = _lock_writer(dialect.store, mountpoint, options)
        journal = open_journal(options, dialect.store)
    except CommandError as e:
        log.error("%s", e)
        ready.failed(str(e))
        raise
    mount = assemble(dialect, root, pipeline, options, journal)
    del dialect  # the mount's to hold: a reload's successor replaces it (and its documents)
    status = 1
    try:
        status = session.run(mount, source, mountpoint, ready)
        return status
    finally:
        if journal is not None:
            journal.close(stored=status == 0)  # else kept for the next mount to replay
        if lock is not None:
            lock.close()


def _lock_writer(store, mountpoint: str, options: MountOptions) -> object | None:
    """An rw mount holds the store's writer lock: a second writer would overwrite chunks
    under the first one's cache (a lost update)."""
    if options.read_only or options.nolock:
        return None
    holder = f"pid {os.getpid()} on {socket.gethostname()}, mounted at {mountpoint}"
    try:
        return store.lock_writer(holder)
    except (StoreError, OSError) as e:
        raise CommandError(
            f"cannot mount {store.url} read-write: {e} (-o nolock to force)"
        ) from None


def _spawn(source: str, mountpoint: str, options: MountOptions, args) -> int:
    """Start the daemon detached and return once it reports the mount live (or failed)."""
    _check_mountpoint(mountpoint)
    unanswered = _open(source, options)[0].store.unanswered
    if "://" not in source and "::" not in source:
        source = os.path.abspath(source)  # the daemon runs in /
    read_fd, write_fd = os.pipe()
    options_fd, options_w = os.pipe()  # options may hold credentials: not in argv
    cmd = [
        sys.executable,
        "-m",
        "zarrmount",
        source,
        mountpoint,
        "-f",
        "--options-fd",
        str(options_fd),
        "--ready-fd",
        str(write_fd),
    ]
    if args.debug:
        cmd.append("-d")
    if unanswered is not None:
        cmd.append("--unanswered")
    with open(os.devnull, "r+b") as null:
        proc = subprocess.Popen(
            cmd,
            stdin=null,
            stdout=null,
            stderr=null,
            pass_fds=(write_fd, options_fd),
            start_new_session=True,
            cwd="/",
        )
    os.close(write_fd)
    os.close(options_fd)
    # A daemon that died before reading: its status tells why.
    with contextlib.suppress(BrokenPipeError), os.fdopen(options_w, "wb") as pipe:
        pipe.write(options.to_json().encode())
    with os.fdopen(read_fd, "rb") as pipe:
        line = pipe.readline().decode(errors="replace").strip()
    if line == "ok":
        if logs.needs_fallback(options):
            where = logs.fallback_path(mountpoint)
            print(f"zarrmount: no syslog here: the daemon logs to {where}", file=sys.stderr)
        return 0
    if line.startswith("error: "):
        raise CommandError(line[len("error: ") :])
    status = proc.wait()
    raise CommandError(f"the mount daemon exited with status {status} before the mount was live")


def _inspect(source: str, options: MountOptions, as_json: bool) -> int:
    from zarrmount.inspect_tree import inspect

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    dialect, root, _ = _open(source, options)
    dataset = options.dataset_name or dataset_name(source)
    print(inspect(dialect, root, as_json, options.sidecars, dataset))
    return 0


def _stats(mountpoint: str, as_json: bool) -> int:
    from zarrmount.statistics import NotOurs, format_stats, read_stats

    try:
        stats = read_stats(mountpoint)
    except (NotOurs, OSError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(json.dumps(stats, indent=2) if as_json else format_stats(stats))
    return 0


def _config(args: argparse.Namespace) -> config.MountConfig | None:
    if args.config is None:
        return None
    try:
        return config.load(args.config)
    except config.ConfigError as e:
        raise CommandError(str(e)) from None


def _mountpoint(args: argparse.Namespace, found: config.MountConfig | None, what: str) -> str:
    """The one MOUNTPOINT of ``-u``, ``--stats`` and ``--cleanup``, or the config's."""
    if found is not None and not args.args:
        return found.mountpoint
    if found is not None or len(args.args) != 1:
        raise CommandError(f"{what} takes one MOUNTPOINT, or --config FILE")
    return os.path.abspath(args.args[0])


def run(argv: list[str]) -> int:
    """Every subcommand but ``warm`` (``zarrmount.command``)."""
    args = _parser().parse_args(argv)
    found = _config(args)
    if args.inspect:
        if len(args.args) != 1:
            raise CommandError("--inspect takes one SOURCE")
        return _inspect(args.args[0], _options(args, found), args.json)
    if args.stats:
        return _stats(_mountpoint(args, found, "--stats"), args.json)
    if args.unmount:
        return unmount(_mountpoint(args, found, "-u"))
    if args.cleanup:
        return cleanup(_mountpoint(args, found, "--cleanup"))
    if found is not None and not args.args:
        source, mountpoint = found.source, found.mountpoint
    elif len(args.args) == 2 and found is None:
        source, mountpoint = args.args
    else:
        raise CommandError(f"expected SOURCE MOUNTPOINT, or --config FILE; usage: {USAGE}")
    mountpoint = os.path.abspath(mountpoint)
    options = _options(args, found)
    options.dataset_name = options.dataset_name or dataset_name(source)
    if args.foreground or args.ready_fd is not None:
        return _serve(source, mountpoint, options, args)
    return _spawn(source, mountpoint, options, args)
