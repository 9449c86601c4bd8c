"""The soak case of scripts/bench --more (``--cases soak``, issue #32): the write rate of
the rw soak workload on this tree's daemon against an older commit's, in the same run.

The workload is the soak test's (tests/helpers/soak.py): per array three writers, a reader
and an mmap scanner, a v2 and a v3 mount with 32 MiB caches, for ``--soak-s`` seconds. The
older commit (``--rev``, by default b7d3cc5, before issue #32's false-EIO fix) is
extracted under .bench/rev-REV/ and its daemon run by this venv's interpreter with that
source first on ``PYTHONPATH``; both run on fresh stores made the same way, alternating
(this tree first in even repetitions, the older one first in odd ones), with the same
seeds. Each run prints the writes acknowledged, the operations that failed (a false EIO
is one: nothing injects faults here), the slowest pwrite; zarr-python checks every store
against the writers' models afterwards. Target: this tree's median writes at least the
older commit's, and no failed operation.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

import _bench_sys as b

sys.path.insert(0, str(b.ROOT / "tests"))
from helpers import mounting, soak  # noqa: E402

CACHE = 32 * soak.MIB
MAIN = "main"


def _old_source(work: Path, rev: str) -> tuple[str, Path]:
    """The short name of ``rev`` and its ``src`` directory, extracted once under ``work``."""
    short = _git("rev-parse", "--short=7", f"{rev}^{{commit}}")
    dest = work / f"rev-{short}"
    if not (dest / "src").is_dir():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(b.ROOT), "archive", short, "src"], capture_output=True, check=True
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, filter="data")
    return short, dest / "src"


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(b.ROOT), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise b.BenchError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def _daemon_of(src: Path) -> dict:
    """Mount arguments that run the daemon from ``src`` (checked: that is what Python
    imports with it first on the path); no -o sidecars, which older versions lack."""
    env = ["env", f"PYTHONPATH={src}"]
    found = subprocess.run(
        [*env, sys.executable, "-c", "import zarrmount; print(zarrmount.__file__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not found.startswith(str(src)):
        raise b.BenchError(f"the old source is not the one imported ({found!r})")
    return {"wrapper": env, "sidecars": None}


def _run(work: Path, seconds: float, daemon: dict) -> soak.Report:
    """The workload on fresh stores for ``seconds``; zarr-python checks them after."""
    parent = work / "soak"
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir()
    mounts = soak.mounts(CACHE)
    stores = soak.make_stores(parent, mounts)
    try:
        report, _peaks = soak.run_mounts(mounts, stores, 1, seconds, daemon, writers=3)
    except AssertionError as e:
        raise b.BenchError(f"soak: {e}") from e
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return report


def _line(name: str, r: soak.Report) -> str:
    eio = sum(os.strerror(errno.EIO) in e for e in r.errors)
    return (
        f"{name:<8} writes {_writes(r):6d}  failed {len(r.errors)} (EIO {eio})  "
        f"slowest pwrite {r.slowest_of.get('pwrite', 0.0):5.2f} s  operations {r.ops}"
    )


def run(args, work: Path) -> list[str]:
    short, src = _old_source(work, args.rev)
    logs = work / "soak-logs"  # the daemons' logs of this run only
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    mounting.LOG_DIR = str(logs)
    variants = {MAIN: {}, short: _daemon_of(src)}
    reports: dict[str, list[soak.Report]] = {v: [] for v in variants}
    for rep in range(args.reps):
        order = list(variants) if rep % 2 == 0 else list(variants)[::-1]
        for name in order:
            reports[name].append(_run(work, args.soak_s, variants[name]))
            b.log(f"  {rep + 1}/{args.reps} {_line(name, reports[name][-1])}")
            for e in reports[name][-1].errors[:3]:
                b.log(f"      {e}")
    writes = {v: statistics.median(_writes(r) for r in rs) for v, rs in reports.items()}
    failed = {v: sum(len(r.errors) for r in rs) for v, rs in reports.items()}
    ok = writes[MAIN] >= writes[short] and failed[MAIN] == 0
    lines = [f"soak, {args.soak_s:.0f} s runs (3 writers, a reader and a scanner per array)"]
    for v, rs in reports.items():
        slowest = max(r.slowest_of.get("pwrite", 0.0) for r in rs)
        lines.append(
            f"  {v:<8} median writes {writes[v]:6.0f}  failed operations {failed[v]}  "
            f"slowest pwrite {slowest:.2f} s"
        )
    ratio = writes[MAIN] / max(writes[short], 1)
    lines.append(f"  {'ok  ' if ok else 'MISS'} writes {MAIN}/{short} {ratio:.2f}x")
    return lines


def _writes(r: soak.Report) -> int:
    return r.done.get("pwrite", 0)
