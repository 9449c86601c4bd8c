"""The listing of an array's stored chunks (or shards): the keys zarr-python wrote, found
from the store alone; and the selection of the chunks of listed units within a box,
against a brute-force count."""

from __future__ import annotations

import time

import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.array.stored_units import Selector, StoredUnits, list_units
from zarrmount.layout import product
from zarrmount.store.local import LocalStore
from zarrmount.store.remote import FsspecStore

WRITTEN = [(0, 0), (0, 5), (3, 2), (7, 7), (12, 1)]

# name: create_array keywords; the unit grid is the chunk grid, or the shard grid
KINDS = {
    "v2-dot": dict(zarr_format=2, chunks=(2, 2)),
    "v2-slash": dict(
        zarr_format=2, chunks=(2, 2), chunk_key_encoding={"name": "v2", "separator": "/"}
    ),
    "v3-default": dict(zarr_format=3, chunks=(2, 2)),
    "v3-dot": dict(
        zarr_format=3, chunks=(2, 2), chunk_key_encoding={"name": "default", "separator": "."}
    ),
    "v3-sharded": dict(zarr_format=3, chunks=(1, 1), shards=(2, 2)),
}


@pytest.mark.parametrize("where", ["directory", "object store"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_listing_finds_the_units_zarr_python_wrote(tmp_path, kind, where):
    """A directory is listed level by level, an object store in one listing of every key
    below the array (fsspec's memory filesystem stands for one): the same units, each with
    a validator that changes when its object is written again."""
    root = str(tmp_path / "a.zarr") if where == "directory" else f"memory://{tmp_path}/a.zarr"
    array = zarr.create_array(root, shape=(26, 16), dtype="u1", fill_value=0, **KINDS[kind])
    for unit in WRITTEN:
        array[unit[0] * 2, unit[1] * 2] = 1
    store = LocalStore(root) if where == "directory" else FsspecStore(root)
    store.set("c.tmp", b"")  # not a chunk key of any encoding
    _, node, _ = hierarchy.open_hierarchy(store)
    meta = node.meta
    listed = list_units(store, "", meta.key_encoding, 2)
    assert set(listed) == set(WRITTEN)
    assert all(listed.values())  # each with its object's validator
    time.sleep(0.002)  # a later modification time, where that is the validator
    array[0, 0] = 2
    again = list_units(store, "", meta.key_encoding, 2)
    assert [u for u in WRITTEN if again[u] != listed[u]] == [(0, 0)]
    assert list_units(store, "", meta.key_encoding, 2, limit=2) is None  # too many names


@st.composite
def units_and_box(draw):
    ndim = draw(st.integers(1, 3))
    per_unit = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    grid = st.tuples(*(st.integers(0, 4) for _ in range(ndim)))
    units = set(draw(st.lists(grid, max_size=12)))
    ranges = []
    for _ in range(ndim):
        a = draw(st.integers(0, 14))
        ranges.append(range(a, draw(st.integers(a + 1, 16))))
    return units, per_unit, ranges


@given(units_and_box())
@settings(max_examples=300, deadline=None)
def test_the_selector_picks_the_chunks_of_listed_units_in_a_box(case):
    units, per_unit, ranges = case
    expected = [
        c
        for c in product(ranges)
        if tuple(k // n for k, n in zip(c, per_unit, strict=True)) in units
    ]
    selector = Selector(units, per_unit)
    assert sorted(selector.chunks(ranges)) == expected
    assert selector.count(ranges) == len(expected)


def test_written_units_join_the_listing():
    listed = StoredUnits({(0,)}, (1,), 0.0)
    assert list(listed.selector([]).chunks([range(0, 4)])) == [(0,)]
    assert sorted(listed.selector([(2,)]).chunks([range(0, 4)])) == [(0,), (2,)]
    listed.add((3,))
    assert sorted(listed.selector([]).chunks([range(0, 4)])) == [(0,), (3,)]
    assert listed.nbytes > StoredUnits(set(), (1,), 0.0).nbytes
