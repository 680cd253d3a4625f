"""Issue 32 items 4-7, issue 33 items 4-5: one calendar never harms another calendar, a window or
the scheduler. Feeds with their own timezones, a fetch with one total deadline against a real
slow server on 127.0.0.1, feeds fetched independently, a failing calendar that stops no task,
and a total expansion budget counted in steps."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from feed_servers import HEAD, TAIL, Redirecting, SlowFeed, vevent
from hermes_estop.windows.calendars import cache_paths, feed_of, read_meta
from hermes_estop.windows.fetch import CalendarFetcher, fetch_once
from hermes_estop.windows.windows_file import WindowsFile

WINDOWS_ZONE = "W. Europe Standard Time"


def vtimezone(offset: str) -> str:
    return (f"BEGIN:VTIMEZONE\r\nTZID:{WINDOWS_ZONE}\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\n"
            f"TZOFFSETFROM:{offset}\r\nTZOFFSETTO:{offset}\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n")


def zoned_feed(uid: str, offset: str | None) -> str:
    """An event 2026-07-10 12:00-13:00 in the Windows zone name, defined here as `offset`
    (None: not defined, so the tz database's Europe/Berlin, CEST in July)."""
    return HEAD + (vtimezone(offset) if offset else "") + vevent(
        f"UID:{uid}", f"DTSTART;TZID={WINDOWS_ZONE}:20260710T120000", f"DTEND;TZID={WINDOWS_ZONE}:20260710T130000",
        f"SUMMARY:{uid}") + TAIL


@pytest.mark.parametrize(("victim_offset", "victim_start"), [
    ("+0100", datetime(2026, 7, 10, 11, tzinfo=UTC)),
    (None, datetime(2026, 7, 10, 10, tzinfo=UTC)),
])
def test_a_feed_s_timezone_definitions_never_move_another_feed_s_events(tmp_path, victim_offset, victim_start):
    (tmp_path / "hostile.ics").write_text(zoned_feed("hostile", "+1300"), newline="")
    (tmp_path / "victim.ics").write_text(zoned_feed("victim", victim_offset), newline="")
    (tmp_path / "windows.toml").write_text('[[calendars]]\nname = "hostile"\nics = "hostile.ics"\n\n'
                                          '[[calendars]]\nname = "victim"\nics = "victim.ics"\n')
    hostile, victim = WindowsFile(tmp_path).load()
    day = (datetime(2026, 7, 9, tzinfo=UTC), datetime(2026, 7, 12, tzinfo=UTC))
    assert [e.start for e in hostile.feed.between(*day)] == [datetime(2026, 7, 9, 23, tzinfo=UTC)]
    assert [(e.start, e.end) for e in victim.feed.between(*day)] == [(victim_start, victim_start + timedelta(hours=1))]


@pytest.fixture
def slow_feed():
    served = SlowFeed()
    yield served
    served.close()


def in_thread(target, *args, **kwargs) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(target(*args, **kwargs)), daemon=True)
    thread.start()
    return thread, out


def test_a_body_trickling_a_byte_every_2s_is_cut_at_the_fetch_s_one_deadline(fleet_root, slow_feed):
    thread, out = in_thread(fetch_once, fleet_root, slow_feed.url, "'slow'", timeout=3)
    thread.join(120)  # the body alone would take about 5 minutes
    assert not thread.is_alive(), "the fetch ran past its deadline"
    assert out and "within 3s" in str(out[0])
    copy, meta = cache_paths(fleet_root, slow_feed.url)
    assert not copy.exists() and "within 3s" in read_meta(meta)["error"]


def test_a_redirect_to_another_scheme_is_refused_and_one_to_http_is_followed_within_the_deadline(fleet_root,
                                                                                                slow_feed):
    away = Redirecting("ftp://127.0.0.1/feed.ics")
    slow = Redirecting(slow_feed.url)
    try:
        assert "only http(s) is followed" in str(fetch_once(fleet_root, away.url, "'away'", timeout=30))
        thread, out = in_thread(fetch_once, fleet_root, slow.url, "'slow'", timeout=3)
        thread.join(120)
        assert not thread.is_alive() and "within 3s" in str(out[0])
        assert slow_feed.requested.is_set()
    finally:
        away.close()
        slow.close()


GOOD = HEAD + vevent("UID:good", "DTSTART:20260301T100000Z", "DURATION:PT1H", "SUMMARY:good") + TAIL


def wait_for(predicate, limit: float = 60.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_slow_feed_never_delays_another_feed_and_stopping_abandons_it(fleet_root, slow_feed):
    (fleet_root / "good.ics").write_text(GOOD, newline="")
    (fleet_root / "windows.toml").write_text(f'[[calendars]]\nname = "slow"\nurl = "{slow_feed.url}"\n\n'
                                             '[[calendars]]\nname = "good"\nics = "good.ics"\n')
    fetcher = CalendarFetcher(fleet_root, timeout=600)
    threads = fetcher.pass_once()
    assert len(threads) == 2
    good_copy, _ = cache_paths(fleet_root, "good.ics")
    assert wait_for(good_copy.exists)
    slow = next(t for t in threads if "slow" in t.name)
    assert slow.is_alive()  # a 600 s deadline, a body of about 5 minutes: still in flight
    assert fetcher.pass_once() == []  # one fetch per feed at a time
    fetcher.abandon(grace=60)
    assert not slow.is_alive()
    assert "abandoned" in read_meta(cache_paths(fleet_root, slow_feed.url)[1])["error"]


NEVER = HEAD + vevent("UID:never", "DTSTART:20260101T000000Z", "DURATION:PT1H",
                      "RRULE:FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30") + TAIL
#: 44 KiB of 400 daily rules from 1970: each passes the per-rule bound, together they do not
DENSE = HEAD + "".join(vevent(f"UID:d{i}", "DTSTART:19700101T000000Z", "DURATION:PT1H", "RRULE:FREQ=DAILY",
                              f"SUMMARY:{'x' * 20}") for i in range(400)) + TAIL
HOSTILE = {"a rule that never matches": (NEVER, "one rule walks more than 200000 steps"),
           "400 daily rules from 1970": (DENSE, "in all")}
#: a busy team calendar: 1,000 weekly, fortnightly and monthly rules from 2025 (bench/calendars.py)
BUSY = HEAD + "".join(vevent(f"UID:e{i}", f"DTSTART:2025{i % 12 + 1:02d}{i % 28 + 1:02d}T{i % 24:02d}0000Z",
                             "DURATION:PT2H", f"RRULE:FREQ={('WEEKLY', 'WEEKLY;BYDAY=MO,TH', 'MONTHLY')[i % 3]}")
                      for i in range(1000)) + TAIL


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_feed_over_its_expansion_budget_is_refused_naming_it(name):
    from hermes_estop.windows.ical import CalendarError

    body, what = HOSTILE[name]
    with pytest.raises(CalendarError) as info:
        feed_of(body.encode(), "'evil'")
    assert str(info.value).startswith("calendar 'evil': ") and what in str(info.value)
    assert "\n" not in str(info.value)


def test_a_busy_legitimate_feed_is_within_its_budget():
    from hermes_estop.windows.ical import parse_feed

    now = datetime(2026, 6, 1, tzinfo=UTC)
    feed = parse_feed(BUSY.encode(), "'team'", now=now)
    assert len(list(feed.events(now, timedelta(days=200)))) > 10_000


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_an_ordinary_window_arms_at_the_first_pass_while_a_hostile_feed_is_refused(harness, name):
    (harness.root / "evil.ics").write_text(HOSTILE[name][0], newline="")
    start = harness.clock.now - timedelta(minutes=1)
    (harness.root / "windows.toml").write_text(
        f'[[windows]]\nname = "nightly"\nat = {start.isoformat().replace("+00:00", "Z")}\nduration = "1h"\n\n'
        '[[calendars]]\nname = "evil"\nics = "evil.ics"\n')
    report = harness.start()
    hold = harness.reading().hold
    assert hold is not None and hold.window["name"] == "nightly"
    assert len(report.failed) == 1 and "calendar 'evil'" in report.failed[0]


def test_a_feed_refused_by_a_later_expansion_fails_alone_from_the_next_read(tmp_path):
    """An hourly rule from 2024 is within budget to the horizon; asked about 2050 its walk passes
    200,000 steps: from then on the calendar fails on its own, the window beside it stays."""
    from hermes_estop.windows.ical import CalendarError

    (tmp_path / "hourly.ics").write_text(HEAD + vevent("UID:h", "DTSTART:20240101T000000Z", "DURATION:PT30M",
                                                       "RRULE:FREQ=HOURLY") + TAIL, newline="")
    (tmp_path / "windows.toml").write_text('[[windows]]\nname = "nightly"\ncron = "0 3 * * *"\nduration = "1h"\n\n'
                                           '[[calendars]]\nname = "hourly"\nics = "hourly.ics"\n')
    windows_file = WindowsFile(tmp_path)
    _nightly, hourly = windows_file.load()
    with pytest.raises(CalendarError, match="one rule walks more than 200000 steps"):
        list(hourly.feed.events(datetime(2050, 1, 1, tzinfo=UTC), timedelta(days=2)))
    parsed = windows_file.parse_each(windows_file.read())
    assert [w.name for w in parsed.windows] == ["nightly"]
    assert len(parsed.failures) == 1 and "calendar 'hourly'" in str(parsed.failures[0])
