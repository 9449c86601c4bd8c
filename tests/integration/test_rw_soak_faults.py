"""Soak under faults: the workload of ``test_rw_soak.py`` (concurrent writers, readers and a
shared mmap scanner on rw mounts whose caches are smaller than the data) while store faults
are switched on and off (``user.zarrmount.faults``), across a clean remount and a SIGKILL
of every daemon followed by a restart that replays the crash journal (``-o journal=``).

The workers (``soak.Crew``, tolerant) live through three incarnations of each mount:

1. load with faults; the workers close their files; a clean unmount;
2. load with faults; the workers pause, files open, no write in flight; every daemon is
   SIGKILLed, so the store lacks acknowledged writes;
3. a new daemon on the same store and journal replays them before it is live; load with
   faults; the workers close their files; a clean unmount.

Faults are off at the end of each run. After 1, after the replay of 3 and at the end
zarr-python must read every array equal to the writers' models: no acknowledged byte lost,
to an injected fault or to the kill. A read may fail with EIO and a write be done again
(``soak.py`` says how), but no read may return a wrong byte, no operation take over 30 s,
and no daemon's peak RSS (its high-water mark: the replay included) exceed its cache
budget plus 150 MiB. The arrays are compressed: a corrupt or short chunk fails to decode
(an uncompressed one would be wrong bytes nobody can tell).

``ZARRMOUNT_SOAK_FAULTS_S`` sets the seconds of load (default 45, in three runs); the
figures are printed (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from helpers import mounting, rw_tools, soak
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount

MIB = 1 << 20
HEADROOM = 150 * MIB  # the daemon's memory beyond its cache budget
LOAD_S = float(os.environ.get("ZARRMOUNT_SOAK_FAULTS_S", "45"))
CACHE = 32 * MIB  # below the data of each mount
FAULTS_XATTR = "user.zarrmount.faults"
# Each switched on in turn for ON_S, then all off for OFF_S (see switching).
FAULT_SETS = (
    ("error@0.2",),
    ("delay@0.3/0.05", "short@0.1"),
    ("corrupt@0.1", "write_error@0.5"),
    ("error@0.05", "sync_error@0.5", "write_error@0.2"),
)
ON_S, OFF_S = 2.0, 1.0
# A restart is live once it has replayed the journal: a long soak's may hold many segments.
REPLAY_TIMEOUT = 600.0
REPLAYED = re.compile(
    r"WARNING zarrmount\.recovery: journal \S+: (\d+) acknowledged writes replayed.*, "
    r"(\d+) refused, in ([0-9.]+) s; (.*)"
)
# What the daemon logs of a fault it met: a failed read (the key), write-back or fsync.
FAULT_LINE = re.compile(r"ERROR zarrmount\.array\.failures: |injected")

# Mount name: (writeback delay, {array name: spec}). v3 stores only on pressure, fsync or
# close: its daemon dies with acknowledged writes not stored yet (the test checks).
MOUNTS = {"v2": (2, soak.ARRAYS["v2"]), "v3": (600, soak.ARRAYS["v3"])}


@dataclass
class Daemon:
    """One incarnation of one mount, its RSS sampled."""

    mount: mounting.Mount
    sampler: rw_tools.RssSampler
    hwm_kib: int = 0  # VmHWM when last looked at
    injected: int = 0  # faults its store injected, when last looked at

    def note_peak(self) -> None:
        """Its RSS high-water mark (the journal's replay included, before sampling began)
        and the faults injected so far (while it is alive)."""
        self.injected = self.mount.stats()["store_faults_injected"]
        with contextlib.suppress(OSError), open(f"/proc/{self.mount.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    self.hwm_kib = max(self.hwm_kib, int(line.split()[1]))

    @property
    def peak(self) -> int:
        return max(self.sampler.peak_kib, self.hwm_kib) * 1024


@dataclass
class Tally:
    """The figures of the whole soak."""

    report: soak.Report = field(default_factory=soak.Report)
    runs: int = 0
    switches: int = 0  # fault sets switched on
    logged: int = 0  # faults the daemons logged meeting
    injected: int = 0  # faults the daemons' stores injected
    replayed: int = 0
    peaks: dict[str, int] = field(default_factory=dict)  # bytes, per mount

    def ended(self, name: str, daemon: Daemon) -> None:
        if daemon.mount.alive():
            daemon.note_peak()
        self.injected += daemon.injected
        self.peaks[name] = max(self.peaks.get(name, 0), daemon.peak)
        self.logged += sum(bool(FAULT_LINE.search(x)) for x in daemon.mount.read_log().splitlines())


@contextlib.contextmanager
def incarnation(
    stores: dict, journal: Path, tally: Tally, timeout: float = mounting.MOUNT_TIMEOUT
) -> Iterator[dict[str, Daemon]]:
    """A daemon for every mount of ``MOUNTS`` (each replays its journal before it is
    live), with a fault that never fires so that faults can be switched; torn down."""
    with contextlib.ExitStack() as stack:
        live = {}
        for name, (delay, _arrays) in MOUNTS.items():
            options = [
                f"cache_size={CACHE // 1024}K",
                f"writeback_delay={delay}",
                f"journal={journal}",
                "fault=delay@0",
            ]
            m = stack.enter_context(
                rw_tools.rw_mount(
                    stores[name][0].root, options, tag=f"soakf-{name}", timeout=timeout
                )
            )
            live[name] = Daemon(m, stack.enter_context(rw_tools.RssSampler(m.proc.pid, 0.05)))
            stack.callback(tally.ended, name, live[name])  # before the unmount
        yield live


def paths(stores: dict, live: dict[str, Daemon]) -> dict[str, str]:
    return {s.name: live[name].mount.p(s.name) for name, ss in stores.items() for s in ss}


def set_faults(live: dict[str, Daemon], specs: tuple[str, ...]) -> None:
    for d in live.values():
        os.setxattr(d.mount.path, FAULTS_XATTR, "\n".join(specs).encode())


def switching(live: dict[str, Daemon], tally: Tally) -> Callable[[float], None]:
    """What runs beside the load: each fault set in turn on for ``ON_S`` (at least one,
    shortened to fit a short run), then all off for ``OFF_S``; off at the end, whatever
    happens, while the workers finish."""

    def during(until: float) -> None:
        try:
            while True:
                set_faults(live, FAULT_SETS[tally.switches % len(FAULT_SETS)])
                tally.switches += 1
                time.sleep(max(0.0, min(ON_S, (until - time.monotonic()) / 2)))
                set_faults(live, ())
                if until - time.monotonic() < ON_S + 2 * OFF_S:
                    return
                time.sleep(OFF_S)
        finally:
            set_faults(live, ())

    return during


def load(crew: soak.Crew, stores: dict, live: dict[str, Daemon], tally: Tally, **kw) -> None:
    """The workers (re)open their files on ``live`` and run a third of the load."""
    tally.report.add(crew.open(paths(stores, live), **kw))
    report = crew.run(LOAD_S / 3, switching(live, tally))
    tally.report.add(report)
    tally.runs += 1
    print(
        f"\nrun {tally.runs}: {report.ops} operations, {report.verified / MIB:.0f} MiB verified, "
        f"{report.faulted} EIO tolerated, {len(report.errors)} errors, "
        f"slowest {report.slowest:.2f} s"
    )


def kill(d: Daemon) -> None:
    """SIGKILL the daemon this test started (by its PID) and clear its dead mount."""
    pid = d.mount.proc.pid
    assert int(os.getxattr(d.mount.path, "user.zarrmount.pid")) == pid
    d.note_peak()
    os.kill(pid, signal.SIGKILL)
    assert rw_tools.wait_exit(d.mount.proc, 10) == -signal.SIGKILL
    rw_tools.lazy_unmount_dead(d.mount.path)


def assert_clean_exit(live: dict[str, Daemon]) -> None:
    for name, d in live.items():
        status = d.mount.proc.wait(mounting.UNMOUNT_TIMEOUT)
        assert status == 0, f"{name}: exit status {status}; log:\n{d.mount.read_log()[-3000:]}"


def assert_stores(stores: dict, targets: dict[str, soak.Target], when: str) -> None:
    for ss in stores.values():
        for s in ss:
            try:
                assert_store_equals(s, targets[s.name].model(), when)
            except AssertionError:
                raise
            except Exception as e:  # noqa: BLE001 - a chunk that does not decode: the finding
                raise AssertionError(f"{when}: zarr-python cannot read {s.name}: {e!r}") from e


def lacking(stores: dict, targets: dict[str, soak.Target]) -> set[str]:
    """The mounts whose store lacks acknowledged writes."""
    return {
        name
        for name, ss in stores.items()
        if any(not np.array_equal(s.read_bytes(), targets[s.name].model()) for s in ss)
    }


def assert_replayed(live: dict[str, Daemon], lacked: set[str], tally: Tally) -> None:
    """Each restarted daemon whose store lacked writes replayed some, refused none, and
    stored them before it was live."""
    for name, d in live.items():
        found = REPLAYED.search(d.mount.read_log())
        if name not in lacked and found is None:
            continue
        assert found, f"{name}: no replay logged; log:\n{d.mount.read_log()[-3000:]}"
        applied, refused, state = int(found[1]), int(found[2]), found[4]
        assert applied > 0 and refused == 0 and state == "stored", found[0]
        print(f"{name}: {applied} writes replayed in {found[3]} s")
        tally.replayed += applied


def test_soak_under_faults_with_a_remount_a_sigkill_and_a_restart(tmp_path):
    stores = {
        name: [rw_tools.make_store(tmp_path, a, spec, group=name) for a, spec in arrays.items()]
        for name, (_delay, arrays) in MOUNTS.items()
    }
    targets = {s.name: soak.Target(s.name, s.read_bytes(), 3) for ss in stores.values() for s in ss}
    journal, tally = tmp_path / "journal", Tally()
    with soak.Crew(list(targets.values()), seed=7, tolerant=True) as crew:
        with incarnation(stores, journal, tally) as live:
            load(crew, stores, live, tally)
            tally.report.add(crew.close())
        assert_clean_exit(live)
        assert_stores(stores, targets, "after the clean remount")

        with incarnation(stores, journal, tally) as live:
            load(crew, stores, live, tally)
            for d in live.values():
                kill(d)
        lacked = lacking(stores, targets)
        assert lacked, "every write was stored before the kill: the replay goes untested"
        print(f"killed: the stores of {sorted(lacked)} lack acknowledged writes")

        with incarnation(stores, journal, tally, REPLAY_TIMEOUT) as live:
            assert_replayed(live, lacked, tally)
            assert_stores(stores, targets, "after the restart replayed the journal")
            load(crew, stores, live, tally, dead=True)
            tally.report.add(crew.close())
        assert_clean_exit(live)
    print_figures(tally)
    assert_stores(stores, targets, "at the end")
    assert not list(journal.iterdir()), f"journals left: {list(journal.iterdir())}"
    assert_soak_held(tally)


def print_figures(tally: Tally) -> None:
    total = tally.report
    print(
        f"soak under faults: {total.ops} operations, {total.verified / MIB:.0f} MiB verified, "
        f"{tally.switches} fault sets switched on, {tally.injected} faults injected "
        f"({tally.logged} logged by the daemons), {total.faulted} EIO tolerated by the "
        f"workers, {tally.replayed} writes replayed, slowest {total.slowest:.2f} s"
    )
    for name, peak in tally.peaks.items():
        print(f"daemon {name}: peak RSS {peak / MIB:.0f} MiB, cache_size {CACHE / MIB:.0f} MiB")


def assert_soak_held(tally: Tally) -> None:
    total = tally.report
    assert not total.errors, f"{len(total.errors)} operations failed: {total.errors[:10]}"
    assert total.slowest < soak.SLOW_S, f"an operation took {total.slowest:.1f} s"
    assert total.verified > 0
    assert tally.injected > 0 and total.faulted > 0, "no fault was met: nothing was tested"
    for name, peak in tally.peaks.items():
        assert peak <= CACHE + HEADROOM, f"{name}: peak RSS {peak / MIB:.0f} MiB"
