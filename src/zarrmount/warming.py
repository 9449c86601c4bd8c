"""``zarrmount warm MNT/PATH...``: the arrays at and below each path of a mount of a
remote store fetched into that mount's disk cache, so a batch job then reads them at
local speed, and through an outage.

The daemon does the work (``array/warm.py``), asked by a read of the path's
``user.zarrmount.warm`` attribute (only root and the mount's owner may ask; a read, as
the kernel sets no attribute on a read-only mount), and only a mount this user's daemon
serves is asked: a tool run as root trusts no filesystem it did not start. This side
polls the progress (the root's ``user.zarrmount.warm_progress``), draws it on a
terminal, and exits 0 only when every stored unit was fetched (or was on disk already).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

from zarrmount.controls import WARM_PROGRESS_XATTR, WARM_XATTR
from zarrmount.errors import CommandError
from zarrmount.fuse import records

POLL_S = 0.2  # between two looks at the progress, at most
FIRST_POLL_S = 0.01  # between two looks, at least: a job of a few chunks is over at once
LATE_SHARE = 0.02  # a job's end is seen at most this share of its time late
BAR_WIDTH = 30


@dataclass
class Totals:
    """The progress of the jobs of all the mounts named, added up."""

    arrays: int = 0
    units: int = 0
    done: int = 0
    held: int = 0
    bytes: int = 0
    failures: int = 0
    failed: list[str] = field(default_factory=list)
    finished: bool = True

    def add(self, report: dict) -> None:
        for name in ("arrays", "units", "done", "held", "bytes", "failures"):
            setattr(self, name, getattr(self, name) + int(report.get(name, 0)))
        self.failed += report.get("failed", [])
        self.finished = self.finished and bool(report.get("finished"))


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    power = min(int(math.log(n, 1024)), 3)
    return f"{n / 1024**power:.1f} {('B', 'KiB', 'MiB', 'GiB')[power]}"


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds + 0.5), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}:{m:02d}:{s:02d}" if hours else f"{m}:{s:02d}"


def bar(totals: Totals, elapsed: float) -> str:
    """One line of progress: units done of those listed, bytes, rate, time left."""
    share = totals.done / totals.units if totals.units else 0.0
    filled = int(share * BAR_WIDTH)
    rate = totals.bytes / elapsed if elapsed > 0 else 0.0
    if 0 < totals.done < totals.units:
        left = _duration(elapsed * (totals.units - totals.done) / totals.done) + " left"
    else:
        left = "--:-- left"
    return (
        f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {share:4.0%} "
        f"{totals.done}/{totals.units} units  {_size(totals.bytes)}  {_size(rate)}/s  {left}"
    )


def summary(totals: Totals, elapsed: float) -> str:
    """The one line said at the end."""
    rate = totals.bytes / elapsed if elapsed > 0 else 0.0
    failed = f"; {totals.failures} failed" if totals.failures else ""
    return (
        f"warmed {totals.arrays} arrays: {totals.done - totals.failures} of {totals.units} "
        f"units on disk ({totals.held} there already), {_size(totals.bytes)} fetched in "
        f"{_duration(elapsed)} ({_size(rate)}/s){failed}"
    )


def _mount_of(path: str) -> tuple[str, str]:
    """The mountpoint ``path`` lies on, and ``path`` resolved; CommandError unless a
    zarrmount daemon of this user serves it."""
    full = os.path.realpath(path)
    if not os.path.exists(full):
        raise CommandError(f"{path}: no such file or directory")
    mountpoint = full
    while not os.path.ismount(mountpoint):
        mountpoint = os.path.dirname(mountpoint)
    if records.find_daemon(mountpoint) is None:
        raise CommandError(f"{path}: not on a zarrmount mount of this user's daemon")
    return mountpoint, full


def _report(mountpoint: str) -> dict:
    try:
        return json.loads(os.getxattr(mountpoint, WARM_PROGRESS_XATTR))
    except (OSError, ValueError) as e:
        raise CommandError(f"{mountpoint}: cannot read the warm job's progress: {e}") from None


def _start(mountpoint: str, path: str) -> None:
    """Ask for ``path`` (a new job, or one under way that it joins)."""
    refused = _report(mountpoint).get("refused")
    if refused:
        raise CommandError(f"{mountpoint}: nothing to warm: {refused}")
    try:
        os.getxattr(path, WARM_XATTR)
    except OSError as e:
        raise CommandError(f"{path}: cannot warm it: {e.strerror}") from None


def _wait(mountpoints: list[str], started: float, tty: bool) -> Totals:
    while True:
        totals = Totals()
        for mountpoint in mountpoints:
            totals.add(_report(mountpoint))
        if tty:
            print("\r" + bar(totals, time.monotonic() - started), end="", flush=True)
        if totals.finished:
            if tty:
                print()
            return totals
        late = (time.monotonic() - started) * LATE_SHARE
        time.sleep(min(POLL_S, max(FIRST_POLL_S, late)))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="zarrmount warm",
        description="Fetch every chunk of the arrays at and below each PATH of a mount of a "
        "remote store into the mount's disk cache (-o disk_cache=DIR), many at once: later "
        "reads are at local speed, and go on through an outage of the store. Exits 0 when "
        "all were fetched, 1 naming what was not.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="an array file or a directory")
    return p


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    found = [_mount_of(path) for path in args.paths]
    started = time.monotonic()
    for mountpoint, path in found:
        _start(mountpoint, path)
    totals = _wait(sorted({m for m, _ in found}), started, sys.stdout.isatty())
    print(summary(totals, time.monotonic() - started))
    for failure in totals.failed:
        print(f"zarrmount: not fetched: {failure}", file=sys.stderr)
    if totals.failures > len(totals.failed):
        print(f"zarrmount: and {totals.failures - len(totals.failed)} more", file=sys.stderr)
    return 1 if totals.failures else 0
