"""A calendar feed refused in the middle of a window pass (after the pass read windows.toml: by
another thread's expansion, or by the pass's own going over the expansion budget) fails at most
that pass, with one line and no traceback; a refusal is not an edit, so the hold armed for the
calendar's window stays as it was; the next read names that window failing and every other
window arms as usual (found by CI: tests/cli/test_serve_shutdown.py logged a traceback about 1
run in 4). Real files, real feeds, real threads; the fake clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from feed_servers import HEAD, TAIL, refuse_from_another_thread, vevent
from hermes_estop.windows.ical import MAX_STEPS, CalendarError
from hermes_estop.windows.ledger import ARMED

#: where an hourly rule from `RULE_START` walks past `MAX_STEPS` steps (one per hour)
RULE_START = datetime(2025, 1, 1, tzinfo=UTC)
OVER_BUDGET = RULE_START + timedelta(hours=MAX_STEPS)
#: an hourly rule: within its budget around now (the read probes it), over it asked about 2060
HOURLY = vevent("UID:h", f"DTSTART:{RULE_START:%Y%m%dT%H%M%SZ}", "DURATION:PT30M", "RRULE:FREQ=HOURLY")
BROKEN = '[[windows]]\nname = "broken"\ncron = "not a cron"\nduration = "1h"\n\n'


def stamp(when: datetime) -> str:
    return f"{when:%Y%m%dT%H%M%SZ}"


def write_files(harness, request, freeze: tuple[datetime, datetime], other_at: datetime, *, broken: bool) -> None:
    """windows.toml: `nightly` at `other_at` on scope ops, the calendar `cal` (the event `freeze`
    and the hourly rule) on the fleet, with `broken` a table that does not validate (then the pass
    plans off a schedule compiled in memory, the calendar's window asked of its feed)."""
    unique = vevent(f"UID:{request.node.name}", "DTSTART:20200101T000000Z", "DURATION:PT1M")  # feeds are kept by digest
    (harness.root / "cal.ics").write_text(HEAD + vevent("UID:freeze", f"DTSTART:{stamp(freeze[0])}",
                                                        f"DTEND:{stamp(freeze[1])}", "SUMMARY:freeze")
                                          + HOURLY + unique + TAIL, newline="")
    (harness.root / "windows.toml").write_text(
        f'[[windows]]\nname = "nightly"\nat = {other_at.isoformat().replace("+00:00", "Z")}\nduration = "1h"\n'
        f'scope = "ops"\n\n{BROKEN if broken else ""}[[calendars]]\nname = "cal"\nics = "cal.ics"\n')


def calendar_feed(harness):
    return next(w for w in harness.service.guard.trusted if w.name == "cal").feed


def no_traceback(caplog) -> None:
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a pass failed with a traceback"


def armed(harness) -> tuple[str, datetime]:
    """The generation and deadline of the fleet's hold, armed for the window `cal`."""
    hold = harness.reading().hold
    assert hold is not None and hold.window["name"] == "cal"
    return hold.generation, hold.expires_at


def assert_held_as_armed(harness, generation: str, deadline: datetime) -> None:
    hold = harness.reading().hold
    assert hold is not None and (hold.generation, hold.expires_at) == (generation, deadline)
    cal = {k: e.state for k, e in harness.entries().items() if e.window == "cal"}
    assert cal and set(cal.values()) == {ARMED}, cal


def assert_the_next_read_fails_it_and_the_others_arm(harness, caplog, armed: tuple[str, datetime],
                                                     other_at: datetime) -> None:
    harness.clock.advance(minutes=1)
    after = harness.service.reconcile()
    assert [line for line in after.failed if "window 'cal'" in line and "200000 steps" in line], after.failed
    assert after.pending is None, after.pending
    assert_held_as_armed(harness, *armed)
    harness.run_until(other_at + timedelta(minutes=1), poll=True)
    ops = harness.reading("ops").hold
    assert ops is not None and ops.window["name"] == "nightly"
    assert_held_as_armed(harness, *armed)
    no_traceback(caplog)


#: holidays from July 2026 on (an hourly rule): within its budget around now, over it asked about 2060
LATER_DAYS = vevent("UID:later", "DTSTART:20260701T000000Z", "DURATION:PT30M", "RRULE:FREQ=HOURLY")


def write_holidays(harness, request, other_at: datetime, *, broken: bool) -> None:
    """windows.toml: `nightly` as `write_files`, and `cal` a daily window covering now that
    excludes the days of `holidays.ics`."""
    unique = vevent(f"UID:{request.node.name}", "DTSTART:20200101T000000Z", "DURATION:PT1M")
    (harness.root / "holidays.ics").write_text(HEAD + LATER_DAYS + unique + TAIL, newline="")
    (harness.root / "windows.toml").write_text(
        f'[[windows]]\nname = "nightly"\nat = {other_at.isoformat().replace("+00:00", "Z")}\nduration = "1h"\n'
        f'scope = "ops"\n\n{BROKEN if broken else ""}[[windows]]\nname = "cal"\n'
        f'cron = "0 {harness.clock.now.hour} * * *"\nduration = "3h"\nexclude_calendar = "holidays.ics"\n')


@pytest.mark.parametrize("broken", [False, True], ids=["file-valid", "a-table-failing"])
@pytest.mark.parametrize("kind", ["calendar", "exclude_calendar"])
def test_a_feed_refused_by_another_thread_after_the_read_keeps_the_window_s_hold_and_the_others_arm(
        harness, request, caplog, kind, broken):
    now = harness.clock.now
    other_at = now + timedelta(minutes=5)
    if kind == "calendar":
        write_files(harness, request, (now - timedelta(hours=1), now + timedelta(hours=3)), other_at, broken=broken)
    else:
        write_holidays(harness, request, other_at, broken=broken)
    first = harness.start()
    assert [e.kind for e in first.events] == ["arm"] and first.events[0].windows == ("cal",), first.to_json()
    before = armed(harness)
    window = next(w for w in harness.service.guard.trusted if w.name == "cal")
    feed = window.feed if kind == "calendar" else window._holidays
    leader = harness.service.is_leader

    def refused_after_the_read() -> bool:  # the pass asks after it read the file, before it plans
        harness.service.is_leader = leader
        refuse_from_another_thread(feed)
        return True

    harness.service.is_leader = refused_after_the_read
    harness.clock.advance(minutes=1)
    report = harness.service.reconcile()
    assert harness.service.is_leader is leader, "the pass never asked"
    assert not [e for e in report.events if e.kind == "retire"], report.events
    assert_held_as_armed(harness, *before)
    lines = [line for line in report.errors if "window cal" in line and "200000 steps" in line]
    assert len(lines) == 1 and "\n" not in lines[0], report.errors
    assert_the_next_read_fails_it_and_the_others_arm(harness, caplog, before, other_at)


@pytest.mark.parametrize("broken", [False, True], ids=["file-valid", "a-table-failing"])
def test_a_feed_refused_by_the_pass_s_own_expansion_fails_that_pass_alone_with_one_line(harness, request, caplog,
                                                                                        broken):
    """Armed 300 days before the hourly rule's walk passes its budget, inside a 364-day event;
    363 days later the pass asks the weeks around then: the feed is refused while the pass runs."""
    caplog.set_level(logging.INFO, logger="hermes_estop.windows")
    armed_at = OVER_BUDGET - timedelta(days=300)
    refused_at = armed_at + timedelta(days=363)
    other_at = refused_at + timedelta(minutes=5)
    harness.clock.set(armed_at)
    write_files(harness, request, (armed_at - timedelta(hours=1), armed_at + timedelta(days=364)), other_at,
                broken=broken)
    first = harness.start()
    assert [e.kind for e in first.events] == ["arm"] and first.events[0].windows == ("cal",), first.to_json()
    before = armed(harness)
    assert calendar_feed(harness).refused is None

    harness.clock.set(refused_at)
    report = harness.service.reconcile()
    no_traceback(caplog)
    assert calendar_feed(harness).refused is not None  # refused by this pass, after its read
    lines = [line for line in report.errors if "calendar 'cal'" in line]
    assert len(lines) == 1 and "200000 steps" in lines[0] and "\n" not in lines[0], report.errors
    assert not report.events
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and "calendar 'cal'" in r.getMessage()]
    assert errors and all("\n" not in message for message in errors)
    assert_held_as_armed(harness, *before)
    assert_the_next_read_fails_it_and_the_others_arm(harness, caplog, before, other_at)


@pytest.mark.parametrize("question", ["covering", "next_armed", "upcoming"])
def test_a_refused_calendar_feed_answers_no_question_rather_than_none(tmp_path, request, question):
    """Answering "no occurrence" would withdraw the occurrence the window armed and retire its hold."""
    from hermes_estop.windows import occurrences
    from hermes_estop.windows.windows_file import WindowsFile

    unique = vevent(f"UID:{request.node.name}", "DTSTART:20200101T000000Z", "DURATION:PT1M")
    (tmp_path / "cal.ics").write_text(HEAD + HOURLY + unique + TAIL, newline="")
    (tmp_path / "windows.toml").write_text('[[calendars]]\nname = "cal"\nics = "cal.ics"\n')
    (cal,) = WindowsFile(tmp_path).load()
    now = datetime(2026, 6, 1, 12, 10, tzinfo=UTC)
    assert occurrences.covering(cal, now)  # an hourly event covers now
    refuse_from_another_thread(cal.feed)
    ask = {"covering": lambda: occurrences.covering(cal, now), "next_armed": lambda: occurrences.next_armed(cal, now),
           "upcoming": lambda: occurrences.upcoming(cal, now, 3)}[question]
    with pytest.raises(CalendarError, match="calendar 'cal': one rule walks more than 200000 steps"):
        ask()
    assert occurrences.refusal(cal) is not None and occurrences.refusal(cal).startswith("calendar 'cal': ")
