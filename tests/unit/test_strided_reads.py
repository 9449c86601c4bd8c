"""Stride read-ahead through the FUSE-shaped API (no mount), over a remote store double:
a reader of a point's or a small window's time series finds the chunks of its next steps
asked of the store before it reads them, and its bytes are NumPy's."""

from __future__ import annotations

import os

import numpy as np
import pytest
import trio
import trio.testing
import zarr
from helpers.store_doubles import ReadOnlyRemoteDouble

from zarrmount import hierarchy
from zarrmount.array.prefetch import LEAST_STRIDES
from zarrmount.assemble import Mount, assemble
from zarrmount.options import MountOptions
from zarrmount.vfs import Filesystem

SHAPE, CHUNKS = (48, 16, 16), (1, 16, 16)  # a chunk a time step
SLAB = 16 * 16 * 4

# reads of a step, (offset in the slab, size): a point, a 2 x 2 window's rows
STEPS = {"point": [((5 * 16 + 7) * 4, 4)], "window": [((5 * 16 + 7) * 4, 8), ((6 * 16 + 7) * 4, 8)]}


class _FarStore(ReadOnlyRemoteDouble):
    """A directory read as an object store that cannot list: records every get."""

    url = "far://"
    lists_chunks = False
    deadline_s = 60.0

    def __init__(self, root: str) -> None:
        self.root = root
        self.gets: list[str] = []

    def get(self, key, *, deadline_s=None):
        self.gets.append(key)
        try:
            with open(os.path.join(self.root, key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None


@pytest.fixture(scope="module")
def values(tmp_path_factory) -> tuple[str, np.ndarray]:
    root = str(tmp_path_factory.mktemp("strided") / "data.zarr")
    data = np.random.default_rng(4).standard_normal(SHAPE).astype("<f4")
    zarr.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="<f4", zarr_format=3)[:] = data
    return root, data


def _mount(root: str) -> tuple[Mount, _FarStore]:
    store = _FarStore(root)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions(cache_size=64 << 20, metadata_ttl=None, negative_ttl=None)
    return assemble(dialect, node, pipeline, options), store


async def _open(fs: Filesystem) -> int:
    return fs.open((await fs.lookup(1, "array")).ino, os.O_RDONLY)


def _chunks(store: _FarStore) -> list[int]:
    """The time steps whose chunks the store was asked for, in order."""
    return [int(key.split("/")[1]) for key in store.gets if key.startswith("c/")]


async def _read_steps(fs: Filesystem, fh: int, name: str, steps: range) -> bytes:
    got = b""
    for t in steps:
        for at, size in STEPS[name]:
            got += bytes(await fs.read(fh, t * SLAB + at, size))
    return got


def _expected(data: np.ndarray, name: str, steps: range) -> bytes:
    flat = data.reshape(-1).view(np.uint8)
    return b"".join(
        flat[t * SLAB + at : t * SLAB + at + size].tobytes()
        for t in steps
        for at, size in STEPS[name]
    )


@pytest.mark.parametrize("name", STEPS)
def test_the_chunks_of_the_next_steps_are_asked_before_they_are_read(values, name):
    root, data = values

    async def main():
        mount, store = _mount(root)
        fh = await _open(mount.fs)
        async with trio.open_nursery() as nursery:  # left once the loads ahead are done
            mount.background.nursery = nursery
            got = await _read_steps(mount.fs, fh, name, range(4))
        assert sorted(_chunks(store)) == list(range(4 + LEAST_STRIDES))  # 4 to 11 ahead
        async with trio.open_nursery() as nursery:
            mount.background.nursery = nursery
            got += await _read_steps(mount.fs, fh, name, range(4, SHAPE[0]))
        assert got == _expected(data, name, range(SHAPE[0]))
        assert sorted(_chunks(store)) == list(range(SHAPE[0]))  # each once, none past the end

    trio.run(main, clock=trio.testing.MockClock())  # no interval measured: the least ahead


def test_a_read_off_the_pattern_asks_nothing_more(values):
    root, data = values

    async def main():
        mount, store = _mount(root)
        fh = await _open(mount.fs)
        async with trio.open_nursery() as nursery:
            mount.background.nursery = nursery
            await _read_steps(mount.fs, fh, "point", range(4))
            far = 40 * SLAB + 100
            got = bytes(await mount.fs.read(fh, far, 4))
        assert got == data.reshape(-1).view(np.uint8)[far : far + 4].tobytes()
        assert sorted(_chunks(store)) == [*range(4 + LEAST_STRIDES), 40]

    trio.run(main, clock=trio.testing.MockClock())
