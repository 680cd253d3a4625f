"""A change of a window's `exclude_calendar` feed is judged by what it does (docs/design.md §8a,
issue 45): one that makes the window cover now (today's holiday removed) is a strengthening and
arms at the next read; one that takes away the occurrence holding now (today made a holiday)
waits for the stability rule. On the fake clock, with the real scheduler, ledger and sentinel."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hermes_estop.model.hold import HoldState

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hermes-estop tests//EN\r\n"
TAIL = "END:VCALENDAR\r\n"
TODAY = HEAD + ("BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\nUID:today\r\nDTSTART;VALUE=DATE:20260601\r\n"
                "DTEND;VALUE=DATE:20260602\r\nSUMMARY:holiday\r\nEND:VEVENT\r\n") + TAIL
NONE = HEAD + ("BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\nUID:later\r\nDTSTART;VALUE=DATE:20261224\r\n"
               "DTEND;VALUE=DATE:20261225\r\nSUMMARY:later\r\nEND:VEVENT\r\n") + TAIL
WINDOW = '[[windows]]\nname = "daily"\ncron = "0 10 * * *"\ntimezone = "UTC"\nduration = "4h"\nexclude_calendar = "h.ics"\n'
NOW = datetime(2026, 6, 1, 11, 0, tzinfo=UTC)


def setup(harness, feed: str) -> None:
    (harness.root / "h.ics").write_text(feed)
    (harness.root / "windows.toml").write_text(WINDOW)
    harness.clock.set(NOW)
    harness.start()


def test_removing_todays_holiday_from_an_exclude_calendar_arms_at_the_next_read(harness):
    setup(harness, TODAY)
    assert harness.reading().state is HoldState.ABSENT
    (harness.root / "h.ics").write_text(NONE)
    harness.clock.advance(seconds=1)
    report = harness.service.reconcile()
    assert report.pending is None, report.pending
    hold = harness.reading().hold
    assert hold is not None and hold.expires_at == datetime(2026, 6, 1, 14, tzinfo=UTC)


def test_making_today_a_holiday_while_the_window_holds_waits_for_the_stability_rule(harness):
    setup(harness, NONE)
    generation = harness.reading().hold.generation
    (harness.root / "h.ics").write_text(TODAY)
    harness.clock.advance(seconds=1)
    assert harness.service.reconcile().pending is not None
    harness.clock.advance(seconds=4)
    assert harness.service.reconcile().pending is not None
    assert harness.reading().hold.generation == generation
    harness.clock.advance(seconds=1)
    harness.service.reconcile()
    assert harness.reading().state is HoldState.ABSENT


@pytest.mark.parametrize(("edit", "said"), [
    ("feed", "the calendar feeds of windows.toml changed: window(s) daily gone or weakened; not acted on until they "
             "stay the same"),
    ("file", "windows.toml changed: window(s) daily gone or weakened; not acted on until the file stays the same"),
])
def test_a_weakening_read_says_whether_the_feed_or_the_file_changed(harness, edit, said):
    """A feed-only change is not reported as an edit of windows.toml (issue 45)."""
    setup(harness, NONE)
    if edit == "feed":
        (harness.root / "h.ics").write_text(TODAY)
    else:
        (harness.root / "windows.toml").write_text(WINDOW.replace('"4h"', '"2h"'))
    harness.clock.advance(seconds=1)
    pending = harness.service.reconcile().pending
    assert pending is not None and pending.startswith(said), pending
