"""Instants and the one half-open interval rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.model.errors import InvalidInstant
from hermes_estop.model.timeutil import (
    format_relative,
    in_interval,
    parse_instant,
    parse_stamp,
)

T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "now, start, end, expected",
    [
        (T, T, T + timedelta(hours=1), True),
        (T + timedelta(hours=1), T, T + timedelta(hours=1), False),
        (T - timedelta(microseconds=1), T, T + timedelta(hours=1), False),
        (T + timedelta(minutes=59), T, T + timedelta(hours=1), True),
        (T, None, T, False),
        (T, None, T + timedelta(microseconds=1), True),
        (T, None, None, True),
    ],
)
def test_intervals_are_half_open(now, start, end, expected):
    assert in_interval(now, start, end) is expected


@pytest.mark.parametrize("text", ["2026-06-01T12:00:00Z", "2026-06-01T12:00:00+00:00", "2026-06-01T14:00:00+02:00",
                                  "2026-06-01T12:00:00", "2026-06-01 12:00"])
def test_instants_in_every_spelling(text):
    assert parse_instant(text) == T


@pytest.mark.parametrize("text", ["tomorrow", "", "2026-02-30T00:00", "12:00", None, 5])
def test_bad_instants_name_the_value(text):
    with pytest.raises(InvalidInstant) as info:
        parse_instant(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", ["junk", None, 17, "", "x" * 100])
def test_lenient_stamps_never_raise(value):
    assert parse_stamp(value) is None


@pytest.mark.parametrize(
    "delta, text",
    [(timedelta(minutes=43), "in 43m"), (timedelta(hours=2, minutes=5), "in 2h05m"), (timedelta(seconds=-180), "3m ago"),
     (timedelta(days=2, hours=3), "in 2d03h"), (timedelta(seconds=30), "in 30s")],
)
def test_relative_times(delta, text):
    assert format_relative(T + delta, T) == text


# -- issue 9 item 16: an injected aware clock in another zone reads as UTC --------------------------


def test_aware_clock_converts_a_zoned_reading_to_utc():
    from zoneinfo import ZoneInfo

    from hermes_estop.model.timeutil import aware_clock

    berlin = datetime(2026, 10, 25, 1, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    reading = aware_clock(lambda: berlin)()
    assert reading.tzinfo is UTC and reading == berlin


def test_a_two_hour_ttl_across_the_fall_back_night_lasts_two_hours(tmp_path):
    from zoneinfo import ZoneInfo

    from hermes_estop import Estop

    start = datetime(2026, 10, 25, 1, 30, tzinfo=ZoneInfo("Europe/Berlin"))  # CEST, before 03:00 -> 02:00
    now = [start]
    estop = Estop(home=tmp_path / "h", clock=lambda: now[0])
    hold = estop.engage(reason="maint", ttl="2h")
    assert hold.expires_at - start == timedelta(hours=2)
    now[0] = (start.astimezone(UTC) + timedelta(hours=2)).astimezone(ZoneInfo("Europe/Berlin"))
    assert not estop.is_engaged()


@pytest.mark.parametrize("text", ["٢٠٢٦-06-01T12:00:00Z", "2026-06-01T12:00:0٥Z", "2026-06-01T１2:00:00Z"])
def test_instants_take_ascii_digits_only(text):
    with pytest.raises(InvalidInstant, match="ASCII"):
        parse_instant(text)
