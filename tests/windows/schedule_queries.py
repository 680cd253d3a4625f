"""Queries the tests ask of the windows code that the code itself never needs (issue 46 item 10):
where a private fleet root keeps its compiled schedule, every occurrence a compiled schedule has
starting in a range, and the exact functions' answer to the same question, so the property tests
can compare the two."""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime
from pathlib import Path

from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import occurrences
from hermes_estop.windows.schedule import Schedule, micros


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


def starting_within(window: Window, first: datetime, last: datetime, limit: int = 256) -> list[Occurrence]:
    """The occurrences of `window` starting in the closed range `[first, last]`, at most `limit`."""
    out: list[Occurrence] = []
    for occurrence in occurrences(window, first):
        if occurrence.start > last or len(out) >= limit:
            break
        out.append(occurrence)
    return out
