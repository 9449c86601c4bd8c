"""The layout's plan, executed with NumPy, must equal NumPy's own C-order flattening."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount.layout import (
    Planner,
    c_order_boxes,
    copy_runs,
    count_touched,
    pieces,
    plan_read,
    product,
)


@st.composite
def shapes_and_ranges(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, s + 2)) for s in shape)
    total = math.prod(shape)
    start = draw(st.integers(0, total - 1))
    stop = draw(st.integers(start + 1, total))
    return shape, chunks, start, stop


def execute(plan, shape, chunks, start, stop) -> np.ndarray:
    """Run a plan on the chunks of ``arange(prod(shape))``, as the read path does."""
    source = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    out = np.full(stop - start, -1, dtype=np.int64)
    for coords, copies in plan.items():
        lo = [k * c for k, c in zip(coords, chunks, strict=True)]
        # A chunk as a decoder gives it: full chunk shape, edge padding included.
        chunk = np.full(chunks, -2, dtype=np.int64)
        region = tuple(slice(a, min(a + c, s)) for a, c, s in zip(lo, chunks, shape, strict=True))
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = source[region]
        for c in copies:
            assert c.stop - c.start == math.prod(c.box)
            out[c.start : c.stop].reshape(c.box)[c.box_sel] = chunk[c.chunk_sel]
    return out


@given(shapes_and_ranges(), st.integers(1, 4))
@settings(max_examples=400, deadline=None)
def test_runs_of_a_copy_move_what_the_copy_moves(case, most):
    """Each run read from a flat C-order chunk into its pieces does what NumPy's copy of
    the selection does; runs are contiguous spans in chunk order, pieces at most ``most``."""
    shape, chunks, start, stop = case
    for copies in plan_read(shape, chunks, start, stop).values():
        for c in copies:
            flat = np.arange(math.prod(chunks), dtype=np.int64) + 100
            want = np.full(c.stop, -1, dtype=np.int64)
            want[c.start : c.stop].reshape(c.box)[c.box_sel] = flat.reshape(chunks)[c.chunk_sel]
            got = np.full(c.stop, -1, dtype=np.int64)
            ends = []
            for first, count, parts in copy_runs(c, chunks, most):
                assert 1 <= len(parts) <= most and sum(n for _, n in parts) == count
                span = flat[first : first + count]
                for o, n in parts:
                    got[o : o + n], span = span[:n], span[n:]
                ends.append((first, first + count))
            np.testing.assert_array_equal(got, want)
            assert ends == sorted(ends)


@given(shapes_and_ranges())
@settings(max_examples=400, deadline=None)
def test_plan_reproduces_c_order_slice(case):
    shape, chunks, start, stop = case
    out = execute(plan_read(shape, chunks, start, stop), shape, chunks, start, stop)
    np.testing.assert_array_equal(out, np.arange(start, stop))


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_planner_reuses_plans_across_slabs(data):
    """Requests at the same place in different slabs (and anywhere else) stay exact."""
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(data.draw(st.integers(1, s + 1)) for s in shape)
    total = math.prod(shape)
    planner = Planner(shape, chunks)
    slab = chunks[0] * math.prod(shape[1:])
    for _ in range(data.draw(st.integers(1, 8))):
        start = data.draw(st.integers(0, total - 1))
        stop = data.draw(st.integers(start + 1, total))
        for shifted in (start, start % slab):  # the same request one or more slabs up
            end = shifted + stop - start
            out = execute(planner.plan(shifted, end), shape, chunks, shifted, end)
            np.testing.assert_array_equal(out, np.arange(shifted, end))


@given(shapes_and_ranges())
@settings(max_examples=400, deadline=None)
def test_one_chunk_row_indexes_the_chunk_that_holds_the_request(case):
    """The fast path of small reads: NumPy's own chunking of the array is the oracle."""
    shape, chunks, start, stop = case
    found = Planner(shape, chunks).one_chunk_row(start, stop)
    if not shape:  # a 0-d array: no rows, the general plan serves it
        assert found is None
        return
    flat = np.arange(math.prod(shape)).reshape(shape)
    where = np.unravel_index(np.arange(start, stop), shape)
    in_one_row = (
        all(len(set(axis.tolist())) == 1 for axis in where[:-1])
        and len({i // chunks[-1] for i in where[-1].tolist()}) == 1
    )
    if not in_one_row:
        assert found is None
        return
    assert found is not None
    coords, index, first = found
    chunk = flat[tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks, strict=True))]
    np.testing.assert_array_equal(chunk[index], np.arange(start, stop))
    if chunk.shape == chunks:  # not an edge chunk: C order within the chunk's own shape
        np.testing.assert_array_equal(
            chunk.reshape(-1)[first : first + stop - start], np.arange(start, stop)
        )


@given(shapes_and_ranges())
@settings(max_examples=200, deadline=None)
def test_boxes_are_contiguous_and_few(case):
    shape, _, start, stop = case
    boxes = c_order_boxes(shape, start, stop)
    assert len(boxes) <= max(1, 2 * len(shape) - 1)
    flat = np.arange(math.prod(shape)).reshape(shape)
    seen = []
    for lo, hi in boxes:
        seen.extend(flat[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))].reshape(-1))
    assert seen == list(range(start, stop))


def test_plan_touches_only_needed_chunks():
    plan = plan_read((100, 100), (10, 10), 1005, 1015)  # row 10, columns 5..14
    assert sorted(plan) == [(1, 0), (1, 1)]


@given(shapes_and_ranges(), st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_pieces_cover_the_range_and_plan_it_in_bounded_parts(case, most):
    """Consecutive pieces, each planning at most ``most`` chunks (or one element), whose
    plans together reproduce the C-order slice."""
    shape, chunks, start, stop = case
    count = lambda a, b: count_touched(shape, chunks, a, b)  # noqa: E731
    assert count(start, stop) == sum(map(len, plan_read(shape, chunks, start, stop).values()))
    out = np.full(stop - start, -1, dtype=np.int64)
    at = start
    for lo, hi in pieces(start, stop, count, most):
        assert lo == at and hi > lo and (count(lo, hi) <= most or hi - lo == 1)
        out[lo - start : hi - start] = execute(
            plan_read(shape, chunks, lo, hi), shape, chunks, lo, hi
        )
        at = hi
    assert at == stop
    np.testing.assert_array_equal(out, np.arange(start, stop))


@given(shapes_and_ranges(), st.data())
@settings(max_examples=300, deadline=None)
def test_a_selected_plan_is_the_plan_of_the_chunks_selected(case, data):
    shape, chunks, start, stop = case
    whole = plan_read(shape, chunks, start, stop)
    chosen = set(data.draw(st.lists(st.sampled_from(sorted(whole)), unique=True)))

    def select(ranges):
        return (c for c in product(ranges) if c in chosen)

    assert plan_read(shape, chunks, start, stop, select) == {
        c: copies for c, copies in whole.items() if c in chosen
    }
