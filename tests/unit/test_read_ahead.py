"""The read-ahead model (cache/prefetch.py): when it asks for bytes ahead of a reader,
and how far, as the measured pace of the reader and of the loads changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zarrmount.cache.prefetch import DEPTH, INTERVAL_S, Pace, ReadAhead

MIB = 1 << 20


def _stream(model: ReadAhead, start: int, count: int, step: int = MIB) -> list[tuple[int, int]]:
    """The ranges the model asks for while a reader reads ``count`` steps from ``start``."""
    asked = []
    for offset in range(start, start + count * step, step):
        found = model.observe(offset, offset + step)
        if found is not None:
            asked.append(found)
    return asked


def test_a_sequential_reader_is_kept_a_window_ahead_without_gaps():
    model = ReadAhead(1 << 40, most=64 * MIB, least=16 * MIB)
    asked = []
    for offset in range(0, 200 * MIB, MIB):
        found = model.observe(offset, offset + MIB)
        if found is not None:
            assert found[1] <= offset + MIB + 16 * MIB  # never past the window
            asked.append(found)
    assert asked[0][0] == 3 * MIB  # after the streak, from where the reader is
    assert all(a[1] == b[0] for a, b in zip(asked, asked[1:], strict=False))  # no gaps


def test_a_seek_starts_over():
    model = ReadAhead(1 << 40, most=64 * MIB)
    assert _stream(model, 0, 4)
    assert model.observe(500 * MIB, 501 * MIB) is None  # not sequential any more
    assert not model.sequential


def test_the_window_follows_rate_times_latency_within_its_bounds():
    model = ReadAhead(1 << 40, most=128 * MIB, least=16 * MIB)
    assert model.window == 16 * MIB  # nothing measured yet: the least
    model.tune(rate=1e9, latency=0.02)  # 20 MB consumed while a load takes
    assert model.window == int(DEPTH * 1e9 * 0.02)
    model.tune(rate=1e9, latency=1.0)  # a far store
    assert model.window == 128 * MIB
    model.tune(rate=1e9, latency=0.0005)  # a local one
    assert model.window == 16 * MIB


def test_a_grown_window_asks_further_ahead():
    model = ReadAhead(1 << 40, most=128 * MIB, least=8 * MIB)
    first = _stream(model, 0, 4)[-1][1]
    assert first == 3 * MIB + 8 * MIB  # asked at the third request; the fourth is within
    model.tune(rate=1e9, latency=0.05)  # 100 MB
    grown = _stream(model, 4 * MIB, 1)[-1][1]
    assert grown == 5 * MIB + int(DEPTH * 1e9 * 0.05)


def test_pace_measures_consumption_over_intervals_and_latency_on_average():
    model = ReadAhead(1 << 40, most=1 << 30, least=MIB)
    pace = Pace(model)
    assert model.window == MIB  # nothing measured: unchanged
    now = 0.0
    for _ in range(100):  # 1 MiB every millisecond: ~1 GiB/s
        pace.consumed(MIB, now)
        now += 0.001
    assert pace.rate is not None and abs(pace.rate - MIB / 0.001) / (MIB / 0.001) < 0.05
    for _ in range(20):
        pace.loaded(0.04)
    assert abs(model.window - DEPTH * pace.rate * 0.04) <= 1


@given(
    rate=st.floats(0, 1e12, allow_nan=False),
    latency=st.floats(0, 100, allow_nan=False),
    least=st.integers(0, 1 << 30),
    most=st.integers(0, 1 << 32),
)
def test_the_window_never_leaves_its_bounds(rate, latency, least, most):
    model = ReadAhead(1 << 50, most=most, least=least)
    model.tune(rate, latency)
    assert min(least, most) <= model.window <= most


def test_single_requests_too_close_to_time_are_summed():
    pace = Pace(ReadAhead(1 << 40, most=1 << 30))
    pace.consumed(MIB, 0.0)
    pace.consumed(MIB, INTERVAL_S / 10)
    assert pace.rate is None  # not an interval yet
    pace.consumed(MIB, INTERVAL_S)
    assert pace.rate == 3 * MIB / INTERVAL_S
