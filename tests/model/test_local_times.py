"""Human-facing times (issue 38): one form, `display_instant`, to the second in the local zone
with its offset; and the operator's `--at` / `--until` read as `15:00`, `tomorrow 03:00`, with a
zone or in the local one, saying which it assumed. The zone is pinned with `TZ`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hermes_estop.model.errors import InvalidInstant
from hermes_estop.model.timeutil import display_instant, parse_operator_time

WINTER = datetime(2026, 12, 5, 13, 54, 18, 295556, tzinfo=UTC)
#: the Saturday before Berlin's clocks go forward (2026-03-29 02:00 CET -> 03:00 CEST)
BEFORE_SPRING = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("zone, expected", [
    ("UTC", "2026-12-05T13:54:18+00:00"),
    ("Europe/Berlin", "2026-12-05T14:54:18+01:00"),
    ("America/New_York", "2026-12-05T08:54:18-05:00"),
    ("Asia/Kolkata", "2026-12-05T19:24:18+05:30"),
])
def test_a_shown_time_is_local_to_the_second_with_its_offset(zone_pinner, zone, expected):
    zone_pinner(zone)
    assert display_instant(WINTER) == expected
    assert display_instant(None) is None


@pytest.mark.parametrize("text, now, expected", [
    ("15:00", WINTER, datetime(2026, 12, 5, 14, 0, tzinfo=UTC)),            # later today
    ("14:00", WINTER, datetime(2026, 12, 6, 13, 0, tzinfo=UTC)),            # passed today: tomorrow's
    ("today 14:54:18", WINTER, datetime(2026, 12, 5, 13, 54, 18, tzinfo=UTC)),
    ("tomorrow 03:00", WINTER, datetime(2026, 12, 6, 2, 0, tzinfo=UTC)),
    ("tomorrow 3:00", WINTER, datetime(2026, 12, 6, 2, 0, tzinfo=UTC)),
    ("tomorrow 03:00", BEFORE_SPRING, datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),  # CEST by then: +02:00
])
def test_a_wall_clock_time_is_read_in_the_local_zone_and_says_so(berlin, text, now, expected):
    instant, note = parse_operator_time(text, now, what="--until")
    assert instant == expected
    assert note == f"--until {text!r} read in local time (Europe/Berlin): {display_instant(expected)}"


@pytest.mark.parametrize("text, expected", [
    ("15:00 UTC", datetime(2026, 12, 5, 15, 0, tzinfo=UTC)),
    ("tomorrow 03:00 America/New_York", datetime(2026, 12, 6, 8, 0, tzinfo=UTC)),
    ("2026-12-06T03:00 Europe/Berlin", datetime(2026, 12, 6, 2, 0, tzinfo=UTC)),
    ("2026-12-06 03:00:00+01:00", datetime(2026, 12, 6, 2, 0, tzinfo=UTC)),
    ("2026-12-06T03:00:00Z", datetime(2026, 12, 6, 3, 0, tzinfo=UTC)),
    ("2026-12-06T03:00", datetime(2026, 12, 6, 3, 0, tzinfo=UTC)),  # naive ISO-8601 stays UTC
])
def test_a_time_that_names_its_zone_or_offset_is_read_there_without_a_note(berlin, text, expected):
    assert parse_operator_time(text, WINTER, what="--at") == (expected, None)


def test_a_shown_time_reads_back_as_the_same_instant(berlin):
    shown = display_instant(WINTER)
    assert shown is not None
    assert parse_operator_time(shown, WINTER) == (WINTER.replace(microsecond=0), None)


@pytest.mark.parametrize("text, words", [
    ("25:00", "expected a time of day"),
    ("15:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    ("next tuesday", "expected 15:00, tomorrow 03:00 or an ISO-8601 time"),
    ("yesterday 03:00", "expected 15:00, tomorrow 03:00 or an ISO-8601 time"),
    ("2026-12-06T03:00+01:00 UTC", "give an offset or a zone, not both"),
    ("", "expected an ISO-8601 time"),
])
def test_a_time_that_does_not_read_is_refused_naming_it(berlin, text, words):
    with pytest.raises(InvalidInstant, match=words) as refused:
        parse_operator_time(text, WINTER, what="--until")
    assert "--until" in str(refused.value)
