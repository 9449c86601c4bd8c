"""The strided read-ahead model (cache/strides.py): when a reader stepping through a file
at a constant stride is trusted, which ranges it is asked ahead of, and that any other
reader gets nothing."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from zarrmount.cache.prefetch import DEPTH, INTERVAL_S, Pace, ReadAhead
from zarrmount.cache.strides import CONFIRM, PERIOD_MOST, StrideReadAhead

SLAB = 128 * 128 * 4  # one time step of a 240 x 128 x 128 float32 array
SIZE = 240 * SLAB


def _pattern(first: int, step: list[tuple[int, int]], stride: int):
    """The requests of a reader making, at each stride, the reads ``step`` (offset in the
    step, size)."""
    for k in itertools.count():
        for at, size in step:
            offset = first + k * stride + at
            yield offset, offset + size


def _asked(model, requests) -> list[list[tuple[int, int]]]:
    return [model.observe(offset, end) for offset, end in requests]


def test_a_point_time_series_is_asked_the_next_strides_from_its_fourth_read():
    model = StrideReadAhead(SIZE, most=256, least=8)
    point = (70 * 128 + 9) * 4
    asked = _asked(model, [(point + t * SLAB, point + t * SLAB + 4) for t in range(6)])
    assert asked[:3] == [[], [], []]
    assert asked[3] == [(point + t * SLAB, point + t * SLAB + 4) for t in range(4, 12)]
    assert asked[4] == [(point + 12 * SLAB, point + 12 * SLAB + 4)]  # topped up by one
    assert asked[5] == [(point + 13 * SLAB, point + 13 * SLAB + 4)]
    assert model.strided and model.period == 1 and model.stride == SLAB


def test_a_small_window_is_asked_a_step_of_reads_at_a_time():
    model = StrideReadAhead(SIZE, most=256, least=2)
    step = [(0, 12), (512, 12), (1024, 12)]  # three rows of three elements
    reads = list(itertools.islice(_pattern(1000, step, SLAB), 13))
    asked = _asked(model, reads)
    assert not any(asked[:11])  # four steps but the last read
    assert model.period == 3 and model.stride == SLAB
    later = list(itertools.islice(_pattern(1000, step, SLAB), 12, 12 + 7))
    assert asked[11] == later[:6]  # two strides of three reads
    assert asked[12] == later[6:7]


def test_the_reader_leaving_the_file_ends_the_ranges():
    model = StrideReadAhead(10 * SLAB, most=256, least=8)
    asked = _asked(model, [(t * SLAB + 8, t * SLAB + 12) for t in range(6)])
    assert asked[3] == [(t * SLAB + 8, t * SLAB + 12) for t in range(4, 10)]
    assert asked[4] == asked[5] == []


def test_a_backward_reader_is_asked_down_to_the_start():
    model = StrideReadAhead(SIZE, most=256, least=8)
    asked = _asked(model, [(t * SLAB, t * SLAB + 4) for t in range(6, 2, -1)])
    assert asked[3] == [(t * SLAB, t * SLAB + 4) for t in (2, 1, 0)]


def test_a_random_reader_is_asked_nothing():
    model = StrideReadAhead(SIZE, most=256, least=8)
    rng = np.random.default_rng(7)
    for offset in rng.integers(0, SIZE - 4096, 2000).tolist():
        assert model.observe(offset, offset + int(rng.integers(1, 4096))) == []
    assert not model.strided


def test_a_sequential_reader_is_left_to_the_sequential_model():
    model = StrideReadAhead(SIZE, most=256, least=8)
    sequential = ReadAhead(SIZE, most=64 << 20, least=1 << 20)
    asked = []
    for offset in range(0, 64 * 4096, 4096):
        assert model.observe(offset, offset + 4096) == []
        asked.append(sequential.observe(offset, offset + 4096))
    assert not model.strided and sequential.sequential
    assert asked[2] == (3 * 4096, 3 * 4096 + (1 << 20))  # as before


def test_the_same_range_read_again_is_asked_nothing():
    model = StrideReadAhead(SIZE, most=256, least=8)
    assert _asked(model, [(4096, 4100)] * 10) == [[]] * 10


def test_a_broken_pattern_stops_at_once_and_needs_confirming_again():
    model = StrideReadAhead(SIZE, most=256, least=8)
    reads = [(t * SLAB, t * SLAB + 4) for t in range(6)]
    assert _asked(model, reads)[3]
    assert model.observe(3 * SLAB + 100, 3 * SLAB + 104) == []  # off the pattern
    assert not model.strided
    again = [(3 * SLAB + 100 + t * 2 * SLAB, 3 * SLAB + 104 + t * 2 * SLAB) for t in range(1, 5)]
    asked = _asked(model, again)
    assert asked[:2] == [[], []] and asked[2]  # a new stride, confirmed from the break on
    assert model.stride == 2 * SLAB


def test_depth_follows_the_pace_of_reader_and_loads_within_its_bounds():
    model = StrideReadAhead(SIZE, most=100, least=8)
    reads = [(t * SLAB, t * SLAB + 4) for t in range(240)]
    assert len(_asked(model, reads[:4])[3]) == 8
    model.tune(rate=4 / 0.001, latency=0.03)  # a stride a millisecond, 30 ms a load
    found = model.observe(*reads[4])
    assert found[-1] == reads[4 + math.ceil(DEPTH * 30)]
    model.tune(rate=4e6, latency=1.0)  # far more than the most
    assert model.observe(*reads[5])[-1] == reads[5 + 100]
    model.tune(rate=0.0, latency=0.03)  # shrinks: nothing new until the reader catches up
    assert model.observe(*reads[6]) == []


def test_pace_tunes_every_model_it_measures_for():
    sequential = ReadAhead(SIZE, most=1 << 30, least=1)
    strided = StrideReadAhead(SIZE, most=1000, least=1)
    pace = Pace(sequential, strided)
    pace.consumed(4, 0.0)
    pace.consumed(4, INTERVAL_S)
    pace.loaded(0.03)
    assert sequential.window == int(DEPTH * pace.rate * 0.03)
    _asked(strided, [(t * SLAB, t * SLAB + 4) for t in range(3)])
    assert len(strided.observe(3 * SLAB, 3 * SLAB + 4)) == math.ceil(DEPTH * pace.rate * 0.03 / 4)


# A step: reads at offsets of distinct gaps, none reaching the next, then the jump to the
# next step, larger than any gap (or backward): no shorter period fits it.
steps = st.integers(1, 6).flatmap(
    lambda p: st.lists(st.integers(2, 1000), min_size=p - 1, max_size=p - 1, unique=True)
)


@given(
    gaps=steps,
    sizes=st.lists(st.integers(1, 1 << 16), min_size=6, max_size=6),
    jump=st.integers(1, 1 << 20),
    backward=st.booleans(),
    count=st.integers(1, 60),
    least=st.integers(1, 12),
    tail=st.integers(0, 1 << 22),
)
def test_a_strided_reader_is_asked_exactly_the_next_strides(
    gaps, sizes, jump, backward, count, least, tail
):
    gaps.sort()
    offsets = list(itertools.accumulate(gaps, initial=0))
    period = len(offsets)
    sizes = [min(s, g - 1) for s, g in zip(sizes, [*gaps, 1 << 16], strict=False)]
    step = list(zip(offsets, sizes, strict=False))
    if backward:
        stride = -jump
        first = (count // period + 2) * jump
    else:
        stride = offsets[-1] + max(gaps, default=0) + (1 << 16) + jump
        first = 0
    reads = list(itertools.islice(_pattern(first, step, stride), count))
    size = max(end for _, end in reads) + tail
    model = StrideReadAhead(size, most=64, least=least)
    trusted = period * (CONFIRM + 1)  # requests before it is
    asked = []
    for n, (offset, end) in enumerate(reads):
        asked += model.observe(offset, end)
        if n + 1 < trusted:
            assert not asked
        else:
            ahead = itertools.islice(_pattern(first, step, stride), trusted, n + 1 + least * period)
            assert asked == _in_file(ahead, size)


def _in_file(requests, size: int) -> list[tuple[int, int]]:
    """The requests to be asked for, each once, up to the first one out of the file, cut
    at its end."""
    found = []
    for offset, end in requests:
        if not 0 <= offset < size:
            break
        found.append((offset, min(end, size)))
    return found


@given(
    start=st.integers(0, 1 << 30),
    deltas=st.lists(st.integers(-(1 << 20), 1 << 20), min_size=1, max_size=200, unique=True),
    sizes=st.integers(1, 1 << 16),
)
def test_a_reader_whose_steps_keep_growing_is_asked_nothing(start, deltas, sizes):
    model = StrideReadAhead(1 << 40, most=256, least=8)
    offset = start + (1 << 30)
    assert model.observe(offset, offset + sizes) == []
    for delta in sorted(deltas):
        offset += delta
        assert model.observe(offset, offset + sizes) == []


@given(
    point=st.integers(0, SLAB - 4),
    stride=st.integers(5, 4 * SLAB),  # not where the last read ended: sequential
    strided=st.integers(CONFIRM + 1, 20),
    off=st.integers(0, SIZE - 4),
    then=st.lists(st.integers(0, SIZE - 4), max_size=2 * CONFIRM, unique=True),
)
def test_a_read_off_the_pattern_stops_it_until_a_new_one_is_confirmed(
    point, stride, strided, off, then
):
    model = StrideReadAhead(SIZE * 8, most=256, least=8)
    reads = [(point + t * stride, point + t * stride + 4) for t in range(strided)]
    assert _asked(model, reads)[-1]
    if off == reads[-1][0] + stride:
        return  # on the pattern
    assert model.observe(off, off + 4) == []
    starts = [off, *then]
    for n, at in enumerate(then, start=2):
        found = model.observe(at, at + 4)
        differences = {b - a for a, b in itertools.pairwise(starts[:n])}
        if len(differences) > 1 or n <= CONFIRM:
            assert found == []  # at most CONFIRM requests since the break: never trusted


def test_periods_up_to_the_most_are_found():
    step = [(i * 1000, 8) for i in range(PERIOD_MOST - 1)] + [(PERIOD_MOST * 1000 + 7, 8)]
    reads = list(itertools.islice(_pattern(0, step, 10**6), PERIOD_MOST * (CONFIRM + 1)))
    model = StrideReadAhead(1 << 40, most=256, least=1)
    assert _asked(model, reads)[-1]
    assert model.period == PERIOD_MOST
