"""The compiled schedule of a calendar feed (issue 35): the events of the parsed feed exactly,
inside its compiled chunks and outside them; read by the next process without parsing; never
used for other bytes, other settings, a stale build, a damaged or a wrongly owned file."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.windows import calendars
from hermes_estop.windows.feed_schedule import HORIZON, CompiledFeed, compile_feed, compiled_feed, feed_key
from hermes_estop.windows.ical import Feed, parse_feed

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hermes-estop tests//EN\r\nX-WR-TIMEZONE:Europe/Berlin\r\n"
TAIL = "END:VCALENDAR\r\n"
#: a zone defined in the feed itself
VTIMEZONE = ("BEGIN:VTIMEZONE\r\nTZID:Custom Plus Five\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\n"
             "TZOFFSETFROM:+0500\r\nTZOFFSETTO:+0500\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n")


def vevent(*lines: str) -> str:
    return "BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\n" + "".join(f"{line}\r\n" for line in lines) + "END:VEVENT\r\n"


#: weekly in a named zone with a moved instance, a yearly all-day holiday, a daily floating
#: time (the calendar's zone), an event in a custom VTIMEZONE, a cancelled one
VARIED = HEAD + VTIMEZONE + vevent(
    "UID:freeze", "DTSTART;TZID=America/New_York:20260105T220000", "DURATION:PT6H",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,TH", "SUMMARY:NY freeze") + vevent(
    "UID:freeze", "RECURRENCE-ID;TZID=America/New_York:20261210T220000",
    "DTSTART;TZID=America/New_York:20261211T080000", "DURATION:PT2H", "SUMMARY:NY freeze (moved)") + vevent(
    "UID:xmas", "DTSTART;VALUE=DATE:20251224", "DTEND;VALUE=DATE:20251227", "RRULE:FREQ=YEARLY",
    "SUMMARY:Christmas") + vevent(
    "UID:nightly", "DTSTART:20260301T020000", "DTEND:20260301T023000", "RRULE:FREQ=DAILY") + vevent(
    "UID:custom", "DTSTART;TZID=Custom Plus Five:20260302T100000", "DTEND;TZID=Custom Plus Five:20260302T110000",
    "RRULE:FREQ=WEEKLY", "SUMMARY:custom zone") + vevent(
    "UID:gone", "DTSTART:20261207T100000Z", "DTEND:20261207T110000Z", "STATUS:CANCELLED") + TAIL
RAW = VARIED.encode()
NOW = datetime(2026, 12, 5, 18, 0, tzinfo=UTC)
SETTINGS = "'cal'\0[]\0None"


def parser(raw: bytes = RAW, now: datetime = NOW) -> Callable[[], Feed]:
    return lambda: parse_feed(raw, "'cal'", now=now)


def key_of(raw: bytes, settings: str) -> str:
    return feed_key(hashlib.sha256(raw).hexdigest(), settings)


def never() -> Feed:
    raise AssertionError("the feed was parsed")


@pytest.fixture
def compiled(tmp_path: Path) -> Path:
    path = tmp_path / "calendars" / "feed.schedule"
    compile_feed(path, key_of(RAW, SETTINGS), parser()(), NOW, private=False)
    assert path.is_file()
    return path


def load(path: Path, now: datetime = NOW, parse: Callable[[], Feed] = never, raw: bytes = RAW,
         settings: str = SETTINGS) -> CompiledFeed | None:
    return compiled_feed(path, key_of(raw, settings), "'cal'", now, parse)


@pytest.mark.parametrize("since", [NOW - timedelta(days=40), NOW - timedelta(days=1), NOW, NOW + timedelta(days=3),
                                   NOW + timedelta(days=200), NOW + timedelta(days=800)],
                         ids=["40d-before", "1d-before", "now", "3d-after", "200d-after", "800d-after"])
def test_a_compiled_feed_answers_exactly_as_the_parsed_feed(compiled, since):
    exact = parser()()
    found = load(compiled, parse=parser())
    assert found is not None
    lookahead = timedelta(days=60)
    assert list(found.events(since, lookahead)) == list(exact.events(since, lookahead))
    assert found.between(since, since + timedelta(days=10)) == exact.between(since, since + timedelta(days=10))
    days = [since.date() + timedelta(days=n) for n in range(0, 30, 3)] + [date(2026, 12, 25)]
    assert [found.covers_day(d, exact.tz) for d in days] == [exact.covers_day(d, exact.tz) for d in days]
    assert {uid: found.zone_of(uid) for uid in ("freeze", "xmas", "nightly", "custom")} == \
        {uid: exact.zone_of(uid) for uid in ("freeze", "xmas", "nightly", "custom")}
    assert (found.spans, found.longest, found.tz, found.digest) == (exact.spans, exact.longest, exact.tz, exact.digest)
    assert found == exact


def test_the_weeks_near_its_build_are_answered_without_parsing(compiled):
    found = load(compiled, now=NOW + HORIZON / 4)
    assert found is not None
    events = list(found.events(NOW - found.longest, HORIZON))
    assert {e.uid for e in events} >= {"freeze", "nightly", "custom"}
    assert "gone" not in {e.uid for e in events}
    assert any(e.reason == "NY freeze (moved)" for e in events)
    assert found.zone_of("freeze").key == "America/New_York"  # type: ignore[attr-defined]
    found.probe(NOW + HORIZON / 4)


def test_a_zone_without_an_iana_name_is_asked_of_the_parsed_feed(compiled):
    lines = compiled.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["zones"]["custom"] = None  # what a zone icalendar builds from a VTIMEZONE alone is compiled as
    compiled.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    found = load(compiled, parse=parser())
    assert found is not None
    assert found.zone_of("custom") == parser()().zone_of("custom")
    with pytest.raises(AssertionError, match="parsed"):
        load(compiled).zone_of("custom")  # type: ignore[union-attr]


@pytest.mark.parametrize(("raw", "settings"), [(RAW + b"\r\n", SETTINGS), (RAW, "'cal'\0[\"deploy\"]\0None"),
                                               (RAW, "'other'\0[]\0None")],
                         ids=["other-bytes", "other-filter", "other-label"])
def test_a_compiled_feed_never_answers_for_other_bytes_or_settings(compiled, raw, settings):
    assert load(compiled, raw=raw, settings=settings) is None


@pytest.mark.parametrize("now", [NOW - timedelta(seconds=1), NOW + HORIZON / 2],
                         ids=["built-in-the-future", "half-its-horizon-old"])
def test_a_compiled_feed_outside_its_time_is_compiled_again(compiled, now):
    assert load(compiled, now=now) is None


def _damage(path: Path, how: str) -> None:
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    if how == "truncated":
        path.write_bytes(b"\n".join(lines[:-1]))
    elif how == "not-json":
        path.write_bytes(b"\n".join([lines[0], b"{[", *lines[2:]]))
    elif how == "start-as-text":
        chunk = json.loads(lines[1]) or [[0, 1, "i", "u", "r", None]]
        chunk[0][0] = str(chunk[0][0])
        path.write_bytes(b"\n".join([lines[0], json.dumps(chunk).encode(), *lines[2:]]))
    elif how == "bad-date":
        chunk = [[0, 86400, "i", "u", "r", ["2026-13-45", "2026-12-26"]]]
        path.write_bytes(b"\n".join([lines[0], json.dumps(chunk).encode(), *lines[2:]]))
    elif how == "bad-zone":
        header["zones"] = {"freeze": "Not/AZone"}
        path.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))


@pytest.mark.parametrize("how", ["truncated", "not-json", "start-as-text", "bad-date", "bad-zone"])
def test_a_damaged_compiled_feed_is_ignored_with_one_line(compiled, how, caplog):
    _damage(compiled, how)
    with caplog.at_level(logging.WARNING):
        assert load(compiled) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "compiled again" in warnings[0].getMessage()


def test_a_compiled_feed_writable_by_others_is_not_read(compiled, caplog):
    os.chmod(compiled, 0o666)
    with caplog.at_level(logging.WARNING):
        assert load(compiled) is None
    assert any("writable by group or others" in r.getMessage() for r in caplog.records)


def test_the_next_process_reads_the_feed_compiled_by_the_first(tmp_path, monkeypatch):
    (tmp_path / "cal.ics").write_bytes(RAW)
    (tmp_path / "windows.toml").write_text('[[calendars]]\nname = "cal"\nics = "cal.ics"\n')
    env = {**os.environ, "HERMES_ROOT": str(tmp_path), "HERMES_HOME": str(tmp_path)}
    env.pop("HERMES_ESTOP_STORE", None)

    def next_() -> object:
        done = subprocess.run([sys.executable, "-m", "hermes_estop", "windows", "next", "--json"], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        return json.loads(done.stdout)["occurrences"]

    first = next_()
    (written,) = (tmp_path / "calendars").glob("*.schedule")
    assert next_() == first
    monkeypatch.setattr(calendars, "_FEEDS", type(calendars._FEEDS)())
    feed, problem = calendars.load_feed(tmp_path, "cal.ics", "'cal'", salt=json.dumps([[], None, None]))
    assert problem is None and isinstance(feed, CompiledFeed)
    assert written.stat().st_size > 0


def _compiled_by_a_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read the local feed `cal.ics` of fleet `root` (this process parsing it, and keeping its
    compiled schedule), with the umask a fleet's files are made with."""
    (root / "cal.ics").write_bytes(RAW)
    monkeypatch.setattr(calendars, "_FEEDS", type(calendars._FEEDS)())
    umask = os.umask(0o022)
    try:
        calendars.load_feed(root, "cal.ics", "'cal'")
    finally:
        os.umask(umask)


def test_the_fleets_calendars_directory_is_made_as_the_fetcher_makes_it_never_private(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every operator of the fleet reads the compiled feeds kept beside its copies of the feeds."""
    root = tmp_path / "fleet"
    root.mkdir()
    root.chmod(0o755)
    _compiled_by_a_read(root, monkeypatch)
    where = root / calendars.CALENDAR_DIR
    assert len(list(where.glob(".*.schedule"))) == 1 and where.stat().st_mode & 0o777 == 0o755


def test_a_cache_directory_named_calendars_is_made_private(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calendars directory its group can write keeps the compiled feed in this user's cache,
    which is made private whatever it is called (the directory's name says nothing of it)."""
    root = tmp_path / "fleet"
    (root / calendars.CALENDAR_DIR).mkdir(parents=True)
    (root / calendars.CALENDAR_DIR).chmod(0o775)
    cache = tmp_path / "cache" / calendars.CALENDAR_DIR
    cache.parent.mkdir()
    monkeypatch.setenv("HERMES_ESTOP_CACHE", str(cache))
    _compiled_by_a_read(root, monkeypatch)
    assert len(list(cache.glob("*.schedule"))) == 1 and cache.stat().st_mode & 0o777 == 0o700
    assert not list((root / calendars.CALENDAR_DIR).glob("*.schedule"))
