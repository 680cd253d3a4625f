"""Occurrences of a window: the exact functions of a window and an instant (docs/design.md §6),
the definition the compiled schedule is built from and checked against.

An occurrence `[start, start + duration)` covers `[start - drain, end)`, half-open (the drain
lead arms its hold before the start). Durations are absolute time: a 2h window starting at 02:00
on a fall-back night ends two real hours later. The cron math is `model.cronspec`'s, shared with
the cron jobs so both follow one DST rule.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from itertools import islice, takewhile
from zoneinfo import ZoneInfo

from hermes_estop.model.cronspec import starts as cron_starts
from hermes_estop.model.timeutil import in_interval, to_utc
from hermes_estop.windows.ical import CalendarError
from hermes_estop.windows.model import Occurrence, Window

__all__ = ["MAX_EXCLUDED_RUN", "by_start", "covering", "following", "merge_armed", "next_armed", "next_start",
           "occurrences", "refusal", "upcoming"]


#: a run of more excluded starts in a row than this ends a window's occurrences, so that
#: `exclude_cron = "* * * * *"` cannot loop forever (an hourly window may be excluded for over a
#: year, a minutely one for six days); `hermes windows validate` warns about such a window
MAX_EXCLUDED_RUN = 10_000


def occurrences(window: Window, since: datetime, stopped: list[datetime] | None = None,
                cron: Callable[[str, ZoneInfo, datetime], Iterable[datetime]] = cron_starts) -> Iterator[Occurrence]:
    """Occurrences starting at or after `since`, in order, within the window's bounds (which
    select by start, half-open: an occurrence is never cut short), `enabled` or not. When a run
    of more than `MAX_EXCLUDED_RUN` excluded starts ends the scan, the start it stopped at is
    appended to `stopped`: nothing is known past it (a later start may not be excluded). `cron`
    gives an expression's starts in a zone (a compile shares them among the windows of one
    expression)."""
    since = to_utc(since)
    if window.not_before is not None and window.not_before > since:
        since = window.not_before
    feed = window.feed
    if feed is not None:
        if (why := refusal(window)) is not None:  # never "nothing": a hold armed for it would be taken as gone and lifted
            raise CalendarError(why)
        lead = window.drain or _NO_LEAD
        for event in feed.events(since):
            yield Occurrence(event.start, event.end, window.name, window.scope, lead, event.ident, event.uid, event.reason)
        return
    if window.at is not None:
        starts: Iterable[datetime] = (window.at,) if window.at >= since else ()
    else:
        starts = cron(window.cron or "", window.tz, since)
    excluded = 0
    for start in starts:
        if not in_interval(start, window.not_before, window.not_after):
            return
        if window.excludes(start):
            excluded += 1
            if excluded > MAX_EXCLUDED_RUN:
                if stopped is not None:
                    stopped.append(start)
                return
            continue
        excluded = 0
        yield Occurrence(start, start + window.duration, window.name, window.scope, window.drain or _NO_LEAD)


def refusal(window: Window) -> str | None:
    """Why the feed `window` reads (its calendar's, its `exclude_calendar`'s) was refused, or None.
    Such a window has no occurrences to tell: it arms nothing new and holds as it was
    (`WindowService._held_as_was`)."""
    feed = window.feed if window.exclude_calendar is None else window._holidays  # noqa: SLF001
    return None if feed is None else feed.refused


_NO_LEAD = timedelta(0)


def upcoming(window: Window, now: datetime, count: int) -> list[Occurrence]:
    """The next `count` occurrences that have not ended at `now` (one covering `now` first)."""
    return list(islice((o for o in occurrences(window, now - window.duration) if not o.ended(now)), max(count, 0)))


def covering(window: Window, now: datetime) -> list[Occurrence]:
    """The occurrences covering `now`, drain lead included (more than one when the lead and
    the duration exceed the period)."""
    armed = takewhile(lambda o: in_interval(now, o.arm_at, None), occurrences(window, now - window.duration))
    return [o for o in armed if o.covers(now)]


def next_start(window: Window, after: datetime) -> Occurrence | None:
    """The first occurrence starting strictly after `after`."""
    return next((o for o in occurrences(window, after) if o.start > after), None)


def next_armed(window: Window, after: datetime) -> Occurrence | None:
    """The first occurrence armed strictly after `after` (`arm_at`: its start less the drain lead)."""
    return next_start(window, after + (window.drain or _NO_LEAD))


def following(window: Window, occurrence: Occurrence) -> Occurrence | None:
    """The occurrence of `window` after `occurrence` in the order `occurrences` yields them (a
    calendar may have two events starting at one instant)."""
    passed = False
    for candidate in occurrences(window, occurrence.start):
        if passed or candidate.start > occurrence.start:
            return candidate
        passed = candidate == occurrence
    return None


def merge_armed(windows: Sequence[Window], now: datetime, first_armed: Callable[[Window, datetime], Occurrence | None],
                after: Callable[[Window, Occurrence], Occurrence | None]) -> Iterator[Occurrence]:
    """The occurrences of `windows` armed after `now`, in arm order (at one instant, in the order
    of `windows`), a window's next asked only once its previous one was taken (a chain held by a
    thousand windows asks each once)."""
    queue: list[tuple[datetime, int, Occurrence, Window]] = []
    for order, window in enumerate(windows):
        upcoming = first_armed(window, now)
        if upcoming is not None:
            queue.append((upcoming.arm_at, order, upcoming, window))
    heapq.heapify(queue)
    while queue:
        _, order, occurrence, window = heapq.heappop(queue)
        yield occurrence
        successor = after(window, occurrence)
        if successor is not None:
            heapq.heappush(queue, (successor.arm_at, order, successor, window))


def by_start(windows: list[Window], now: datetime, per_window: int) -> list[tuple[Window, Occurrence]]:
    """The next `per_window` occurrences of each window, soonest start first, then file order:
    what `hermes windows next` lists (issue 38)."""
    found = [(window, occurrence) for window in windows for occurrence in upcoming(window, now, per_window)]
    return sorted(found, key=lambda pair: pair[1].start)  # stable: at one start, in file order
