"""Occurrences of a window: pure functions of the window and an instant (docs/design.md §6).

Occurrence `k` of a window starts at `s_k` and ends at `e_k = s_k + duration`; it covers `now`
while `in_interval(now, s_k - drain, e_k)` (half-open; `drain`, the window's drain lead, is
usually none: its hold is armed that long before the start). Durations are absolute time: a 2h window that
starts at 02:00 on a fall-back night ends two real hours later, at 03:00 on the wall clock.

The cron math is `hermes_estop.model.cronspec`'s (croniter on the wall clock of the window's
timezone, then THE DST rule: a repeated fall-back start occurs once, at its first instant; a
start in the spring-forward gap moves to the first valid instant after it), shared with the
cron jobs so both follow one rule.

APScheduler never interprets a cron expression here (its `CronTrigger` reads a numeric
day-of-week 0 as Monday, crontab as Sunday); it only wakes the service at instants computed here.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Protocol, overload

from hermes_estop.model.cronspec import starts as cron_starts
from hermes_estop.model.selector import Selector
from hermes_estop.model.timeutil import format_instant, in_interval, to_utc
from hermes_estop.windows.model import Window

__all__ = [
    "by_start",
    "EXACT",
    "FEED_RECHECK",
    "IndexedTimeline",
    "MAX_EXCLUDED_RUN",
    "ExactTimeline",
    "Occurrence",
    "OccurrenceIndex",
    "Rows",
    "Timeline",
    "Windows",
    "covering",
    "following",
    "merge_armed",
    "next_armed",
    "next_start",
    "occurrence_key",
    "occurrences",
    "table_of",
    "upcoming",
]


@dataclass(frozen=True, order=True, slots=True)
class Occurrence:
    """One occurrence: `[start, end)` of `window`, held at `scope`. Instants are aware UTC.
    A calendar's occurrence also has its `event` (the id from UID and RECURRENCE-ID, which
    stays when the instance is moved), the event's `uid` and its `reason` (the SUMMARY)."""

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
        """When the occurrence's hold is armed: `start`, or `start - drain` for a window with a
        drain lead (the hold then spans `[arm_at, end)`)."""
        return self.start - self.lead if self.lead else self.start

    @property
    def ident(self) -> str:
        """The `occurrence` written into the hold's `window` field: the start, ISO-8601 UTC (a
        calendar's: the event's id)."""
        return self.event or to_utc(self.start).isoformat()  # format_instant, never None here

    @property
    def key(self) -> str:
        """Stable identity across processes and restarts: `<scope>/<window>@<start>` (a scope
        name never contains '/'; the same window moved to another scope is another hold)."""
        return occurrence_key(self.scope, self.window, self.ident)

    def covers(self, now: datetime) -> bool:
        """Whether the occurrence's hold is due at `now`: `[arm_at, end)`, its drain lead included
        (the scheduler arms at `arm_at`; without a lead that is `[start, end)`)."""
        return in_interval(now, self.arm_at, self.end)

    def draining(self, now: datetime) -> bool:
        """Whether `now` lies in the drain lead, `[arm_at, start)`."""
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


#: how long `OccurrenceIndex` trusts its answer for a calendar's window at most, and an answer
#: of "no next occurrence" of any window (issue 45: a run of more than `MAX_EXCLUDED_RUN`
#: excluded starts ends a scan, not the window; a scan spans at least 10,000 minutes, so asking
#: again daily finds every start days before it comes)
FEED_RECHECK = timedelta(days=1)


def occurrence_key(scope: str, window: str, ident: str) -> str:
    return f"{scope}/{window}@{ident}"


def occurrences(window: Window, since: datetime, stopped: list[datetime] | None = None) -> Iterator[Occurrence]:
    """Occurrences starting at or after `since`, in order, within the window's bounds
    (`not_before` / `not_after` select occurrences by their start, half-open; an occurrence is
    never cut short by a bound). Ignores `enabled`: scheduling decides what runs. When a run of
    more than `MAX_EXCLUDED_RUN` excluded starts ends the scan, the start it stopped at is
    appended to `stopped`: nothing is known past it (a later start may not be excluded)."""
    since = _since(window, since)
    feed = window.feed
    if feed is not None:
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
                return  # `exclude_cron` may exclude every start for good: the scan ends here
            continue
        excluded = 0
        yield Occurrence(start, start + window.duration, window.name, window.scope, _lead(window))


def _since(window: Window, since: datetime) -> datetime:
    since = to_utc(since)
    return window.not_before if window.not_before is not None and window.not_before > since else since


def _first(window: Window, since: datetime) -> Occurrence | None:
    """`next(occurrences(window, since))`, without the generators for a cron window that
    excludes nothing. Windows with the same expression and zone share the cron steps through
    `cronspec.starts`'s remembered runs."""
    since = _since(window, since)
    if window.cron is None:
        return next(occurrences(window, since), None)
    start = next(cron_starts(window.cron, window.tz, since), None)
    if start is not None and window.excludes(start):
        return next(occurrences(window, since), None)
    if start is None or not in_interval(start, window.not_before, window.not_after):
        return None
    return Occurrence(start, start + window.duration, window.name, window.scope, _lead(window))


_NO_LEAD = timedelta(0)


def _lead(window: Window) -> timedelta:
    return window.drain or _NO_LEAD


def upcoming(window: Window, now: datetime, count: int) -> list[Occurrence]:
    """The next `count` occurrences that have not ended at `now` (one covering `now` first)."""
    out: list[Occurrence] = []
    if count <= 0:
        return out
    for occurrence in occurrences(window, now - window.duration):
        if occurrence.ended(now):
            continue
        out.append(occurrence)
        if len(out) >= count:
            break
    return out


def covering(window: Window, now: datetime) -> list[Occurrence]:
    """The occurrences covering `now`, drain lead included (more than one when the lead and
    the duration exceed the period)."""
    out: list[Occurrence] = []
    for occurrence in occurrences(window, now - window.duration):
        if not in_interval(now, occurrence.arm_at, None):
            break
        if occurrence.covers(now):
            out.append(occurrence)
    return out


def next_start(window: Window, after: datetime) -> Occurrence | None:
    """The first occurrence starting strictly after `after`."""
    for occurrence in occurrences(window, after):
        if occurrence.start > after:
            return occurrence
    return None


def next_armed(window: Window, after: datetime) -> Occurrence | None:
    """The first occurrence armed strictly after `after` (`arm_at`: its start less the drain
    lead); `next_start` for a window without a lead."""
    return next_start(window, after + _lead(window))


def following(window: Window, occurrence: Occurrence) -> Occurrence | None:
    """The occurrence of `window` after `occurrence`, in the order `occurrences` yields them (a
    calendar may have two events starting at the same instant); None when there is none."""
    passed = False
    for candidate in occurrences(window, occurrence.start):
        if passed or candidate.start > occurrence.start:
            return candidate
        passed = candidate == occurrence
    return None


#: what covers an instant, and the first occurrence armed after it
Around = tuple[tuple[Occurrence, ...], Occurrence | None]


class Timeline(Protocol):
    """Where the scheduler's decisions look a window's occurrences up (`reconcile.plan_scope`,
    `reconcile.chain_end`, `OccurrenceIndex.advance`): the exact functions of this module
    (`EXACT`, the definition) or a compiled schedule answering the same by bisection
    (`schedule.ScheduleTimeline`). Every implementation gives the exact functions' answers."""

    def around(self, window: Window, now: datetime) -> Around:
        """The occurrences of `window` covering `now` (`covering`) and its first occurrence
        armed strictly after `now` (`next_armed`)."""
        ...

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        """The occurrences of `windows` armed strictly after `now`, in the order they arm (at
        one instant, in the order of `windows`), computed as they are taken."""
        ...


def merge_armed(windows: Sequence[Window], now: datetime, first_armed: Callable[[Window, datetime], Occurrence | None],
                after: Callable[[Window, Occurrence], Occurrence | None]) -> Iterator[Occurrence]:
    """`Timeline.armed_after` from each window's first occurrence armed after `now` and the one
    after each: a heap of one occurrence per window, a window's next computed only once its
    previous one was taken (a chain held by a thousand windows asks each once, not once per step)."""
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
    """The rows of one compiled schedule as `Windows` reads them, and the `Timeline` read off
    it (`schedule.ScheduleTimeline`): a row's columns, its `Window` validated from its table,
    its occurrences around an instant."""

    def __len__(self) -> int: ...

    def name(self, row: int) -> str: ...

    def enabled(self, row: int) -> bool: ...

    def scope(self, row: int) -> str: ...

    def table(self, row: int) -> bytes: ...

    def selector(self, row: int) -> Selector | None: ...

    def window(self, row: int) -> Window: ...

    def around_row(self, row: int, now: datetime) -> Around: ...


class Windows(Sequence[Window]):
    """The windows a pass decides on, in the one shape every decision takes (`OccurrenceIndex`,
    `reconcile`, `guard`, the scheduler's lanes): validated `Window`s, or rows of one compiled
    schedule (`timeline`), whose name, scope, `enabled`, selector and occurrences are read off
    its columns, a row's `Window` validated only when asked for (`[i]`, `named`): a pass on a
    file with a trusted schedule builds one only for a row it acts on (issue 35). Two windows
    are the same window (`same`) when their tables are equal (a row's) or they are equal field
    for field (a validated one's). Iterating builds every row: a decision asks by index."""

    __slots__ = ("_lane", "_positions", "_windows", "rows", "timeline")

    def __init__(self, windows: Iterable[Window] = (), timeline: Rows | None = None,
                 rows: Sequence[int] | None = None) -> None:
        #: the validated windows (none when these are rows)
        self._windows: list[Window] = list(windows)
        #: the schedule these are rows of (its timeline), and which rows (in order)
        self.timeline = timeline
        self.rows: Sequence[int] = rows if rows is not None else range(len(timeline) if timeline is not None else 0)
        self._positions: dict[str, int] | None = None
        self._lane: dict[int, int] | None = None

    @classmethod
    def of(cls, windows: Sequence[Window]) -> Windows:
        """`windows` in this shape (a plain sequence of validated windows: listed)."""
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

    def __repr__(self) -> str:
        return f"Windows({len(self)} {'rows' if self.timeline is not None else 'validated'})"

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

    def calendar(self, index: int) -> bool:
        """Whether the window's occurrences are a calendar feed's (never a row's)."""
        return self.timeline is None and self._windows[index].feed is not None

    def selector(self, index: int) -> Selector | None:
        """The window's selector (a row's without a `Window` built)."""
        return self.timeline.selector(self.rows[index]) if self.timeline is not None else self._windows[index].selector

    def table(self, index: int) -> bytes:
        """The window as a schedule's `tables` column holds it (`table_of`)."""
        return self.timeline.table(self.rows[index]) if self.timeline is not None else table_of(self._windows[index])

    def position(self, name: str) -> int | None:
        """Where the window called `name` is among these; None when it is not."""
        if self._positions is None:
            self._positions = {}
            for i in range(len(self)):
                self._positions.setdefault(self.name(i), i)
        return self._positions.get(name)

    def named(self, name: str) -> Window | None:
        index = self.position(name)
        return None if index is None else self[index]

    def identical(self, index: int, other: Windows, at: int) -> bool:
        """Whether window `at` of `other` is the very window `index` of these (the same object,
        or the same row of the same schedule)."""
        if self.timeline is not None or other.timeline is not None:
            return self.timeline is other.timeline and self.rows[index] == other.rows[at]
        return self._windows[index] is other._windows[at]

    def same(self, index: int, other: Windows, at: int) -> bool:
        """Whether window `at` of `other` is window `index` of these as it was: the same, equal
        field for field, or (a row on either side) of an equal table; no row's `Window` built."""
        if self.identical(index, other, at):
            return True
        if self.timeline is None and other.timeline is None:
            return self._windows[index] == other._windows[at]
        return self.table(index) == other.table(at)

    def same_list(self, other: Windows) -> bool:
        """Whether `other` holds the very windows of these, in order."""
        return len(self) == len(other) and all(self.identical(i, other, i) for i in range(len(self)))

    def around(self, index: int, now: datetime, timeline: Timeline) -> Around:
        """`Timeline.around` of window `index`: a row's off its schedule (its `Window` built only
        when the schedule does not answer), a validated window's asked of `timeline`."""
        if self.timeline is not None:
            return self.timeline.around_row(self.rows[index], now)
        return timeline.around(self._windows[index], now)

    def lane_of(self, timeline: Rows) -> dict[int, int] | None:
        """Each row of `timeline` among these -> its place (made once per list); None unless
        these are rows of `timeline`."""
        if self.timeline is not timeline:
            return None
        if self._lane is None:
            self._lane = {row: order for order, row in enumerate(self.rows)}
        return self._lane

    def by_name(self) -> Mapping[str, Window]:
        """These windows by name, each row's built when looked up."""
        return _ByName(self)


class _ByName(Mapping[str, Window]):
    """`Windows.by_name`."""

    def __init__(self, windows: Windows) -> None:
        self.windows = windows

    def __getitem__(self, name: str) -> Window:
        window = self.windows.named(name)
        if window is None:
            raise KeyError(name)
        return window

    def __iter__(self) -> Iterator[str]:
        return iter(self.windows.names())

    def __len__(self) -> int:
        return len(self.windows)


def table_of(window: Window) -> bytes:
    """`window` as a schedule's `tables` column holds it (`Window.to_json`, compact JSON): equal
    bytes, equal windows (a row's `Window` is validated from exactly these bytes)."""
    return json.dumps(window.to_json(), separators=(",", ":")).encode("utf-8")


class ExactTimeline:
    """The `Timeline` of the exact functions above (with `first_armed` and `after`, the
    questions `armed_after` is made of)."""

    def around(self, window: Window, now: datetime) -> Around:
        first = _first(window, now - window.duration)
        if first is None or first.arm_at > now:
            return (), first  # nothing covers `now`: the first one not ended is the next armed
        return tuple(covering(window, now)), next_armed(window, now)

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        return next_armed(window, now)

    def after(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        return following(window, occurrence)

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        return merge_armed(windows, now, self.first_armed, self.after)


EXACT = ExactTimeline()


class OccurrenceIndex:
    """What covers `now` and when each window arms next, remembered per window, so a scheduler
    with 10,000 windows does the cron math of a window only when its answer changes, not on
    every pass (issue 24: asking every window on every pass was most of a pass).

    `advance(windows, now)`, once per pass, brings the scheduler's windows to `now`
    and answers what covers it: each enabled window's answer (`_Known`: its occurrences covering
    the instant it was computed at, and its next occurrence armed after it) holds until
    `until`, its next arm or the earliest end among those covering, whichever comes first.
    Nothing starts, arms or ends in between, so until then the answer is the same. A heap keyed
    by `until` hands a pass only the windows whose answer expired: a quiet pass costs
    O(due windows + log n) cron math, not O(n). Everything else takes the exact path: a window
    not seen before or changed (a re-read file yields new objects: one equal field for field
    keeps its answer, an edited one is planned afresh), and time going backwards (everything
    is computed again).

    An answer is computed by the `Timeline` the pass gives (`EXACT`, or the compiled schedule
    of the file the windows were read from): the same answer either way, so answers computed
    by one are kept when the next pass gives the other.

    `covering` and `next_start` answer for any window and instant: from `advance`'s answer when
    it holds for that window object at that instant, else by the exact functions above."""

    def __init__(self) -> None:
        #: `advance`'s answers, by window name
        self._known: dict[str, _Known] = {}
        #: (until, seq, name) of every answer that expires; an entry whose seq is not its
        #: window's answer's any more is stale and dropped when met
        self._due: list[tuple[datetime, int, str]] = []
        #: the windows whose answer has occurrences covering now, by name
        self._held: dict[str, _Known] = {}
        self._windows = Windows()
        self._now: datetime | None = None
        self._seq = 0
        #: how many answers `advance` computed (the work of a pass, for tests that count it)
        self.computed = 0

    # -- the scheduler's windows, brought to `now` once per pass -------------------------------

    def advance(self, given: Sequence[Window], now: datetime,
                timeline: Timeline = EXACT) -> dict[str, list[Occurrence]]:
        """Bring the enabled ones of `windows` to `now`: each enabled window's occurrences
        covering `now` (only the windows with some), computed (by `timeline`) only for the
        windows whose answer expired by `now`, changed, or is new (rows of a compiled schedule
        asked of it, each row's `Window` built only when a caller asks for it)."""
        windows = Windows.of(given)
        if self._now is not None and now < self._now:
            self._forget()  # time went backwards: every answer computed again (the exact path)
        self._now = now
        if windows is not self._windows and not windows.same_list(self._windows):
            self._sync(windows, now, timeline)
        while self._due and self._due[0][0] <= now:
            _, seq, name = heapq.heappop(self._due)
            known = self._known.get(name)
            if known is not None and known.seq == seq:
                self._learn(name, known.windows, known.index, now, timeline)
        if len(self._due) > 2 * len(self._known) + 64:
            self._compact()
        return {name: list(known.covering) for name, known in self._held.items()}

    def held(self) -> list[tuple[str, tuple[Occurrence, ...], Occurrence | None]]:
        """The names of the windows with occurrences covering the instant of the last
        `advance`: each with them and its next occurrence armed after that instant."""
        return [(name, known.covering, known.next) for name, known in self._held.items()]

    def soonest(self, count: int) -> list[tuple[str, Occurrence]]:
        """The next occurrences of the windows nothing covers at the last `advance` (by name), in the
        order they arm: the first `count` of them and every other armed at the same instant as
        the last one (all of them when there are fewer). O((count + stale) log n): read off the
        heap, not from every window."""
        taken: list[tuple[datetime, int, str]] = []
        out: list[tuple[str, Occurrence]] = []
        last: datetime | None = None
        while self._due and (len(out) < count or self._due[0][0] == last):
            entry = heapq.heappop(self._due)
            known = self._known.get(entry[2])
            if known is None or known.seq != entry[1]:
                continue  # stale: dropped for good
            taken.append(entry)
            if not known.covering and known.next is not None:
                out.append((known.name, known.next))
                last = entry[0]
        for entry in taken:
            heapq.heappush(self._due, entry)
        return out

    def armed_after(self, given: Sequence[Window], now: datetime,
                    after: Callable[[Window, Occurrence], Occurrence | None]) -> Iterator[Occurrence] | None:
        """`Timeline.armed_after` of `windows` at the instant of the last `advance`, when each
        of them is a window whose answer it holds (else None: ask `merge_armed`). Read off the
        heap of answers in the order they expire, not from every window: no window's next arm
        comes before its answer expires, so an occurrence earlier than the next answer to
        expire is the next one armed (`merge_armed`'s heap, filled as the walk reaches each
        window); a window's later occurrences are asked of `after`. A held chain through a
        lane of 10,000 windows costs its own length and the windows arming before it ends,
        not a question to each window (the chain is walked on every pass)."""
        if now != self._now:
            return None
        windows = Windows.of(given)
        lane: dict[str, int] = {}
        known = self._known
        for order in range(len(windows)):
            name = windows.name(order)
            answer = known.get(name)
            if answer is None or not answer.windows.identical(answer.index, windows, order):
                return None
            lane[name] = order
        return self._walk(lane, windows, after)

    def _walk(self, lane: Mapping[str, int], windows: Sequence[Window],
              after: Callable[[Window, Occurrence], Occurrence | None]) -> Iterator[Occurrence]:
        merge: list[tuple[datetime, int, Occurrence]] = []
        for until, seq, name in self._in_expiry_order():
            while merge and merge[0][0] < until:
                yield self._take(merge, windows, after)
            known, order = self._known.get(name), lane.get(name)
            if known is not None and known.seq == seq and order is not None and known.next is not None:
                heapq.heappush(merge, (known.next.arm_at, order, known.next))
        while merge:
            yield self._take(merge, windows, after)

    @staticmethod
    def _take(merge: list[tuple[datetime, int, Occurrence]], windows: Sequence[Window],
              after: Callable[[Window, Occurrence], Occurrence | None]) -> Occurrence:
        _, order, occurrence = heapq.heappop(merge)
        successor = after(windows[order], occurrence)
        if successor is not None:
            heapq.heappush(merge, (successor.arm_at, order, successor))
        return occurrence

    def _in_expiry_order(self) -> Iterator[tuple[datetime, int, str]]:
        """The entries of the heap of answers, earliest first, read without taking any off it
        (a heap's children are never earlier than their parent)."""
        due = self._due
        frontier = [(due[0], 0)] if due else []
        while frontier:
            entry, at = heapq.heappop(frontier)
            for child in (2 * at + 1, 2 * at + 2):
                if child < len(due):
                    heapq.heappush(frontier, (due[child], child))
            yield entry

    def _sync(self, windows: Windows, now: datetime, timeline: Timeline) -> None:
        """A new list of windows: forget the answers of windows gone, disabled or changed;
        compute the new ones at `now`. A window read again unchanged (`Windows.same`: another
        object equal field for field, its calendar included, or a row of an equal table) keeps
        its answer: a `hermes serve` whose status page validated the file at the same time as
        the scheduler got the page's objects on its next pass, and computing 10,000 answers
        again took seconds (issue 24)."""
        for name, known in list(self._known.items()):
            index = windows.position(name)
            if index is not None and windows.enabled(index) and known.windows.same(known.index, windows, index):
                known.windows, known.index = windows, index
                continue
            self._drop(name)
        for index in range(len(windows)):
            if windows.enabled(index) and windows.name(index) not in self._known:
                self._learn(windows.name(index), windows, index, now, timeline)
        self._windows = windows

    def _drop(self, name: str) -> None:
        del self._known[name]
        self._held.pop(name, None)

    def _learn(self, name: str, windows: Windows, index: int, now: datetime, timeline: Timeline) -> None:
        """Compute the answer at `now` of window `index` of `windows` and remember it until it expires."""
        self.computed += 1
        held, upcoming = windows.around(index, now, timeline)
        feed = windows.calendar(index)
        expiries = [o.end for o in held] + ([upcoming.arm_at] if upcoming is not None else [])
        if feed or upcoming is None:
            # a calendar's events are looked up within a lookahead of the instant asked: what
            # it says (no event ahead, say) is asked again daily, never trusted for ever; so is
            # "no next occurrence" (a scan ends after `MAX_EXCLUDED_RUN` excluded starts)
            expiries.append(now + FEED_RECHECK)
        until = min(expiries) if expiries else None
        self._seq += 1
        known = _Known(name, windows, index, now, until, held, upcoming, self._seq)
        self._known[name] = known
        if held:
            self._held[name] = known
        else:
            self._held.pop(name, None)
        if until is not None:
            heapq.heappush(self._due, (until, known.seq, name))

    def _forget(self) -> None:
        self._known.clear()
        self._held.clear()
        self._due.clear()
        self._windows = Windows()

    def _compact(self) -> None:
        """The heap rebuilt from the live answers (stale entries of edited windows dropped), so
        it stays as large as the fleet, however often the file is edited."""
        self._due = [(k.until, k.seq, name) for name, k in self._known.items() if k.until is not None]
        heapq.heapify(self._due)

    def _valid(self, window: Window, now: datetime) -> _Known | None:
        """`advance`'s answer for this window object, when it holds at `now`."""
        known = self._known.get(window.name)
        if (known is not None and known.window is window and known.since <= now
                and (known.until is None or now < known.until)):
            return known
        return None

    # -- any window, any instant -----------------------------------------------------------------

    def covering(self, window: Window, now: datetime) -> list[Occurrence]:
        known = self._valid(window, now)
        return list(known.covering) if known is not None else covering(window, now)

    def next_start(self, window: Window, now: datetime) -> Occurrence | None:
        """The next occurrence armed after `now` (`next_armed`: its start, less any drain lead)."""
        known = self._valid(window, now)
        return known.next if known is not None else next_armed(window, now)


class IndexedTimeline(ExactTimeline):
    """`EXACT`, with each window's first occurrence armed after `now` taken from the answer
    `index.advance` brought to `now` when it holds (an exact answer, kept until it expires).
    Why: without a compiled schedule (calendars, a table that does not validate, the guard
    putting a version back, the first passes before it is built) a held chain asks every
    window of its lane for its next arm on every pass: 10,000 cron questions were a tenth of
    a second a pass."""

    def __init__(self, index: OccurrenceIndex) -> None:
        self._index = index

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        return self._index.next_start(window, now)

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        """Off the index's heap of answers when it holds every one of `windows` at `now`
        (`OccurrenceIndex.armed_after`), else `merge_armed`."""
        walk = self._index.armed_after(windows, now, self.after)
        return walk if walk is not None else merge_armed(windows, now, self.first_armed, self.after)


@dataclass(slots=True)
class _Known:
    """A window's answer computed at `since`: the occurrences covering `since` and its next
    occurrence armed after it; the same answer for every instant in `[since, until)` (`until`
    None: for ever). The window is `windows[index]` (a row's `Window` built only when `window`
    is asked for: `_valid`)."""

    name: str
    windows: Windows
    index: int
    since: datetime
    until: datetime | None
    covering: tuple[Occurrence, ...]
    next: Occurrence | None
    seq: int

    @property
    def window(self) -> Window:
        return self.windows[self.index]


def by_start(windows: list[Window], now: datetime, per_window: int) -> list[tuple[Window, Occurrence]]:
    """The next `per_window` occurrences of each window, soonest start first (file order
    between equal starts): what `hermes windows next` lists (issue 38), here and over --server."""
    found = [(occurrence.start, i, window, occurrence) for i, window in enumerate(windows)
             for occurrence in upcoming(window, now, per_window)]
    found.sort(key=lambda item: (item[0], item[1]))
    return [(window, occurrence) for _, _, window, occurrence in found]
