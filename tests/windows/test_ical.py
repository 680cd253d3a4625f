"""A feed's expansion (windows/ical.py, issue 27): every occurrence recurring_ical_events gives,
with its times, ident and summary, whatever ranges are asked for in whatever order."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest
import recurring_ical_events

from hermes_estop.model.cronspec import wall_to_instant
from hermes_estop.windows.ical import Feed, parse_feed

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hermes-estop tests//EN\r\n"
TAIL = "END:VCALENDAR\r\n"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def vevent(*lines: str) -> str:
    return "BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\n" + "".join(f"{line}\r\n" for line in lines) + "END:VEVENT\r\n"


def year_of(feed: Feed, tz: ZoneInfo, year: int = 2026) -> list[tuple[datetime, datetime, str, str, str]]:
    first = wall_to_instant(datetime(year, 1, 1), tz)
    last = wall_to_instant(datetime(year + 1, 1, 1), tz)
    return [(e.start, e.end, e.ident, e.uid, e.reason) for e in feed.events(first, last - first) if e.start < last]


@pytest.mark.parametrize("zone, lines", [
    ("Europe/Berlin", ("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=DAILY")),
    ("Asia/Tokyo", ("DTSTART;VALUE=DATE:20260101", "DTEND;VALUE=DATE:20260102", "RRULE:FREQ=DAILY")),
    ("America/New_York", ("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=DAILY")),
    ("Europe/Berlin", ("DTSTART:20260101T003000", "DTEND:20260101T013000", "RRULE:FREQ=DAILY")),
    ("America/New_York", ("DTSTART:20260101T233000", "DURATION:PT2H", "RRULE:FREQ=DAILY")),
])
def test_every_day_of_a_daily_all_day_or_floating_event_is_found_in_the_calendars_zone(zone, lines):
    """A date or a floating time is read in the calendar's zone, hours away from UTC: a day on
    the edge of an expanded range is still found (it was lost east of UTC)."""
    tz = ZoneInfo(zone)
    feed = parse_feed((HEAD + vevent("UID:daily", "SUMMARY:daily", *lines) + TAIL).encode(), "'d'",
                      timezone_name=zone, now=NOW)
    days = [start.astimezone(tz).date() for start, *_ in year_of(feed, tz)]
    assert days == [date(2026, 1, 1) + timedelta(days=n) for n in range(365)]


MIXED = HEAD + "X-WR-TIMEZONE:Europe/Berlin\r\n" + vevent(
    "UID:weekly", "DTSTART;TZID=Europe/Berlin:20260105T220000", "DURATION:PT3H", "RRULE:FREQ=WEEKLY;BYDAY=MO,TH",
    "EXDATE;TZID=Europe/Berlin:20260312T220000", "SUMMARY:weekly", "CATEGORIES:OPS") + vevent(
    "UID:weekly", "RECURRENCE-ID;TZID=Europe/Berlin:20260601T220000", "DTSTART;TZID=Europe/Berlin:20260602T080000",
    "DTEND;TZID=Europe/Berlin:20260602T090000", "SUMMARY:weekly (moved)", "CATEGORIES:OPS") + vevent(
    "UID:weekly", "RECURRENCE-ID;TZID=Europe/Berlin:20260608T220000", "STATUS:CANCELLED",
    "DTSTART;TZID=Europe/Berlin:20260608T220000", "DURATION:PT3H", "CATEGORIES:OPS") + vevent(
    "UID:allday", "DTSTART;VALUE=DATE:20260105", "DURATION:P2D", "RRULE:FREQ=MONTHLY;BYMONTHDAY=5,20",
    "SUMMARY:two days", "CATEGORIES:OPS") + vevent(
    "UID:period", "DTSTART:20260110T100000", "DTEND:20260110T120000", "RRULE:FREQ=MONTHLY;COUNT=8",
    "RDATE;VALUE=PERIOD:20260415T100000/20260415T150000", "SUMMARY:floating", "CATEGORIES:OPS") + vevent(
    "UID:moment", "DTSTART:20260105T100000Z", "RRULE:FREQ=DAILY", "SUMMARY:a moment", "CATEGORIES:OPS") + vevent(
    "UID:other", "DTSTART:20260105T100000Z", "DURATION:PT1H", "RRULE:FREQ=DAILY", "SUMMARY:not ops") + vevent(
    "DTSTART:20260707T100000Z", "DURATION:PT1H", "SUMMARY:no uid", "CATEGORIES:OPS") + vevent(
    "UID:once", "DTSTART;TZID=Europe/Berlin:20260329T013000", "DURATION:PT1H", "SUMMARY:in the DST gap",
    "CATEGORIES:OPS") + TAIL


def ops(component) -> bool:
    props = component.get("CATEGORIES")
    return "OPS" in {str(c) for prop in (props if isinstance(props, list) else [props] if props else [])
                     for c in prop.cats}


def oracle(raw: str, tz: ZoneInfo) -> list[tuple[datetime, datetime, str, str, str]]:
    """What recurring_ical_events' own components (a copy of the VEVENT per occurrence) say."""

    def instant(value) -> datetime:
        if not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        return value.astimezone(UTC) if value.tzinfo else wall_to_instant(value, tz)

    def rid(value) -> str:
        if isinstance(value, datetime) and value.tzinfo:
            value = value.astimezone(UTC)
        return value.isoformat()

    out = []
    first, last = wall_to_instant(datetime(2026, 1, 1), tz), wall_to_instant(datetime(2027, 1, 1), tz)
    query = recurring_ical_events.of(icalendar.Calendar.from_ical(raw))
    for c in query.between(first - timedelta(days=3), last + timedelta(days=3)):
        start, end = instant(c["DTSTART"].dt), instant(c["DTEND"].dt)
        if str(c.get("STATUS", "")) == "CANCELLED" or not ops(c) or end <= start or not first <= start < last:
            continue
        uid = str(c.get("UID") or "")
        if not uid:
            continue  # its ident is a hash of its start (checked apart)
        ident = f"{uid}@{rid(c['RECURRENCE-ID'].dt)}" if uid in ("weekly", "allday", "period", "moment") else uid
        out.append((start, end, ident, uid, str(c["SUMMARY"])))
    return sorted(out)


def test_events_carry_the_times_ident_and_summary_of_recurring_ical_events_components():
    tz = ZoneInfo("Europe/Berlin")
    feed = parse_feed(MIXED.encode(), "'m'", keep=ops, now=NOW)
    found = year_of(feed, tz)
    expected = oracle(MIXED, tz)
    no_uid = [e for e in found if e[3] == ""]
    assert len(no_uid) == 1 and no_uid[0][2].startswith("sha1-")
    assert sorted(e for e in found if e[3]) == expected
    assert {"weekly (moved)", "two days", "floating", "in the DST gap"} <= {e[4] for e in found}
    assert len(expected) > 100


@pytest.mark.parametrize("order", ["forwards", "backwards", "one day at a time", "three years at once",
                                   "five years at once, then each month again"])
def test_events_are_the_same_whatever_ranges_are_read_in_whatever_order(order):
    tz = ZoneInfo("Europe/Berlin")
    expected = year_of(parse_feed(MIXED.encode(), "'m'", keep=ops, now=NOW), tz)
    feed = parse_feed(MIXED.encode(), "'m'", keep=ops, now=NOW)
    months = [wall_to_instant(datetime(2026 + m // 12, m % 12 + 1, 1), tz) for m in range(13)]
    spans = list(itertools.pairwise(months))
    if order == "backwards":
        spans.reverse()
    elif order == "one day at a time":
        spans = [(months[0] + timedelta(days=n), months[0] + timedelta(days=n + 1)) for n in range(366)]
    elif order == "three years at once":
        spans = [(months[0] - timedelta(days=365), months[-1] + timedelta(days=365))]
    elif order == "five years at once, then each month again":  # more chunks than are remembered
        assert len(list(feed.events(months[0] - timedelta(days=730), timedelta(days=5 * 366)))) > 300
    seen: list[tuple[datetime, datetime, str, str, str]] = []
    for first, last in spans:
        seen += [(e.start, e.end, e.ident, e.uid, e.reason) for e in feed.events(first, last - first) if e.start < last]
    assert sorted(set(e for e in seen if months[0] <= e[0] < months[-1])) == expected


def test_two_threads_expanding_a_rule_that_never_matches_are_both_refused_and_neither_hangs():
    """A refusal raised while a rule is walked leaves dateutil's cache lock of that rule held:
    a second thread walking the same feed's rule beside it (the window pass beside the calendar
    thread) waited on that lock for good, and the window pass never armed anything again."""
    import threading

    from hermes_estop.windows.ical import CalendarError

    feed = parse_feed((HEAD + vevent("UID:never", "DTSTART:20260101T000000Z", "DURATION:PT1H",
                                     "RRULE:FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30") + TAIL).encode(),
                      "'never'", now=NOW)
    start, refused = threading.Barrier(2), []

    def expand() -> None:
        start.wait()
        try:
            list(feed.events(NOW))
        except CalendarError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=expand, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "an expansion hung on the rule's cache lock"
    assert len(refused) == 2 and all("never matches" in why for why in refused), refused
