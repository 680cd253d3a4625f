"""Occurrences of a window: the exact functions of a window and an instant (docs/design.md §6),
the definition the compiled schedule is built from and checked against.

An occurrence `[start, start + duration)` covers `[start - drain, end)`, half-open (the drain
lead arms its hold before the start). Durations are absolute time: a 2h window starting at 02:00
on a fall-back night ends two real hours later. The cron math is `model.cronspec`'s, shared with
the cron jobs so both follow one DST rule.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from itertools import islice, takewhile
from typing import Protocol, overload

from hermes_estop.model.cronspec import starts as cron_starts
from hermes_estop.model.selector import Selector
from hermes_estop.model.timeutil import format_instant, in_interval, to_utc
from hermes_estop.windows.ical import CalendarError
from hermes_estop.windows.model import Window

__all__ = ["EXACT", "MAX_EXCLUDED_RUN", "ExactTimeline", "Occurrence", "Rows", "Timeline", "Windows", "by_start",
           "covering", "following", "merge_armed", "next_armed", "next_start", "occurrence_key", "occurrences",
           "refusal", "table_of", "upcoming"]


@dataclass(frozen=True, order=True, slots=True)
class Occurrence:
    """One occurrence: `[start, end)` of `window`, held at `scope`, instants aware UTC. A
    calendar's also has its `event` (the id from UID and RECURRENCE-ID: it stays when the
    instance is moved), the event's `uid` and its `reason` (the SUMMARY)."""

    start: datetime
    end: datetime
    window: str
    scope: str
    lead: timedelta = field(default=timedelta(0), compare=False)
    event: str | None = None
    uid: str | None = field(default=None, compare=False)
    reason: str | None = field(default=None, compare=False)

    @property
    def arm_at(self) -> datetime:
        return self.start - self.lead if self.lead else self.start

    @property
    def ident(self) -> str:
        """What the hold's `window` field names it by: the start, ISO-8601 UTC (a calendar's: the
        event's id)."""
        return self.event or to_utc(self.start).isoformat()

    @property
    def key(self) -> str:
        """Stable identity across processes and restarts: `<scope>/<window>@<start>` (a scope
        name never contains '/'; the same window moved to another scope is another hold)."""
        return occurrence_key(self.scope, self.window, self.ident)

    def covers(self, now: datetime) -> bool:
        return in_interval(now, self.arm_at, self.end)

    def draining(self, now: datetime) -> bool:
        return in_interval(now, self.arm_at, self.start)

    def ended(self, now: datetime) -> bool:
        return not in_interval(now, None, self.end)

    def to_json(self, now: datetime | None = None, tz: tzinfo | None = None) -> dict[str, object]:
        data: dict[str, object] = {"window": self.window, "scope": self.scope, "occurrence": self.ident,
                                   "start": format_instant(self.start), "end": format_instant(self.end)}
        if tz is not None:
            data["local_start"] = self.start.astimezone(tz).isoformat()
        data["drain_from"] = format_instant(self.arm_at) if self.lead else None
        if self.uid is not None:
            data["uid"] = self.uid
            data["reason"] = self.reason
        if now is not None:
            data["active"] = self.covers(now)
            data["draining"] = self.draining(now)
        return data


#: a run of more excluded starts in a row than this ends a window's occurrences, so that
#: `exclude_cron = "* * * * *"` cannot loop forever (an hourly window may be excluded for over a
#: year, a minutely one for six days); `hermes windows validate` warns about such a window
MAX_EXCLUDED_RUN = 10_000


def occurrence_key(scope: str, window: str, ident: str) -> str:
    return f"{scope}/{window}@{ident}"


def occurrences(window: Window, since: datetime, stopped: list[datetime] | None = None) -> Iterator[Occurrence]:
    """Occurrences starting at or after `since`, in order, within the window's bounds (which
    select by start, half-open: an occurrence is never cut short), `enabled` or not. When a run
    of more than `MAX_EXCLUDED_RUN` excluded starts ends the scan, the start it stopped at is
    appended to `stopped`: nothing is known past it (a later start may not be excluded)."""
    since = _since(window, since)
    feed = window.feed
    if feed is not None:
        if feed.refused is not None:  # never "nothing": a hold armed for it would be taken as gone and lifted
            raise CalendarError(f"calendar {feed.label}: {feed.refused}")
        lead = _lead(window)
        for event in feed.events(since):
            yield Occurrence(event.start, event.end, window.name, window.scope, lead, event.ident, event.uid, event.reason)
        return
    if window.at is not None:
        starts: Iterable[datetime] = (window.at,) if window.at >= since else ()
    else:
        starts = cron_starts(window.cron or "", window.tz, since)
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
        yield Occurrence(start, start + window.duration, window.name, window.scope, _lead(window))


def refusal(window: Window) -> str | None:
    """Why the feed `window` reads (its calendar's, its `exclude_calendar`'s) was refused, one line
    naming the calendar, or None. Such a window has no occurrences to tell (a calendar's:
    `occurrences` raises `CalendarError`; one excluding a calendar's days answers only for the
    years it read before): it arms nothing new and holds as it was (`WindowService._held_as_was`)."""
    feed = window.feed if window.exclude_calendar is None else window._holidays  # noqa: SLF001
    return None if feed is None or feed.refused is None else f"calendar {feed.label}: {feed.refused}"


def _since(window: Window, since: datetime) -> datetime:
    since = to_utc(since)
    return window.not_before if window.not_before is not None and window.not_before > since else since


_NO_LEAD = timedelta(0)


def _lead(window: Window) -> timedelta:
    return window.drain or _NO_LEAD


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
    """The first occurrence armed strictly after `after` (`arm_at`: its start less the drain
    lead); `next_start` for a window without a lead."""
    return next_start(window, after + _lead(window))


def following(window: Window, occurrence: Occurrence) -> Occurrence | None:
    """The occurrence of `window` after `occurrence` in the order `occurrences` yields them (a
    calendar may have two events starting at one instant)."""
    passed = False
    for candidate in occurrences(window, occurrence.start):
        if passed or candidate.start > occurrence.start:
            return candidate
        passed = candidate == occurrence
    return None


#: what covers an instant, and the first occurrence armed after it
Around = tuple[tuple[Occurrence, ...], Occurrence | None]


class Timeline(Protocol):
    """Where the scheduler's decisions look occurrences up: the exact functions (`EXACT`) or a
    compiled schedule giving their answers by bisection (`ScheduleTimeline`)."""

    def around(self, window: Window, now: datetime) -> Around: ...

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        """In arm order (at one instant, in the order of `windows`), computed as they are taken."""
        ...


def merge_armed(windows: Sequence[Window], now: datetime, first_armed: Callable[[Window, datetime], Occurrence | None],
                after: Callable[[Window, Occurrence], Occurrence | None]) -> Iterator[Occurrence]:
    """`Timeline.armed_after` as a heap of one occurrence per window, a window's next asked only
    once its previous one was taken (a chain held by a thousand windows asks each once)."""
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


class Rows(Timeline, Protocol):
    """A compiled schedule's rows as `Windows` reads them (`schedule.ScheduleTimeline`: this
    module cannot import it)."""

    def __len__(self) -> int: ...

    def name(self, row: int) -> str: ...

    def enabled(self, row: int) -> bool: ...

    def scope(self, row: int) -> str: ...

    def table(self, row: int) -> bytes: ...

    def selector(self, row: int) -> Selector | None: ...

    def window(self, row: int) -> Window: ...

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None: ...

    def covering_now(self, windows: Windows, now: datetime) -> dict[str, list[Occurrence]]: ...

    def next_arms(self, windows: Windows, now: datetime, skip: Container[str],
                  count: int) -> list[tuple[str, Occurrence]]: ...


class Windows(Sequence[Window]):
    """The windows a pass decides on: validated `Window`s, or rows of one compiled schedule
    (`timeline`) read off its columns, a row's `Window` built only when asked for (`[i]`,
    `named`): a pass builds one only for a row it acts on (issue 35). Iterating builds every
    row: a decision asks by index."""

    __slots__ = ("_lane", "_positions", "_windows", "rows", "timeline")

    def __init__(self, windows: Iterable[Window] = (), timeline: Rows | None = None,
                 rows: Sequence[int] | None = None) -> None:
        self._windows: list[Window] = list(windows)
        self.timeline = timeline
        self.rows: Sequence[int] = rows if rows is not None else range(len(timeline) if timeline is not None else 0)
        self._positions: dict[str, int] | None = None
        self._lane: dict[int, int] | None = None

    def validated(self) -> Sequence[Window]:
        return self._windows

    @classmethod
    def of(cls, windows: Sequence[Window]) -> Windows:
        return windows if isinstance(windows, Windows) else cls(windows)

    def __len__(self) -> int:
        return len(self.rows) if self.timeline is not None else len(self._windows)

    @overload
    def __getitem__(self, index: int) -> Window: ...

    @overload
    def __getitem__(self, index: slice) -> Windows: ...

    def __getitem__(self, index: int | slice) -> Window | Windows:
        if isinstance(index, slice):
            return self.subset(range(len(self))[index])
        if self.timeline is not None:
            return self.timeline.window(self.rows[index])
        return self._windows[index]

    def subset(self, positions: Iterable[int]) -> Windows:
        """The windows at `positions` of these, in that order (a lane)."""
        if self.timeline is not None:
            return Windows(timeline=self.timeline, rows=[self.rows[i] for i in positions])
        return Windows([self._windows[i] for i in positions])

    def name(self, index: int) -> str:
        return self.timeline.name(self.rows[index]) if self.timeline is not None else self._windows[index].name

    def names(self) -> list[str]:
        return [self.name(i) for i in range(len(self))]

    def enabled(self, index: int) -> bool:
        return self.timeline.enabled(self.rows[index]) if self.timeline is not None else self._windows[index].enabled

    def scope(self, index: int) -> str:
        return self.timeline.scope(self.rows[index]) if self.timeline is not None else self._windows[index].scope

    def selector(self, index: int) -> Selector | None:
        return self.timeline.selector(self.rows[index]) if self.timeline is not None else self._windows[index].selector

    def table(self, index: int) -> bytes:
        return self.timeline.table(self.rows[index]) if self.timeline is not None else table_of(self._windows[index])

    def position(self, name: str) -> int | None:
        if self._positions is None:
            self._positions = {}
            for i in range(len(self)):
                self._positions.setdefault(self.name(i), i)
        return self._positions.get(name)

    def named(self, name: str) -> Window | None:
        index = self.position(name)
        return None if index is None else self[index]

    def same(self, index: int, other: Windows, at: int) -> bool:
        """Whether window `at` of `other` is window `index` of these as it was: the very object
        or row, equal field for field, or (a row on either side) of an equal table, no row's
        `Window` built."""
        if self.timeline is None and other.timeline is None:
            return self._windows[index] is other._windows[at] or self._windows[index] == other._windows[at]
        if self.timeline is other.timeline and self.rows[index] == other.rows[at]:
            return True
        return self.table(index) == other.table(at)

    def lane_of(self, timeline: Rows) -> dict[int, int] | None:
        """Each row of `timeline` among these -> its place; None unless these are its rows."""
        if self.timeline is not timeline:
            return None
        if self._lane is None:
            self._lane = {row: order for order, row in enumerate(self.rows)}
        return self._lane


def table_of(window: Window) -> bytes:
    """`window` as a schedule's `tables` column holds it (`Window.to_json`, compact JSON): equal
    bytes, equal windows (a row's `Window` is validated from exactly these bytes)."""
    return json.dumps(window.to_json(), separators=(",", ":")).encode("utf-8")


class ExactTimeline:
    """The `Timeline` of the exact functions above."""

    def around(self, window: Window, now: datetime) -> Around:
        return tuple(covering(window, now)), next_armed(window, now)

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        return next_armed(window, now)

    def after(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        return following(window, occurrence)

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        return merge_armed(windows, now, self.first_armed, self.after)


EXACT = ExactTimeline()


def by_start(windows: list[Window], now: datetime, per_window: int) -> list[tuple[Window, Occurrence]]:
    """The next `per_window` occurrences of each window, soonest start first, then file order:
    what `hermes windows next` lists (issue 38)."""
    found = [(occurrence.start, i, window, occurrence) for i, window in enumerate(windows)
             for occurrence in upcoming(window, now, per_window)]
    found.sort(key=lambda item: (item[0], item[1]))
    return [(window, occurrence) for _, _, window, occurrence in found]
