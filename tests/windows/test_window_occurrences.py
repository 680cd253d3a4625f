"""Occurrences: croniter on the window's wall clock, placed on the time line by the DST rule (a
repeated fall-back start occurs once, at its first instant; a non-existent spring-forward start
moves to the first valid instant after it), durations in absolute time, bounds by start."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import (
    covering,
    next_start,
    occurrences,
    starting_within,
    upcoming,
    wall_to_instant,
)

UTC = timezone.utc


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def cron(expr: str, zone: str = "UTC", duration: str = "1h", **extra) -> Window:
    return Window.parse({"name": "w", "cron": expr, "timezone": zone, "duration": duration, **extra})


def starts(window: Window, since: datetime, count: int) -> list[datetime]:
    out = []
    for occurrence in occurrences(window, since):
        out.append(occurrence.start)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize(
    "expr, zone, since, expected",
    [
        pytest.param("30 2 * * *", "Europe/Berlin", utc(2026, 3, 27, 12),
                     [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
                     id="berlin-spring-forward-moves-to-03:00-CEST"),
        pytest.param("30 2 * * *", "Europe/Berlin", utc(2026, 10, 23, 12),
                     [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
                     id="berlin-fall-back-once-at-02:30-CEST"),
        pytest.param("30 2 * * *", "America/New_York", utc(2026, 3, 7, 0),
                     [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)],
                     id="new-york-spring-forward-moves-to-03:00-EDT"),
        pytest.param("30 1 * * *", "America/New_York", utc(2026, 10, 31, 0),
                     [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
                     id="new-york-fall-back-once-at-01:30-EDT"),
        pytest.param("0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 30),
                     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 2), utc(2026, 10, 25, 3)],
                     id="berlin-hourly-repeated-02:00-once"),
        pytest.param("*/15 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12),
                     [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 0), utc(2026, 3, 30, 0, 15)],
                     id="berlin-starts-inside-the-gap-collapse-into-one"),
        pytest.param("0 9 * * 1-5", "Asia/Kolkata", utc(2026, 6, 5, 0),
                     [utc(2026, 6, 5, 3, 30), utc(2026, 6, 8, 3, 30), utc(2026, 6, 9, 3, 30)],
                     id="kolkata-half-hour-offset-weekdays"),
        pytest.param("0 0 * * 0", "UTC", utc(2026, 6, 1),
                     [utc(2026, 6, 7), utc(2026, 6, 14), utc(2026, 6, 21)],
                     id="weekday-0-is-sunday"),
        pytest.param("0 0 * * *", "Pacific/Apia", utc(2011, 12, 28, 0),
                     [utc(2011, 12, 28, 10), utc(2011, 12, 29, 10), utc(2011, 12, 30, 10), utc(2011, 12, 31, 10)],
                     id="apia-skipped-day-collapses"),
    ],
)
def test_starts_follow_the_dst_rule(expr, zone, since, expected):
    assert starts(cron(expr, zone), since, len(expected)) == expected


@pytest.mark.parametrize("zone, day", [("Europe/Berlin", (2026, 10, 25)), ("America/New_York", (2026, 11, 1))])
def test_daily_window_on_the_fall_back_day_occurs_once(zone, day):
    tz = ZoneInfo(zone)
    window = cron("30 1 * * *", zone)
    local_midnight = datetime(*day, tzinfo=tz).astimezone(UTC)
    on_that_day = [o for o in upcoming(window, local_midnight, 5) if o.start.astimezone(tz).date() == datetime(*day).date()]
    assert len(on_that_day) == 1
    assert on_that_day[0].start.astimezone(tz).fold == 0


def test_croniter_alone_would_repeat_the_fall_back_start():
    """Why the wall-clock iteration exists: croniter in an aware zone yields 02:30 twice."""
    from croniter import croniter

    tz = ZoneInfo("Europe/Berlin")
    it = croniter("30 2 * * *", datetime(2026, 10, 24, 12, tzinfo=tz))
    raw = [it.get_next(datetime) for _ in range(2)]
    assert [d.astimezone(UTC) for d in raw] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]
    assert starts(cron("30 2 * * *", "Europe/Berlin"), utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_duration_is_absolute_time_across_the_transition():
    window = cron("0 2 * * *", "Europe/Berlin", duration="2h")
    [occurrence] = upcoming(window, utc(2026, 10, 24, 23), 1)
    assert occurrence.start == utc(2026, 10, 25, 0)  # 02:00 CEST
    assert occurrence.end == utc(2026, 10, 25, 2)  # two real hours: 03:00 CET on the wall
    assert occurrence.end.astimezone(ZoneInfo("Europe/Berlin")).hour == 3


@pytest.mark.parametrize(
    "wall, zone, expected",
    [
        pytest.param(datetime(2026, 3, 29, 2, 30), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap"),
        pytest.param(datetime(2026, 3, 29, 2, 0), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap-start"),
        pytest.param(datetime(2026, 3, 29, 3, 0), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap-end"),
        pytest.param(datetime(2026, 10, 25, 2, 30), "Europe/Berlin", utc(2026, 10, 25, 0, 30), id="repeat-first"),
        pytest.param(datetime(2026, 6, 1, 12, 0), "Europe/Berlin", utc(2026, 6, 1, 10), id="ordinary"),
        pytest.param(datetime(2026, 4, 5, 1, 45), "Australia/Lord_Howe", utc(2026, 4, 4, 14, 45), id="half-hour-repeat"),
    ],
)
def test_wall_to_instant(wall, zone, expected):
    assert wall_to_instant(wall, ZoneInfo(zone)) == expected


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
