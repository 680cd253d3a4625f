"""Occurrences of a window: pure functions of the window and an instant (docs/design.md §6).

Occurrence `k` of a window starts at `s_k` and ends at `e_k = s_k + duration`; it covers `now`
while `in_interval(now, s_k - drain, e_k)` (half-open; `drain`, the window's drain lead, is
usually none: its hold is armed that long before the start). Durations are absolute time: a 2h window that
starts at 02:00 on a fall-back night ends two real hours later, at 03:00 on the wall clock.

The cron math is `hermes_estop.cronspec`'s (croniter on the wall clock of the window's
timezone, then THE DST rule: a repeated fall-back start occurs once, at its first instant; a
start in the spring-forward gap moves to the first valid instant after it), shared with the
cron jobs so both follow one rule.

APScheduler never interprets a cron expression here (its `CronTrigger` reads a numeric
day-of-week 0 as Monday, crontab as Sunday); it only wakes the service at instants computed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from ..cronspec import starts as cron_starts
from ..timeutil import format_instant, in_interval, to_utc
from .model import Window

__all__ = [
    "MAX_EXCLUDED_RUN",
    "Occurrence",
    "OccurrenceIndex",
    "covering",
    "next_armed",
    "next_start",
    "occurrence_key",
    "occurrences",
    "starting_within",
    "upcoming",
]


@dataclass(frozen=True, order=True)
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
        return self.start - self.lead

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

    def to_json(self, now: datetime | None = None, tz: ZoneInfo | None = None) -> dict[str, object]:
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


def occurrences(window: Window, since: datetime) -> Iterator[Occurrence]:
    """Occurrences starting at or after `since`, in order, within the window's bounds
    (`not_before` / `not_after` select occurrences by their start, half-open; an occurrence is
    never cut short by a bound). Ignores `enabled`: scheduling decides what runs."""
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
                return  # `exclude_cron` excludes every start for good: the window never occurs
            continue
        excluded = 0
        yield Occurrence(start, start + window.duration, window.name, window.scope, _lead(window))


def _since(window: Window, since: datetime) -> datetime:
    since = to_utc(since)
    return window.not_before if window.not_before is not None and window.not_before > since else since


def _first(window: Window, since: datetime, memo: dict[tuple[str, str, datetime], datetime | None]) -> Occurrence | None:
    """`next(occurrences(window, since))`, the cron step shared through `memo` by the windows
    with the same expression and zone (a fleet's windows often share a schedule)."""
    since = _since(window, since)
    if window.cron is None:
        return next(occurrences(window, since), None)
    key = (window.cron, window.timezone, since)
    if key not in memo:
        memo[key] = next(iter(cron_starts(window.cron, window.tz, since)), None)
    start = memo[key]
    if start is not None and window.excludes(start):
        return next(occurrences(window, since), None)
    if start is None or not in_interval(start, window.not_before, window.not_after):
        return None
    return Occurrence(start, start + window.duration, window.name, window.scope, _lead(window))


def _lead(window: Window) -> timedelta:
    return window.drain or timedelta(0)


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


def starting_within(window: Window, first: datetime, last: datetime, limit: int = 256) -> list[Occurrence]:
    """Occurrences starting in the closed range `[first, last]`, at most `limit` of them."""
    out: list[Occurrence] = []
    for occurrence in occurrences(window, first):
        if occurrence.start > last or len(out) >= limit:
            break
        out.append(occurrence)
    return out


class OccurrenceIndex:
    """`covering` and `next_start` computed on demand and remembered per window, so a scheduler
    with 10,000 windows does one croniter step per window per occurrence, not several per pass.

    For each window it remembers `(since, first)`: no occurrence starts in `[since, first.start)`
    (`first` None: none ever again). While `since <= now - duration` and `now < first.arm_at`,
    nothing covers `now` and the next occurrence armed after `now` is `first`: no cron math at all. Anything
    else (an occurrence covering `now`, time going backwards, an edited window) takes the exact
    path above. A window is recognised by identity: a re-read file yields new objects."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Window, datetime, Occurrence | None]] = {}
        self._starts: dict[tuple[str, str, datetime], datetime | None] = {}

    def new_pass(self) -> None:
        """Forget the shared cron steps of the previous pass (their `since` will not recur)."""
        self._starts.clear()

    def _quiet(self, window: Window, now: datetime) -> tuple[bool, Occurrence | None]:
        """(True, next start) when nothing covers `now`; (False, None) otherwise."""
        memo = self._memo.get(window.name)
        since = now - window.duration
        if memo is not None and memo[0] is window and memo[1] <= since and (memo[2] is None or memo[2].arm_at > now):
            return True, memo[2]
        first = _first(window, since, self._starts)
        if first is not None and first.arm_at <= now:
            return False, None
        self._memo[window.name] = (window, since, first)
        return True, first

    def covering(self, window: Window, now: datetime) -> list[Occurrence]:
        quiet, _ = self._quiet(window, now)
        return [] if quiet else covering(window, now)

    def next_start(self, window: Window, now: datetime) -> Occurrence | None:
        """The next occurrence armed after `now` (`next_armed`: its start, less any drain lead)."""
        quiet, first = self._quiet(window, now)
        return first if quiet else next_armed(window, now)
