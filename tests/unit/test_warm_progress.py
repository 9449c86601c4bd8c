"""The progress ``zarrmount warm`` shows: the bar on a terminal and the summary line,
from the daemon's reports added up across mounts (pure formatting)."""

from __future__ import annotations

from zarrmount.warming import Totals, bar, summary

MIB = 1 << 20


def _totals(*reports: dict) -> Totals:
    totals = Totals()
    for report in reports:
        totals.add(report)
    return totals


def test_reports_of_several_mounts_add_up_and_finish_together():
    one = {"arrays": 1, "units": 10, "done": 10, "bytes": 5, "finished": True, "failed": []}
    two = {"arrays": 2, "units": 4, "done": 1, "failures": 1, "failed": ["a/0: gone"]}
    totals = _totals(one, {**two, "finished": False})
    assert (totals.arrays, totals.units, totals.done, totals.bytes) == (3, 14, 11, 5)
    assert totals.failed == ["a/0: gone"] and totals.failures == 1
    assert not totals.finished
    assert _totals(one, {**two, "finished": True}).finished


def test_the_bar_shows_units_bytes_rate_and_time_left():
    line = bar(_totals({"units": 100, "done": 25, "bytes": 50 * MIB}), elapsed=10.0)
    assert line.startswith("[" + "#" * 7 + "." * 23 + "]")
    assert " 25% 25/100 units" in line
    assert "50.0 MiB  5.0 MiB/s  0:30 left" in line


def test_the_bar_before_anything_is_done_has_no_estimate():
    line = bar(_totals({"units": 0}), elapsed=0.0)
    assert "0/0 units" in line and "0 B  0 B/s  --:-- left" in line


def test_the_summary_says_what_is_on_disk_and_what_failed():
    totals = _totals(
        {"arrays": 2, "units": 30, "done": 30, "held": 4, "bytes": 3 * 1024**3, "failures": 2}
    )
    line = summary(totals, elapsed=3725.0)
    assert line.startswith("warmed 2 arrays: 28 of 30 units on disk (4 there already)")
    assert "3.0 GiB fetched in 1:02:05 (844.5 KiB/s); 2 failed" in line
    assert "failed" not in summary(_totals({"units": 1, "done": 1}), 1.0)
