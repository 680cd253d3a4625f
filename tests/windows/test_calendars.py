"""Calendar sources of windows.toml (issue 27): golden feeds against recurring_ical_events itself,
holiday exclusions, the weakening rule for a feed, hostile feeds, the fetch and the export."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import pytest
import recurring_ical_events
import x_wr_timezone

from hermes_estop.model.hold import HoldState
from hermes_estop.windows.calendars import cache_paths
from hermes_estop.windows.export import ics_of, planned
from hermes_estop.windows.fetch import CalendarFetcher, fetch_once
from hermes_estop.windows.forecast import planned_holds, window_ahead
from hermes_estop.windows.ical import CalendarError, parse_feed
from hermes_estop.windows.ledger import SKIPPED, LedgerEntry
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.windows_file import WindowsFile

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hermes-estop tests//EN\r\n"
TAIL = "END:VCALENDAR\r\n"


def _planned(windows: Iterable[Window], now: datetime, days: int) -> list[tuple[Window, Occurrence]]:
    """`export.planned` of the enabled `windows` (what `/calendar.ics` exports of the windows it shows)."""
    return planned((window_ahead(window, now) for window in windows if window.enabled), now, days)


def vevent(*lines: str) -> str:
    return "BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\n" + "".join(f"{line}\r\n" for line in lines) + "END:VEVENT\r\n"


GOLDEN = {
    # a weekly change freeze, Friday 18:00 Berlin, across both 2026 DST changes, one week excluded,
    # one instance moved (RECURRENCE-ID) to Saturday morning
    "berlin-freeze": HEAD + vevent(
        "UID:freeze-berlin", "DTSTART;TZID=Europe/Berlin:20260206T180000", "DTEND;TZID=Europe/Berlin:20260206T230000",
        "RRULE:FREQ=WEEKLY;BYDAY=FR;UNTIL=20261231T000000Z", "EXDATE;TZID=Europe/Berlin:20260327T180000",
        "SUMMARY:change freeze") + vevent(
        "UID:freeze-berlin", "RECURRENCE-ID;TZID=Europe/Berlin:20261030T180000",
        "DTSTART;TZID=Europe/Berlin:20261031T090000", "DTEND;TZID=Europe/Berlin:20261031T120000",
        "SUMMARY:change freeze (moved)") + TAIL,
    "newyork-freeze": HEAD + vevent(
        "UID:freeze-ny", "DTSTART;TZID=America/New_York:20260105T220000", "DURATION:PT6H",
        "RRULE:FREQ=WEEKLY;BYDAY=MO,TH;COUNT=90", "EXDATE;TZID=America/New_York:20260309T220000",
        "SUMMARY:NY freeze") + TAIL,
    "holidays": "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nX-WR-TIMEZONE:Europe/Berlin\r\n" + vevent(
        "UID:xmas", "DTSTART;VALUE=DATE:20261224", "DTEND;VALUE=DATE:20261227", "SUMMARY:Christmas") + vevent(
        "UID:newyear", "DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=YEARLY", "SUMMARY:New Year") + vevent(
        "UID:goodfriday", "DTSTART;VALUE=DATE:20260403", "DTEND;VALUE=DATE:20260404", "SUMMARY:Good Friday") + TAIL,
    # Google writes the events in UTC and the zone only in X-WR-TIMEZONE
    "google": "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Google Inc//Google Calendar 70.9054//EN\r\n"
              "X-WR-TIMEZONE:America/New_York\r\nX-WR-CALNAME:oncall\r\n" + vevent(
        "UID:abc123@google.com", "DTSTART:20260202T150000Z", "DTEND:20260202T170000Z",
        "RRULE:FREQ=WEEKLY;BYDAY=MO", "EXDATE:20260420T140000Z", "SUMMARY:release train") + TAIL,
}


def instant(component: object, key: str, tz: ZoneInfo) -> datetime:
    value = component[key].dt  # type: ignore[index]
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=tz).astimezone(UTC)
    return (value if value.tzinfo else value.replace(tzinfo=tz)).astimezone(UTC)


def oracle(raw: str, tz: ZoneInfo):
    calendar = x_wr_timezone.to_standard(icalendar.Calendar.from_ical(raw))
    query = recurring_ical_events.of(calendar)

    def held(at: datetime) -> bool:
        for event in query.between(at - timedelta(days=4), at + timedelta(days=4)):
            start = instant(event, "DTSTART", tz)
            end = instant(event, "DTEND", tz) if "DTEND" in event else start + event["DURATION"].dt
            if start <= at < end:
                return True
        return False
    return held


def write_fleet(root: Path, files: dict[str, str], toml: str) -> WindowsFile:
    for name, text in files.items():
        (root / name).write_text(text, newline="")
    (root / "windows.toml").write_text(toml)
    return WindowsFile(root)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_calendar_occurrences_agree_with_recurring_ical_events_on_1000_instants(tmp_path, name):
    raw = GOLDEN[name]
    windows_file = write_fleet(tmp_path, {f"{name}.ics": raw}, f'[[calendars]]\nname = "cal"\nics = "{name}.ics"\n')
    (window,) = windows_file.load()
    held = oracle(raw, window.tz)
    rng = random.Random(name)
    lo = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    instants = [datetime.fromtimestamp(rng.uniform(lo, lo + 366 * 86400), UTC).replace(microsecond=0)
                for _ in range(1000)]
    # the boundaries themselves: every start and end of the year
    instants += [o.start for _, o in _planned([window], datetime(2026, 1, 1, tzinfo=UTC), 366)]
    instants += [o.end for _, o in _planned([window], datetime(2026, 1, 1, tzinfo=UTC), 366)]
    wrong = [at for at in instants if bool(planned_holds(window_ahead(window, at), at + timedelta(microseconds=1))) != held(at)]
    assert not wrong, wrong[:5]
    assert sum(map(held, instants)) > 10  # the file does hold sometimes


def test_dst_moves_the_utc_start_but_not_the_wall_clock(tmp_path):
    windows_file = write_fleet(tmp_path, {"b.ics": GOLDEN["berlin-freeze"]}, '[[calendars]]\nname = "b"\nics = "b.ics"\n')
    (window,) = windows_file.load()
    starts = [o.start for _, o in _planned([window], datetime(2026, 3, 15, tzinfo=UTC), 30)]
    assert starts[:3] == [datetime(2026, 3, 20, 17, tzinfo=UTC), datetime(2026, 4, 3, 16, tzinfo=UTC),
                          datetime(2026, 4, 10, 16, tzinfo=UTC)]  # 03-27 excluded; CEST from 03-29


def test_a_moved_instance_keeps_its_id_from_uid_and_recurrence_id(tmp_path):
    windows_file = write_fleet(tmp_path, {"b.ics": GOLDEN["berlin-freeze"]}, '[[calendars]]\nname = "b"\nics = "b.ics"\n')
    (window,) = windows_file.load()
    moved = next(o for _, o in _planned([window], datetime(2026, 10, 29, tzinfo=UTC), 5))
    assert moved.start == datetime(2026, 10, 31, 8, tzinfo=UTC)
    assert moved.ident == "freeze-berlin@2026-10-30T17:00:00+00:00" and moved.reason == "change freeze (moved)"
    assert moved.key == "fleet/b@freeze-berlin@2026-10-30T17:00:00+00:00"


FILTERED = HEAD + vevent("UID:ops", "DTSTART:20260105T100000Z", "DTEND:20260105T110000Z", "CATEGORIES:Team,OPS",
                          "SUMMARY:db upgrade") + vevent(
    "UID:ops2", "DTSTART:20260106T100000Z", "DTEND:20260106T110000Z", "CATEGORIES:Team", "CATEGORIES:Ops",
    "SUMMARY:lunch") + vevent(
    "UID:other", "DTSTART:20260107T100000Z", "DTEND:20260107T110000Z", "CATEGORIES:Sales", "SUMMARY:db upgrade") + TAIL


@pytest.mark.parametrize("selector, kept", [
    ('categories = ["ops"]', ["ops", "ops2"]),  # either CATEGORIES line, any case
    ('summary = "^db "', ["ops", "other"]),
    ('categories = ["ops"]\nsummary = "^db "', ["ops"]),
    ("", ["ops", "ops2", "other"]),
])
def test_a_calendars_categories_and_summary_keep_only_the_events_they_match(tmp_path, selector, kept):
    windows_file = write_fleet(tmp_path, {"f.ics": FILTERED}, f'[[calendars]]\nname = "f"\nics = "f.ics"\n{selector}\n')
    (window,) = windows_file.load()
    found = _planned([window], datetime(2026, 1, 1, tzinfo=UTC), 30)
    assert [o.uid for _, o in found] == kept


def test_exclude_calendar_skips_starts_on_a_holiday_in_the_windows_zone(tmp_path):
    windows_file = write_fleet(tmp_path, {"h.ics": GOLDEN["holidays"]}, (
        '[[windows]]\nname = "nightly"\ncron = "30 1 * * *"\ntimezone = "Europe/Berlin"\nduration = "1h"\n'
        'exclude_calendar = "h.ics"\n'))
    (window,) = windows_file.load()
    days = {o.start.astimezone(window.tz).date() for _, o in _planned([window], datetime(2026, 12, 20, tzinfo=UTC), 14)}
    assert date(2026, 12, 23) in days and date(2026, 12, 27) in days
    assert not days & {date(2026, 12, 24), date(2026, 12, 25), date(2026, 12, 26), date(2027, 1, 1)}


def test_check_at_names_the_calendar_and_the_event(tmp_path):
    write_fleet(tmp_path, {"g.ics": GOLDEN["google"]}, '[[calendars]]\nname = "oncall"\nics = "g.ics"\n')
    env = {"HERMES_ROOT": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    held = subprocess.run([sys.executable, "-m", "hermes_estop", "check", "--at", "2026-07-06T14:30:00Z"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert held.returncode == 1, held.stderr
    assert "window:oncall" in held.stdout and "abc123@google.com@" in held.stdout and "release train" in held.stdout
    free = subprocess.run([sys.executable, "-m", "hermes_estop", "check", "--at", "2026-04-20T14:30:00Z"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert free.returncode == 0, free.stdout + free.stderr  # EXDATE


@pytest.mark.parametrize("body, what", [
    (HEAD + vevent("UID:x", "DTSTART:20260101T000000Z", "DURATION:PT1H", "RRULE:FREQ=DAILY;COUNT=999999999") + TAIL,
     "COUNT"),
    (HEAD + vevent("UID:x", "DTSTART:20260101T000000Z", "DURATION:PT1H", "RRULE:FREQ=SECONDLY") + TAIL, "SECONDLY"),
    (HEAD + vevent("UID:x", "DTSTART:19000101T000000Z", "DURATION:PT1H", "RRULE:FREQ=HOURLY") + TAIL, "steps"),
    (HEAD + "BEGIN:VEVENT\r\n" * 50 + "END:VEVENT\r\n" * 50 + TAIL, "nested"),
    (HEAD + vevent("UID:x", "DTSTART:20261399T250000Z", "DURATION:PT1H") + TAIL, "cannot parse"),
    (b"\xff\xfe garbage", "UTF-8"),
])
def test_a_hostile_feed_is_refused_naming_the_calendar(body, what):
    raw = body if isinstance(body, bytes) else body.encode()
    with pytest.raises(CalendarError) as info:
        parse_feed(raw, "'evil'", now=datetime(2026, 1, 1, tzinfo=UTC))
    assert str(info.value).startswith("calendar 'evil': ") and what in str(info.value)
    assert "\n" not in str(info.value)


def test_a_broken_local_feed_without_a_good_copy_fails_only_its_calendar(tmp_path):
    windows_file = write_fleet(tmp_path, {"bad.ics": "not a calendar"}, (
        '[[windows]]\nname = "w"\ncron = "0 2 * * *"\nduration = "1h"\n\n[[calendars]]\nname = "c"\nics = "bad.ics"\n'))
    parsed = windows_file.parse_each(windows_file.read())
    assert [w.name for w in parsed.windows] == ["w"]
    assert len(parsed.failures) == 1 and "calendar 'c'" in str(parsed.failures[0])


FEED_V1 = HEAD + vevent("UID:m1", "DTSTART:20260301T100000Z", "DTEND:20260301T120000Z", "SUMMARY:migration") + \
    vevent("UID:m2", "DTSTART:20260308T100000Z", "DTEND:20260308T120000Z", "SUMMARY:migration 2") + TAIL
# the armed one (m1) is gone and the future one moves a day later
FEED_V2 = HEAD + vevent("UID:m2", "DTSTART:20260309T100000Z", "DTEND:20260309T120000Z", "SUMMARY:migration 2") + TAIL


class Feed:
    """A feed on a local http.server (127.0.0.1 only): its body, ETag, or down / garbage."""

    def __init__(self) -> None:
        self.body = FEED_V1.encode()
        self.mode = "ok"
        self.requests: list[dict[str, str]] = []
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                feed.requests.append(dict(self.headers))
                if feed.mode == "500":
                    self.send_error(500)
                    return
                body = b"<html>oops</html>" if feed.mode == "garbage" else feed.body
                etag = f'"{hash(body) & 0xffffffff:x}"'
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/team.ics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def down(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def feed():
    served = Feed()
    yield served
    if served.thread.is_alive():
        served.down()


def test_a_url_feed_is_fetched_with_etag_and_keeps_its_last_good_copy(fleet_root, feed):
    assert fetch_once(fleet_root, feed.url, "'team'", timeout=5) is None
    copy, _ = cache_paths(fleet_root, feed.url)
    assert copy.read_bytes() == FEED_V1.encode()
    assert fetch_once(fleet_root, feed.url, "'team'", timeout=5) is None
    assert feed.requests[-1].get("If-None-Match")  # the second request was conditional
    for mode in ("garbage", "500"):
        feed.mode = mode
        assert fetch_once(fleet_root, feed.url, "'team'", timeout=5) is not None
        assert copy.read_bytes() == FEED_V1.encode()
    feed.down()
    assert fetch_once(fleet_root, feed.url, "'team'", timeout=2) is not None
    assert copy.read_bytes() == FEED_V1.encode()
    (fleet_root / "windows.toml").write_text(f'[[calendars]]\nname = "team"\nurl = "{feed.url}"\n')
    parsed = WindowsFile(fleet_root).parse_each((fleet_root / "windows.toml").read_bytes())
    assert [w.name for w in parsed.windows] == ["team"] and "cannot fetch" in parsed.stale["team"]


@pytest.mark.parametrize("table", ["calendars", "exclude_calendar"])
def test_the_fetcher_fetches_a_url_feed_that_has_no_copy_yet(fleet_root, feed, table):
    """The fetcher reads the file's feeds without binding them: a window's `exclude_calendar` url
    with no copy yet is fetched as a `[[calendars]]` url is (a bound read failed that window for
    its missing copy, so the fetcher never saw its url), and then the file binds."""
    text = (f'[[calendars]]\nname = "team"\nurl = "{feed.url}"\n' if table == "calendars" else
            f'[[windows]]\nname = "a"\ncron = "0 3 * * *"\nduration = "1h"\nexclude_calendar = "{feed.url}"\n')
    (fleet_root / "windows.toml").write_text(text)
    for thread in CalendarFetcher(fleet_root, timeout=5).pass_once():
        thread.join(30)
    assert cache_paths(fleet_root, feed.url)[0].read_bytes() == FEED_V1.encode()
    assert WindowsFile(fleet_root).parse_each((fleet_root / "windows.toml").read_bytes()).failures == []


def test_a_feed_edit_removing_the_armed_occurrence_waits_for_the_stability_rule(harness, feed):
    """The armed occurrence is untouched until the same content was read twice over 5 s; the
    future one moves; a feed that is down or answers garbage keeps the copy and the hold."""
    root = harness.root
    (root / "windows.toml").write_text(f'[[calendars]]\nname = "team"\nurl = "{feed.url}"\n')
    assert fetch_once(root, feed.url, "'team'", timeout=5) is None
    harness.clock.set(datetime(2026, 3, 1, 10, 30, tzinfo=UTC))
    harness.start()
    hold = harness.reading().hold
    assert hold is not None and hold.reason == "migration" and hold.window["occurrence"] == "m1"
    for mode in ("garbage", "500"):
        feed.mode = mode
        fetch_once(root, feed.url, "'team'", timeout=5)
        harness.clock.advance(seconds=10)
        harness.service.reconcile()
        assert harness.reading().hold.generation == hold.generation
    feed.mode, feed.body = "ok", FEED_V2.encode()
    assert fetch_once(root, feed.url, "'team'", timeout=5) is None
    report = harness.service.reconcile()
    assert report.pending is not None and harness.reading().hold.generation == hold.generation
    harness.clock.advance(seconds=4)
    assert harness.service.reconcile().pending is not None
    assert harness.reading().hold.generation == hold.generation
    harness.clock.advance(seconds=1)
    harness.service.reconcile()
    assert harness.reading().state is HoldState.ABSENT
    (window,) = WindowsFile(root).load()
    assert [o.start for _, o in _planned([window], harness.clock(), 30)] == [datetime(2026, 3, 9, 10, tzinfo=UTC)]


def test_export_then_import_gives_the_same_occurrences(tmp_path):
    write_fleet(tmp_path, {"g.ics": GOLDEN["google"], "b.ics": GOLDEN["berlin-freeze"]}, (
        '[[windows]]\nname = "nightly"\ncron = "30 1 * * *"\ntimezone = "Europe/Berlin"\nduration = "1h"\n'
        'drain = "10m"\n\n[[calendars]]\nname = "oncall"\nics = "g.ics"\n\n[[calendars]]\nname = "b"\nics = "b.ics"\n'))
    windows = WindowsFile(tmp_path).load()
    now = datetime(2026, 3, 20, 12, tzinfo=UTC)
    exported = ics_of(_planned(windows, now, 40), {}, now)
    assert exported == ics_of(_planned(windows, now, 40), {}, now)  # stable UIDs: the same feed twice
    again = tmp_path / "again"
    again.mkdir()
    write_fleet(again, {"export.ics": exported.decode()}, '[[calendars]]\nname = "x"\nics = "export.ics"\n')
    (imported,) = WindowsFile(again).load()
    before = [(o.start, o.end, w.reason_for(o.reason)) for w, o in _planned(windows, now, 40)]
    after = [(o.start, o.end, o.reason) for _, o in _planned([imported], now, 40)]
    assert after == before and len(before) > 40



def test_export_cancels_a_skipped_occurrence_and_describes_the_drain():
    window = Window.parse({"name": "nightly", "cron": "30 1 * * *", "duration": "1h", "drain": "10m", "scope": "ops"})
    now = datetime(2026, 3, 20, 12, tzinfo=UTC)
    events = _planned([window], now, 2)
    skipped = events[0][1]
    entries = {skipped.key: LedgerEntry(skipped.key, window.name, skipped.ident, window.scope, skipped.end, SKIPPED)}
    parsed = icalendar.Calendar.from_ical(ics_of(events, entries, now)).walk("VEVENT")
    assert [str(e["STATUS"]) for e in parsed] == ["CANCELLED", "CONFIRMED"]
    assert str(parsed[0]["DESCRIPTION"]) == (f"window nightly at ops; occurrence {skipped.ident}; "
                                             f"the fleet drains from {skipped.arm_at.isoformat()}")

@pytest.mark.slow
def test_a_real_serve_shows_calendar_occurrences_on_the_page_and_in_calendar_ics(tmp_path):
    import os
    import signal
    import socket
    import time
    import urllib.request

    near = datetime.now(UTC) + timedelta(days=2)
    feed = HEAD + vevent("UID:soon", f"DTSTART:{near:%Y%m%dT%H0000Z}", "DURATION:PT2H", "SUMMARY:db upgrade") + TAIL
    write_fleet(tmp_path, {"team.ics": feed}, '[[calendars]]\nname = "team"\nics = "team.ics"\n')
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, HERMES_ROOT=str(tmp_path), HOME=str(tmp_path))
    serve = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--http", f"127.0.0.1:{port}"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        body = page = b""
        for _ in range(240):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/calendar.ics?days=7", timeout=5).read()
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                break
            except OSError:
                time.sleep(0.25)
        assert b"SUMMARY:db upgrade" in body and b"X-HERMES-KEY:fleet/team@soon" in body
        assert b"team" in page
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(30)


def test_a_scoped_calendar_arms_a_hold_of_its_selector_only(harness):
    """Issue 33 item 4: `[[calendars]]` takes `only` and `jobs` as a window does; its window
    carries them as ordinary window fields, so its hold is scoped like a window's."""
    now = harness.clock.now
    feed = HEAD + vevent("UID:nightly-db", f"DTSTART:{now - timedelta(minutes=5):%Y%m%dT%H%M%SZ}", "DURATION:PT1H",
                         "SUMMARY:db vacuum") + TAIL
    write_fleet(harness.root, {"team.ics": feed}, '[[calendars]]\nname = "team"\nics = "team.ics"\n'
                                                  'only = ["cron"]\njobs = ["nightly-*"]\n')
    (window,) = harness.file.load()
    assert window.only == ["cron"] and window.jobs == ["nightly-*"]
    assert window.to_toml()["only"] == ["cron"] and window.to_json()["jobs"] == ["nightly-*"]
    harness.start()
    reading = harness.reading()
    assert reading.state is HoldState.ABSENT
    (hold,) = [s.hold for s in reading.scoped]
    assert hold.selector.components == {"cron"} and hold.armed_by == "window:team"
    assert not harness.estop.gate(None, None, "cron", "nightly-db") and harness.estop.gate(None, None, "cron", "hourly")
    assert harness.estop.gate(None, None, "kanban")


@pytest.mark.parametrize("field, value", [("only", "kanban"), ("only", [""]), ("jobs", ["a\x07"]), ("only", [3])])
def test_a_bad_selector_of_a_calendar_is_refused_as_a_window_s_is(field, value):
    from hermes_estop.windows.calendars import CalendarSource
    from hermes_estop.windows.model import InvalidWindow, Window

    with pytest.raises(InvalidWindow) as as_window:
        Window.parse({"name": "w", "at": "2030-01-01T00:00:00Z", "duration": "1h", field: value})
    with pytest.raises(InvalidWindow) as as_calendar:
        CalendarSource.parse({"name": "w", "ics": "team.ics", field: value})
    assert as_calendar.value.problems == as_window.value.problems


def test_windows_next_shows_an_event_in_its_own_zone_and_list_its_real_duration(tmp_path):
    """Issue 38 item 6: a TZID=Europe/Berlin event is shown at its Berlin wall time (the
    calendar sets no `timezone`), and `windows list` says the events' length, not a look-back."""
    import json

    feed = HEAD + vevent("UID:standup", "DTSTART;TZID=Europe/Berlin:20260105T100000",
                         "DTEND;TZID=Europe/Berlin:20260105T110000", "RRULE:FREQ=DAILY", "SUMMARY:standup") + TAIL
    write_fleet(tmp_path, {"team.ics": feed}, '[[calendars]]\nname = "team"\nics = "team.ics"\n')
    env = {"HERMES_ROOT": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def hermes(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "hermes_estop", "windows", *args], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = hermes("next", "team", "-n", "3")
    assert shown.count(" 10:00 CE") == 3, shown  # CET or CEST, the event's own wall clock
    local = [o["local_start"] for o in json.loads(hermes("next", "team", "--json"))["occurrences"]]
    assert local and all(start[11:16] == "10:00" and start[-6:] in ("+01:00", "+02:00") for start in local)
    listed = hermes("list")
    assert "for 1h " in listed and "2d" not in listed, listed
    (window,) = json.loads(hermes("list", "--json"))["windows"]
    assert window["duration"] == "1h" and window["durations"] == ["1h"]


def test_status_says_a_calendars_event_length_not_its_look_back(tmp_path):
    """`status` shows a calendar's windows as `windows list` does: the events' length (1h), never
    `duration`, how far back an event covering an instant may start (2d)."""
    feed = HEAD + vevent("UID:standup", "DTSTART:20260105T100000Z", "DTEND:20260105T110000Z", "RRULE:FREQ=DAILY",
                         "SUMMARY:standup") + TAIL
    write_fleet(tmp_path, {"team.ics": feed}, '[[calendars]]\nname = "team"\nics = "team.ics"\n')
    env = {"HERMES_ROOT": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "hermes_estop", "status"], env=env, capture_output=True, text=True,
                          timeout=120)
    line = next(line for line in done.stdout.splitlines() if line.strip().startswith("team:"))
    assert "calendar team.ics for 1h," in line and "2d" not in line, done.stdout
