"""Randomized read-write sessions on real mounts against a NumPy model of the file's bytes.

Each run is a seeded sequence of epochs; an epoch is one mount (``-o rw,...``) running
random operations:

* ``pwrite`` at random offsets and sizes (1 byte to half the file, unaligned, crossing chunk
  and shard boundaries), through the page cache or with O_DIRECT (one request across many
  chunks), sometimes with the fill value so that chunks become empty and are deleted;
* writes through a shared writable ``mmap`` (then ``msync``);
* ``pread`` of random ranges (page cache, page cache dropped, or O_DIRECT), compared with
  the model;
* ``fsync``/``fdatasync`` (then zarr-python must read the store equal to the model: an fsync
  stores every dirty chunk of the file), close and reopen.

The epoch ends with a full unmount; zarr-python then reads the store, which must equal the
model, and the next epoch starts with a fresh mount. Reproduce a failure with the seed
printed in the message (``ZARRMOUNT_RW_SEED=...``).
"""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest
from helpers import rw_tools
from helpers.rw_tools import SPECS, assert_bytes_match, assert_store_equals

pytestmark = pytest.mark.mount

BASE_SEED = int(os.environ.get("ZARRMOUNT_RW_SEED", "20250611"))
EPOCHS = 5
STEPS = (35, 70)

# Mount options per array: each run stresses a different write-back trigger as well.
CASES = {
    # idle write-back every 0.1 s, racing with the writes
    "v2f": ["writeback_delay=0"],
    # a 2 KiB cache: write-back under pressure and eviction nearly every write
    "v3": ["cache_size=2K"],
    # defaults (5 s idle write-back): most data goes out on fsync, close and unmount
    "sharded": [],
}


class Session:
    """The open file descriptors of one epoch and the operations applied so far."""

    def __init__(self, path: str, size: int, model: np.ndarray, fill: bytes, rng, history):
        self.path = path
        self.size = size
        self.model = model
        self.fill = fill
        self.rng = rng
        self.history = history
        self.fd = -1
        self.dfd = -1
        self.open()

    def open(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR)
        self.dfd = os.open(self.path, os.O_RDWR | os.O_DIRECT)

    def close(self) -> None:
        for fd in (self.fd, self.dfd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.dfd = -1

    # -- random choices --------------------------------------------------------------

    def _extent(self) -> tuple[int, int]:
        rng, size = self.rng, self.size
        kind = rng.random()
        if kind < 0.45:
            n = int(rng.integers(1, 17))
        elif kind < 0.85:
            n = int(rng.integers(17, 2049))
        else:
            n = int(rng.integers(2049, size // 2 + 2))
        n = min(n, size)
        off = int(rng.integers(0, size - n + 1))
        return off, n

    def _data(self, off: int, n: int) -> np.ndarray:
        if self.rng.random() < 0.2:  # the fill value, in phase with the elements
            isz = len(self.fill)
            reps = (off % isz + n) // isz + 2
            pattern = np.frombuffer(self.fill * reps, np.uint8)
            return pattern[off % isz : off % isz + n].copy()
        return self.rng.integers(0, 256, n, dtype=np.uint8)

    # -- operations --------------------------------------------------------------------

    def write(self) -> None:
        off, n = self._extent()
        data = self._data(off, n)
        direct = self.rng.random() < 0.3
        self.history.append(f"pwrite{' O_DIRECT' if direct else ''} off={off} n={n}")
        rw_tools.pwrite_all(self.dfd if direct else self.fd, data.tobytes(), off)
        self.model[off : off + n] = data

    def mmap_write(self) -> None:
        off, n = self._extent()
        n = min(n, 4096)
        data = self._data(off, n)
        self.history.append(f"mmap write off={off} n={n} + msync")
        with mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as m:
            m[off : off + n] = data.tobytes()
            m.flush()
        self.model[off : off + n] = data

    def read(self) -> None:
        if self.rng.random() < 0.1:
            off, n = 0, self.size
        else:
            off, n = self._extent()
        how = self.rng.choice(["cache", "dropped", "direct"])
        self.history.append(f"pread {how} off={off} n={n}")
        if how == "dropped":
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        got = rw_tools.pread_all(self.dfd if how == "direct" else self.fd, n, off)
        assert_bytes_match(got, self.model[off : off + n], off, f"pread ({how})")

    def fsync(self, store: rw_tools.Store) -> None:
        datasync = self.rng.random() < 0.5
        fd = self.fd if self.rng.random() < 0.5 else self.dfd
        self.history.append("fdatasync" if datasync else "fsync")
        (os.fdatasync if datasync else os.fsync)(fd)
        if self.rng.random() < 0.4:  # (zarr-python reads of the whole store take a while)
            self.history.append("zarr-python reads the store")
            assert_store_equals(store, self.model, "right after fsync")

    def reopen(self) -> None:
        self.history.append("close + reopen")
        self.close()
        self.open()


def run_session(tmp_path, name: str, options: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    store = rw_tools.make_store(tmp_path, name, SPECS[name], rng=rng)
    model = store.read_bytes()
    size = model.size
    fill = store.fill_bytes()
    history: list[str] = []
    try:
        for epoch in range(EPOCHS):
            history.append(f"--- epoch {epoch}: mount -o rw,{','.join(options)}")
            with rw_tools.rw_mount(store, options, tag="rwrand") as m:
                path = m.p(name)
                assert os.stat(path).st_size == size
                s = Session(path, size, model, fill, rng, history)
                try:
                    got = rw_tools.pread_all(s.dfd, size, 0)
                    assert_bytes_match(got, model, 0, "whole file right after mount")
                    for _ in range(int(rng.integers(*STEPS))):
                        r = rng.random()
                        if r < 0.50:
                            s.write()
                        elif r < 0.55:
                            s.mmap_write()
                        elif r < 0.80:
                            s.read()
                        elif r < 0.92:
                            s.fsync(store)
                        else:
                            s.reopen()
                finally:
                    s.close()
                m.assert_alive()
            history.append("unmounted")
            assert_store_equals(store, model, f"after unmount of epoch {epoch}")
            assert not store.temp_files(), store.temp_files()
    except AssertionError as e:
        tail = "\n  ".join(history[-25:])
        raise AssertionError(
            f"{e}\nseed {seed} ({name}, options {options}); last operations:\n  {tail}"
        ) from None
    # Independent of zarrmount's own reads: the final store, decoded by zarr-python.
    assert_store_equals(store, model, "final")


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_session_matches_model(tmp_path, name):
    seed = BASE_SEED + sorted(CASES).index(name)
    run_session(tmp_path, name, CASES[name], seed)


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_session_other_options(tmp_path, name):
    """The same operations with the options rotated (so every array meets every trigger),
    plus ``write_empty_chunks`` on one of them."""
    names = sorted(CASES)
    options = list(CASES[names[(names.index(name) + 1) % len(names)]])
    if name == "v3":
        options.append("write_empty_chunks")
    run_session(tmp_path, name, options, BASE_SEED + 100 + names.index(name))
