"""A window excluded for more than `MAX_EXCLUDED_RUN` starts in a row is not gone for good
(issue 45): a running scheduler that found no next occurrence asks again, so it arms the window
when its exclusion ends, as `check --at` and a restarted scheduler say it holds. On the fake
clock, with the real scheduler, ledger and sentinel; croniter does the cron arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import MAX_EXCLUDED_RUN, covering

#: minutely, excluded on days 1-8 of every month: 11,520 excluded starts in a row from June 1
WINDOW = {"name": "minutely", "cron": "* * * * *", "timezone": "UTC", "duration": "1m",
          "exclude_cron": "* * 1-8 * *"}
JUNE_1 = datetime(2026, 6, 1, tzinfo=UTC)
HELD_AT = datetime(2026, 6, 9, 0, 0, 30, tzinfo=UTC)


def test_a_running_scheduler_arms_a_window_after_more_excluded_starts_than_a_scan_takes(harness):
    assert MAX_EXCLUDED_RUN < 8 * 24 * 60
    window = Window.parse(WINDOW)
    assert covering(window, HELD_AT)  # what `check --at` asks: held
    harness.write(WINDOW)
    harness.clock.set(JUNE_1)
    harness.start()
    assert harness.reports[-1].active == []
    for day in range(2, 9):  # a poll a day stands for the poll loop's (the answers are the same between)
        harness.run_until(JUNE_1 + timedelta(days=day - 1, hours=12), poll=True)
        assert harness.reports[-1].active == []
    harness.run_until(HELD_AT, poll=True)
    assert harness.reports[-1].active == ["fleet/minutely@2026-06-09T00:00:00+00:00"]
    assert harness.engaged_at(HELD_AT)
    restarted = harness.restart()  # what a restarted scheduler says at the same instant
    assert restarted.active == harness.reports[-2].active
