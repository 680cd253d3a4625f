"""Occurrences: the starts are cronspec's (its DST rule is pinned in tests/model/test_cronspec.py),
durations are absolute time, bounds select by start, intervals are half-open."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from schedule_queries import starting_within

from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import covering, next_start, upcoming


def utc(*parts: int) -> datetime:
    return datetime(*parts).replace(tzinfo=UTC)  # type: ignore[arg-type]  # parts are year..second


def cron(expr: str, zone: str = "UTC", duration: str = "1h", **extra) -> Window:
    return Window.parse({"name": "w", "cron": expr, "timezone": zone, "duration": duration, **extra})


def test_duration_is_absolute_time_across_the_transition():
    window = cron("0 2 * * *", "Europe/Berlin", duration="2h")
    [occurrence] = upcoming(window, utc(2026, 10, 24, 23), 1)
    assert occurrence.start == utc(2026, 10, 25, 0)  # 02:00 CEST
    assert occurrence.end == utc(2026, 10, 25, 2)  # two real hours: 03:00 CET on the wall
    assert occurrence.end.astimezone(ZoneInfo("Europe/Berlin")).hour == 3


def test_a_start_in_the_spring_forward_gap_still_lasts_the_whole_duration():
    window = cron("30 2 * * *", "Europe/Berlin", duration="1h")
    [occurrence] = upcoming(window, utc(2026, 3, 28, 12), 1)
    assert (occurrence.start, occurrence.end) == (utc(2026, 3, 29, 1), utc(2026, 3, 29, 2))  # 03:00-04:00 CEST


def test_covering_is_half_open():
    window = cron("0 12 * * *", duration="1h")
    start, end = utc(2026, 6, 1, 12), utc(2026, 6, 1, 13)
    assert covering(window, start - timedelta(microseconds=1)) == []
    assert [o.start for o in covering(window, start)] == [start]
    assert [o.end for o in covering(window, end - timedelta(microseconds=1))] == [end]
    assert covering(window, end) == []


def test_covering_returns_every_occurrence_when_the_duration_exceeds_the_period():
    window = cron("0 * * * *", duration="150m")
    assert [o.start for o in covering(window, utc(2026, 6, 1, 12, 20))] == [
        utc(2026, 6, 1, 10), utc(2026, 6, 1, 11), utc(2026, 6, 1, 12)]


def test_upcoming_lists_the_covering_occurrence_first_then_the_next_ones():
    window = cron("0 12 * * *", duration="1h")
    listed = upcoming(window, utc(2026, 6, 1, 12, 30), 3)
    assert [o.start for o in listed] == [utc(2026, 6, 1, 12), utc(2026, 6, 2, 12), utc(2026, 6, 3, 12)]
    assert listed[0].covers(utc(2026, 6, 1, 12, 30)) and not listed[1].covers(utc(2026, 6, 1, 12, 30))


def test_bounds_select_occurrences_by_start_and_never_cut_one_short():
    window = cron("0 12 * * *", duration="1h", not_before="2026-06-03T12:00:00Z", not_after="2026-06-05T12:00:00Z")
    listed = upcoming(window, utc(2026, 6, 1), 10)
    assert [o.start for o in listed] == [utc(2026, 6, 3, 12), utc(2026, 6, 4, 12)]  # not_after is exclusive
    assert listed[-1].end == utc(2026, 6, 4, 13)
    clipped = cron("0 12 * * *", duration="3h", not_after="2026-06-01T13:00:00Z")
    assert [o.end for o in covering(clipped, utc(2026, 6, 1, 14))] == [utc(2026, 6, 1, 15)]


def test_one_shot_has_exactly_one_occurrence():
    window = Window.parse({"name": "once", "at": "2026-06-01T12:00:00Z", "duration": "30m"})
    assert [o.start for o in upcoming(window, utc(2026, 5, 1), 5)] == [utc(2026, 6, 1, 12)]
    assert upcoming(window, utc(2026, 6, 1, 12, 30), 5) == []
    assert next_start(window, utc(2026, 6, 1, 12)) is None


def test_next_start_is_strictly_after():
    window = cron("0 12 * * *")
    assert next_start(window, utc(2026, 6, 1, 12)).start == utc(2026, 6, 2, 12)
    assert next_start(window, utc(2026, 6, 1, 11, 59)).start == utc(2026, 6, 1, 12)


def test_starting_within_is_closed_and_bounded():
    window = cron("*/10 * * * *")
    found = starting_within(window, utc(2026, 6, 1, 12), utc(2026, 6, 1, 12, 30))
    assert [o.start.minute for o in found] == [0, 10, 20, 30]
    assert len(starting_within(window, utc(2026, 6, 1), utc(2026, 6, 30), limit=7)) == 7


def test_occurrence_identity_is_stable():
    [first] = upcoming(cron("30 2 * * *", "Europe/Berlin"), utc(2026, 6, 1), 1)
    [again] = upcoming(cron("30 2 * * *", "Europe/Berlin"), utc(2026, 6, 1, 0, 10), 1)
    assert first.key == again.key == "fleet/w@2026-06-01T00:30:00+00:00"
