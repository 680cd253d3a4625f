"""Queries the tests ask of the windows code that the code itself never needs (issue 46 item 10):
where a private fleet root keeps its compiled schedule, every occurrence a compiled schedule has
starting in a range, and the exact functions' answer to the same question, so the property tests
can compare the two; windows as the rows the decisions take (`rows`), and a scope's plan with
what covers now found as the scheduler finds it (`scope_plan`)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from hermes_estop.model.hold import Reading
from hermes_estop.windows.ledger import LedgerEntry
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import covering, following, merge_armed, next_armed, occurrences
from hermes_estop.windows.plan import ScopePlan, plan_scope
from hermes_estop.windows.schedule import Schedule, ScheduleTimeline, Windows, build, micros
from hermes_estop.windows.scheduler import MAX_JOBS, _earliest, _jobs


def schedule_path(windows_path: Path) -> Path:
    """Where the schedule of `windows_path` is kept when its fleet root is private to its owner
    (`kept_files.kept_path`: else in the per-user cache directory)."""
    return windows_path.with_name(f".{windows_path.name}.schedule")


def starting_in(schedule: Schedule, first: datetime, last: datetime) -> list[Occurrence] | None:
    """Every occurrence of `schedule` starting in `[first, last)`, by start then row; None unless
    the whole range lies in its horizon."""
    if not (schedule.answers(first) and micros(last) <= schedule.hi):
        return None
    a, b = micros(first), micros(last)
    found = []
    for row in range(len(schedule.names)):
        lo, hi = schedule.offsets[row], schedule.offsets[row + 1]
        for index in range(bisect_left(schedule.starts, a, lo, hi), bisect_left(schedule.starts, b, lo, hi)):
            found.append((schedule.starts[index], row, index))
    found.sort()
    return [schedule.occurrence(row, index) for _, row, index in found]


def covering_all(schedule: Schedule, t: datetime) -> list[Occurrence] | None:
    """The occurrences of `schedule` covering `t`, enabled or not, by row then start
    (`Schedule.covering_row`); None unless the schedule holds them all."""
    found = [schedule.covering_row(row, t) for row in range(len(schedule))]
    return None if not schedule.answers(t) or None in found else [o for row in found for o in row or ()]


def starting_within(window: Window, first: datetime, last: datetime, limit: int = 256) -> list[Occurrence]:
    """The occurrences of `window` starting in the closed range `[first, last]`, at most `limit`."""
    out: list[Occurrence] = []
    for occurrence in occurrences(window, first):
        if occurrence.start > last or len(out) >= limit:
            break
        out.append(occurrence)
    return out


#: where `rows` starts a schedule's horizon unless told (any instant: outside its horizon a
#: schedule answers with the exact functions)
AT = datetime(2027, 1, 1, tzinfo=UTC)


def rows(windows: Iterable[Window], at: datetime = AT) -> Windows:
    """`windows` as the rows of a schedule compiled of them from `at` (what `plan_scope`,
    `chain_end` and the guard take)."""
    schedule = build("", list(windows), at)
    assert schedule is not None
    return ScheduleTimeline(schedule).windows


def scope_plan(scope: str, now: datetime, windows: Windows, entries: Mapping[str, LedgerEntry],
               reading: Reading) -> ScopePlan:
    """`plan_scope` given what of `windows` covers `now` (`covering_now`, as the scheduler's lanes)."""
    covered = [o for found in windows.timeline.covering_now(windows, now).values() for o in found]
    return plan_scope(scope, now, windows, entries, reading, covered=covered)


class ExactTimeline:
    """What a `ScheduleTimeline` answers, of the exact functions: the oracle it is checked
    against."""

    def covering(self, window: Window, now: datetime) -> tuple[Occurrence, ...]:
        return tuple(covering(window, now))

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        return next_armed(window, now)

    def after(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        return following(window, occurrence)

    def armed_after(self, windows: list[Window], now: datetime) -> Iterator[Occurrence]:
        return merge_armed(windows, now, self.first_armed, self.after)


EXACT = ExactTimeline()


def wakeups_for(windows: Iterable[Window], now: datetime, limit: int = MAX_JOBS) -> dict[str, datetime]:
    """What `scheduler.due_wakeups` answers off a compiled schedule, of the exact functions: the
    oracle it is checked against."""
    out: dict[str, datetime] = {}
    for window in windows:
        if window.enabled:
            _jobs(out, window.name, next_armed(window, now), covering(window, now), now)
    return _earliest(out, limit)
