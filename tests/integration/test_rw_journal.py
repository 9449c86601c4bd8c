"""The crash journal: a write acknowledged by ``write`` (no fsync, no close) survives a
SIGKILL of the daemon, applied by the next mount before it serves; damaged entries, and
entries for an array that changed, are refused whole with a log line; a journal is
deleted once what it holds is stored, and never lost while the store cannot take it.

zarr-python reads the store for every expected value; only daemons these tests started
are signalled, by their PIDs.
"""

from __future__ import annotations

import contextlib
import glob
import os

import numpy as np
import pytest
import zarr
from helpers import mounting, rw_tools
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount

MIB = 1 << 20


def _write_some(fd: int, model: np.ndarray, rng: np.random.Generator, count: int) -> None:
    """``count`` random pwrites of up to 3000 bytes; the model follows."""
    for _ in range(count):
        n = int(rng.integers(1, min(3000, model.size)))
        off = int(rng.integers(0, model.size - n + 1))
        data = rng.integers(0, 256, n, dtype=np.uint8)
        rw_tools.pwrite_all(fd, data.tobytes(), off)
        model[off : off + n] = data


def _killed_after(store: rw_tools.Store, options: list[str], tag: str):
    return rw_tools.killed_after(store, store.name, options, tag)


def _segments(journal_root) -> list[str]:
    return sorted(glob.glob(os.path.join(journal_root, "*", "*.zj")))


@pytest.mark.parametrize(
    ("name", "options"),
    [("v2f", []), ("sharded", []), ("v3", ["byteorder=big"])],
    ids=["v2", "sharded", "v3-shown-big-endian"],
)
def test_sigkill_after_an_acknowledged_unsynced_write_loses_nothing(tmp_path, name, options):
    journal = str(tmp_path / "journal")
    store, model, rng = rw_tools.seeded_store(tmp_path, name, 21)
    before = model.copy()
    shown = np.dtype(store.dtype()).newbyteorder(">") if options else store.dtype()
    with _killed_after(store, [f"journal={journal}", *options], "jkill") as (_m, fd):
        values = model.view(store.dtype()).astype(shown).view(np.uint8)  # what the file shows
        _write_some(fd, values, rng, 40)
        model[:] = values.view(shown).astype(store.dtype()).view(np.uint8)
    assert_store_equals(store, before, "killed: nothing stored yet")
    assert _segments(journal)
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jreplay") as m:
        assert m.wait_for_log("acknowledged writes replayed"), m.read_log()
        assert_store_equals(store, model, "replayed before the mount went live")
        assert not _segments(journal)  # stored: the journal went
    assert_store_equals(store, model, "after unmount")
    assert not os.listdir(journal)


def test_the_default_journal_is_in_the_cache_directory_and_goes_at_unmount(tmp_path):
    store, model, rng = rw_tools.seeded_store(tmp_path, "v3", 22)
    root = "/var/cache/zarrmount/journal"
    ours = set()
    with rw_tools.rw_mount(store, ["writeback_delay=600"], tag="jdefault") as m:
        fd = os.open(m.p("v3"), os.O_RDWR)
        try:
            _write_some(fd, model, rng, 5)
            for directory in glob.glob(os.path.join(root, "*")):
                with contextlib.suppress(OSError), open(os.path.join(directory, "store")) as f:
                    if f.read().strip() == store.root:
                        ours.add(directory)
            assert len(ours) == 1, os.listdir(root)
            (directory,) = ours
            assert os.stat(directory).st_mode & 0o777 == 0o700  # it holds written data
            assert glob.glob(os.path.join(directory, "*.zj"))
        finally:
            os.close(fd)
    assert_store_equals(store, model)
    assert not os.path.exists(directory)


def _damage(segment: str) -> None:
    """Flip a byte inside the second entry's data and cut the last entry short."""
    from zarrmount.journal import Entry, scan  # where the entries are, not what they hold
    from zarrmount.journal.records import SEGMENT

    with open(segment, "rb") as f:
        content = f.read()
        f.seek(SEGMENT.size)  # after the (new) segment's header
        spans = [(e.start, e.end) for e in scan(f, len(content)) if isinstance(e, Entry)]
    damaged = bytearray(content)
    damaged[spans[1][1] - 1] ^= 0x40
    with open(segment, "wb") as f:
        f.write(damaged[: spans[-1][1] - 3])


def test_damaged_and_cut_entries_are_refused_whole_and_kept(tmp_path):
    journal = str(tmp_path / "journal")
    store, model, _rng = rw_tools.seeded_store(tmp_path, "v2f", 23)
    expected = model.copy()
    writes = [(0, 10), (100, 20), (300, 30), (1000, 40)]  # offset, length
    with _killed_after(store, [f"journal={journal}"], "jdamage") as (_m, fd):
        for i, (off, n) in enumerate(writes):
            rw_tools.pwrite_all(fd, bytes([i + 1]) * n, off)
    (segment,) = _segments(journal)
    _damage(segment)
    for i in (0, 2):  # the whole ones; 1 (damaged) and 3 (cut) are refused, not half-applied
        off, n = writes[i]
        expected[off : off + n] = i + 1
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jdamaged") as m:
        assert m.wait_for_log("2 refused"), m.read_log()
        log = m.read_log()
        assert "checksum or lengths do not match" in log and "a truncated entry" in log
    assert_store_equals(store, expected, "whole entries applied, refused ones not at all")
    (kept,) = glob.glob(os.path.join(journal, "*", "refused-*"))
    assert os.path.getsize(kept) > 30 + 40 - 3  # both refused entries' bytes, for a person


def test_an_entry_for_an_array_that_changed_is_refused(tmp_path):
    journal = str(tmp_path / "journal")
    store, model, rng = rw_tools.seeded_store(tmp_path, "v3", 24)
    with _killed_after(store, [f"journal={journal}"], "jchanged") as (_m, fd):
        _write_some(fd, model, rng, 3)
    arr = store.open()
    changed = zarr.create_array(  # same name, another shape: the entries no longer fit
        store.root, name=store.name, shape=(10, 10), chunks=(5, 5), dtype=arr.dtype, overwrite=True
    )
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jchanged2") as m:
        assert m.wait_for_log("3 refused"), m.read_log()
        assert f"{store.name} is <u2[10, 10] now, not <u2[83, 59]" in m.read_log()
    assert not changed[...].any()


def test_a_store_that_cannot_take_the_replay_keeps_the_journal(tmp_path):
    """Entries replayed while every store write fails stay in the journal (and dirty in
    the cache) through an unmount that fails; the next mount stores them."""
    journal = str(tmp_path / "journal")
    store, model, rng = rw_tools.seeded_store(tmp_path, "sharded", 25)
    with _killed_after(store, [f"journal={journal}"], "jnostore") as (_m, fd):
        _write_some(fd, model, rng, 20)
    failing = [f"journal={journal}", "fault=write_error"]
    with rw_tools.rw_mount(store, failing, tag="jnostore2") as m:
        assert m.wait_for_log("not stored yet"), m.read_log()
        assert mounting.run_cli(["-u", m.path], timeout=60).returncode == 0
        assert rw_tools.wait_exit(m.proc, 60) == 2  # dirty data could not be stored
    assert _segments(journal)
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jnostore3") as m:
        assert m.wait_for_log("acknowledged writes replayed"), m.read_log()
    assert_store_equals(store, model)
    assert not _segments(journal)


def test_a_replay_that_cannot_read_fails_the_mount_and_keeps_the_journal(tmp_path):
    journal = str(tmp_path / "journal")
    store, model, rng = rw_tools.seeded_store(tmp_path, "v2f", 26)
    with _killed_after(store, [f"journal={journal}"], "jnoread") as (_m, fd):
        _write_some(fd, model, rng, 20)
    failing = [f"journal={journal}", "fault=error"]
    with (
        pytest.raises(mounting.MountFailed, match="cannot apply the journal"),
        rw_tools.rw_mount(store, failing, tag="jnoread2"),
    ):
        pass
    assert _segments(journal)
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jnoread3"):
        pass
    assert_store_equals(store, model)


def test_full_segments_go_once_stored_while_the_mount_writes_on(tmp_path):
    """64 MiB segments: 150 MiB written in one stream leaves at most the active one and
    one sealed segment waiting for its checkpoint."""
    journal = str(tmp_path / "journal")
    spec = rw_tools.v2_spec((150, MIB // 4), (10, MIB // 4), "<i4")
    store = rw_tools.make_store(tmp_path, "big", spec, initial="none")
    data = np.random.default_rng(27).integers(0, 256, 150 * MIB, dtype=np.uint8)
    with rw_tools.rw_mount(store, [f"journal={journal}", "cache_size=64M"], tag="jbig") as m:
        fd = os.open(m.p("big"), os.O_WRONLY)
        try:
            for off in range(0, data.size, MIB):
                rw_tools.pwrite_all(fd, data[off : off + MIB].tobytes(), off)
            assert m.stats()["journal_bytes"] == data.size
            os.fsync(fd)
            assert mounting.wait_until(lambda: len(_segments(journal)) <= 1, 60), _segments(journal)
        finally:
            os.close(fd)
    assert_store_equals(store, data)
    assert not os.listdir(journal)


def test_a_journal_in_use_refuses_a_second_writer(tmp_path):
    store = rw_tools.make_store(tmp_path, "v3", rw_tools.SPECS["v3"])
    journal = f"journal={tmp_path / 'journal'}"
    with (
        rw_tools.rw_mount(store, [journal], tag="juse1"),
        pytest.raises(mounting.MountFailed, match="in use by another mount"),
        rw_tools.rw_mount(store, [journal, "nolock"], tag="juse2"),
    ):
        pass


def test_a_store_reached_through_a_symlink_has_the_same_journal(tmp_path):
    journal = str(tmp_path / "journal")
    store, model, rng = rw_tools.seeded_store(tmp_path, "v3", 28)
    link = tmp_path / "link.zarr"
    link.symlink_to(store.root)
    linked = rw_tools.Store(str(link), "v3")
    with _killed_after(linked, [f"journal={journal}"], "jlink") as (_m, fd):
        _write_some(fd, model, rng, 5)
    with rw_tools.rw_mount(store, [f"journal={journal}"], tag="jlink2") as m:
        assert m.wait_for_log("acknowledged writes replayed"), m.read_log()
    assert_store_equals(store, model)


def _replay_peak(tmp_path, mib: int) -> int:
    """The VmHWM of a daemon (an 8 MiB cache) that replayed ``mib`` MiB of 1 MiB writes a
    killed daemon left in one segment; zarr-python reads them in the store."""
    journal = str(tmp_path / f"journal{mib}")
    spec = rw_tools.v2_spec((mib, MIB // 4), (1, MIB // 4), "<i4")
    store = rw_tools.make_store(tmp_path, f"big{mib}", spec, initial="none")
    data = np.random.default_rng(mib).integers(0, 256, mib * MIB, dtype=np.uint8)
    with _killed_after(store, [f"journal={journal}", "cache_size=256M"], "jpeak") as (_m, fd):
        for off in reversed(range(0, data.size, MIB)):  # no sequential writer: none stored
            rw_tools.pwrite_all(fd, data[off : off + MIB].tobytes(), off)
    assert len(_segments(journal)) == 1
    with rw_tools.rw_mount(store, [f"journal={journal}", "cache_size=8M"], tag="jpeak2") as m:
        assert m.wait_for_log("acknowledged writes replayed"), m.read_log()
        peak = mounting.process_memory(m.proc.pid)
    assert_store_equals(store, data)
    return peak


def test_a_replay_holds_one_entry_not_its_segment(tmp_path):
    """A segment near full (60 MiB) is read one entry at a time: the replaying daemon's
    peak resident set is that of one replaying 16 MiB (both fill the cache), not the 44 MiB
    more a segment read whole costs."""
    small, full = _replay_peak(tmp_path, 16), _replay_peak(tmp_path, 60)
    assert full - small < 20 * MIB, f"VmHWM {small / MIB:.1f} MiB (16), {full / MIB:.1f} MiB (60)"
