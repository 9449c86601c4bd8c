"""A write the journal refuses is not applied: the call fails (or is short, for the part
accepted) and the array shows, through the mount, in zarr-python after unmount and
through a fresh mount, exactly what the calls reported written. The journal lives on a
small tmpfs that fills up, on an ext4 whose disk fails (read-only at once, the open
segment included), or in a directory deleted while mounted; the store on ordinary disk
takes every write-back.

Expected values: a NumPy model of what each ``pwrite`` reported written over the zeros
zarr-python reads before, and zarr-python reading the store.
"""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest
from helpers import mounting, rw_tools
from helpers.rw_tools import assert_store_equals

pytestmark = pytest.mark.mount

MIB = 1 << 20
SLICES = 64
SEVENS = b"\x07" * MIB
# dirty data never reaches its limit, nothing is stored before fsync: no checkpoint
# empties the journal while the test fills it
HOLD = ["writeback_delay=600", "cache_size=256M"]


def _zeros(parent, name: str, length: int, chunk: int) -> rw_tools.Store:
    """A v3 ``u1`` array of ``length`` zeros in chunks of ``chunk`` (none stored)."""
    spec = rw_tools.v3_spec((length // chunk, chunk), (1, chunk), "u1")
    return rw_tools.make_store(parent, name, spec, initial="none")


def _pwrite(fd: int, model: np.ndarray, data: bytes, offset: int) -> int | None:
    """One ``pwrite``; the model takes the bytes it reported written. Its errno, if any."""
    try:
        done = os.pwrite(fd, data, offset)
    except OSError as e:
        return e.errno
    model[offset : offset + done] = np.frombuffer(data[:done], np.uint8)
    return None


def _sevens(fd: int, model: np.ndarray, slices: range) -> list[int]:
    """A ``pwrite`` of 1 MiB of 7 into each slice; the errnos of those that failed."""
    found = (_pwrite(fd, model, SEVENS, i * MIB) for i in slices)
    return [e for e in found if e is not None]


def _assert_reads(path: str, model: np.ndarray, what: str) -> None:
    with open(path, "rb") as f:
        rw_tools.assert_bytes_match(f.read(), model, 0, what)


def _assert_stored(store: rw_tools.Store, model: np.ndarray) -> None:
    """zarr-python reads the model in the store, and so does a fresh mount of it."""
    assert_store_equals(store, model, "after unmount")
    with mounting.mounted(store.root, [], tag="refused-again") as m:
        _assert_reads(m.p(store.name), model, "through a fresh mount")


def _refused_once(m: mounting.Mount, refused: int) -> None:
    """``--stats`` counts every refused write; the log has one line for them all."""
    assert m.stats()["writes_refused"] == refused, m.stats()
    assert m.read_log().count("bytes refused") == 1, m.read_log()


def test_writes_a_full_journal_refuses_leave_their_slices_as_they_were(tmp_path):
    """The issue's case: 64 pwrites of 1 MiB, the journal on an 8 MiB tmpfs."""
    store = _zeros(tmp_path, "slices", SLICES * MIB, MIB)
    model = np.zeros(SLICES * MIB, np.uint8)
    with (
        rw_tools.tmpfs("8m", tag="jfull") as journal,
        rw_tools.rw_mount(store, [f"journal={journal}", *HOLD], tag="jfull") as m,
    ):
        fd = os.open(m.p(store.name), os.O_RDWR)
        try:
            errors = _sevens(fd, model, range(SLICES))
            os.fsync(fd)
        finally:
            os.close(fd)
        assert 0 < len(errors) < SLICES and set(errors) == {errno.ENOSPC}, errors
        _assert_reads(m.p(store.name), model, "through the mount")
        _refused_once(m, len(errors))
    assert f"{len(errors) - 1} more writes refused" in m.read_log(), m.read_log()
    _assert_stored(store, model)


def _broken_after_16(store: rw_tools.Store, m: mounting.Mount, breaking) -> np.ndarray:
    """16 slices written, then ``breaking()`` the journal: the other 48 pwrites fail with
    EIO, none applied, through the mount and once unmounted."""
    model = np.zeros(SLICES * MIB, np.uint8)
    fd = os.open(m.p(store.name), os.O_RDWR)
    try:
        assert not _sevens(fd, model, range(16))
        breaking()
        errors = _sevens(fd, model, range(16, SLICES))
        os.fsync(fd)
    finally:
        os.close(fd)
    assert len(errors) == SLICES - 16 and set(errors) == {errno.EIO}, errors
    _assert_reads(m.p(store.name), model, "through the mount")
    _refused_once(m, len(errors))
    return model


@pytest.mark.skipif(not os.path.exists("/sys/fs/ext4"), reason="no ext4 here")
def test_writes_a_journal_turned_read_only_refuses_leave_their_slices_as_they_were(tmp_path):
    """The journal's disk fails after 16 slices: the other 48 pwrites fail, none applied."""
    store = _zeros(tmp_path, "slices", SLICES * MIB, MIB)
    with (
        rw_tools.failing_ext4(48, tag="jro") as journal,
        rw_tools.rw_mount(store, [f"journal={journal}", *HOLD], tag="jro") as m,
    ):
        if rw_tools.disk_error_trigger(journal) is None:
            pytest.skip("this kernel cannot report an ext4 error on request")
        model = _broken_after_16(store, m, lambda: rw_tools.fail_disk(journal))
    _assert_stored(store, model)


def test_writes_after_the_journal_was_removed_are_refused_and_leave_their_slices(tmp_path):
    """The journal's directory deleted after 16 slices (a cleaner of temporary files): the
    open segment is gone with it, so no later write is acknowledged, none applied."""
    store = _zeros(tmp_path, "slices", SLICES * MIB, MIB)
    journal = tmp_path / "journal"
    with rw_tools.rw_mount(store, [f"journal={journal}", *HOLD], tag="jgone") as m:
        model = _broken_after_16(store, m, lambda: shutil.rmtree(journal))
    _assert_stored(store, model)


def test_a_write_over_two_chunks_where_only_the_first_fits_says_what_it_wrote(tmp_path):
    """Room in the journal for the first chunk's half of a 1 MiB write, not the second's:
    the call writes that half (the kernel hands the write over in parts) or fails whole,
    and the array says the same."""
    half = MIB // 2
    store = _zeros(tmp_path, "halves", 4 * half, half)
    model = np.zeros(4 * half, np.uint8)
    data = np.random.default_rng(42).integers(1, 256, MIB, dtype=np.uint8).tobytes()
    with (
        rw_tools.tmpfs("2m", tag="jhalf") as journal,
        rw_tools.rw_mount(store, [f"journal={journal}", *HOLD], tag="jhalf") as m,
    ):
        filler = rw_tools.fill_filesystem(journal)
        os.truncate(filler, os.path.getsize(filler) - (half + half // 8))
        fd = os.open(m.p(store.name), os.O_RDWR)
        try:
            error = _pwrite(fd, model, data, half)  # chunks 1 and 2
            os.fsync(fd)
        finally:
            os.close(fd)
        written = model[half : 3 * half]
        assert error == errno.ENOSPC or written[half:].tobytes() == bytes(half), error
        assert error is not None or written[:half].tobytes() == data[:half]
        _assert_reads(m.p(store.name), model, "through the mount")
        _refused_once(m, 1)
    _assert_stored(store, model)
