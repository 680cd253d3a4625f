"""A window excluded for more than `MAX_EXCLUDED_RUN` starts in a row is not gone for good
(issue 45): a running scheduler that found no next occurrence asks again, so it arms the window
when its exclusion ends, as `check --at` and a restarted scheduler say it holds. On the fake
clock, with the real scheduler, ledger and sentinel; croniter does the cron arithmetic."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.windows import schedule
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import MAX_EXCLUDED_RUN, covering, next_start, upcoming
from hermes_estop.windows.windows_file import WindowsFile

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


JUNE_6 = datetime(2026, 6, 6, tzinfo=UTC)  # 4,320 excluded starts before June 9: the exact scan finds it
WINDOW_EXCLUDE_DATES = {**{k: v for k, v in WINDOW.items() if k != "exclude_cron"},
                        "exclude": [f"2026-06-0{day}" for day in range(1, 9)]}


@pytest.mark.parametrize("table", [WINDOW, WINDOW_EXCLUDE_DATES], ids=["exclude_cron", "exclude"])
def test_a_schedule_kept_from_before_a_long_excluded_run_never_tells_a_later_command_there_is_no_next(
        tmp_path, table, kept_schedule):
    """A schedule built when a window's excluded run was longer than a scan takes (June 1) is
    still fresh on June 6, when the exact functions find June 9: it must decline (the exact
    functions answer) rather than say the window has no occurrence ahead (`windows next`,
    `status`'s next, the export) while `check --at` says June 9 holds."""
    tmp_path.chmod(0o700)
    path = tmp_path / "windows.toml"
    WindowsFile(tmp_path).save([Window.parse(table)])
    raw = path.read_bytes()
    assert schedule.load(path, raw, WindowsFile(tmp_path).load, JUNE_1) is not None  # a command on June 1
    kept = kept_schedule(path, raw, JUNE_6)
    assert kept is not None, "the June 1 schedule is no longer fresh on June 6: the case is not tested"
    window = Window.parse(table)
    row = kept.row_of("minutely")
    assert row is not None
    exact_next = next_start(window, JUNE_6)
    assert exact_next is not None and exact_next.start == datetime(2026, 6, 9, tzinfo=UTC)
    found = kept.next_start(row, JUNE_6)
    assert found is False or found == exact_next, found
    answered = kept.upcoming(row, JUNE_6, 2)
    assert answered is None or answered == upcoming(window, JUNE_6, 2), answered
    assert list(itertools.islice(kept.not_ended(row, JUNE_6), 2)) == upcoming(window, JUNE_6, 2)
    command = schedule.schedule_of(WindowsFile(tmp_path), JUNE_6)  # what `windows next` reads
    answered = command.upcoming(row, JUNE_6, 1)
    assert answered is None or answered == [exact_next], answered
