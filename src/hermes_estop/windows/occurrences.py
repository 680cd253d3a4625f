"""Occurrences of a window: pure functions of the window and an instant (DESIGN 6).

Occurrence `k` of a window starts at `s_k` and ends at `e_k = s_k + duration`; it covers `now`
while `in_interval(now, s_k, e_k)` (half-open). Durations are absolute time: a 2h window that
starts at 02:00 on a fall-back night ends two real hours later, at 03:00 on the wall clock.

The cron math is `hermes_estop.cronspec`'s (croniter on the wall clock of the window's
timezone, then THE DST rule: a repeated fall-back start occurs once, at its first instant; a
start in the spring-forward gap moves to the first valid instant after it), shared with the
cron jobs so both follow one rule.

APScheduler never interprets a cron expression here (its `CronTrigger` reads a numeric
day-of-week 0 as Monday, crontab as Sunday); it only wakes the service at instants computed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Iterator
from zoneinfo import ZoneInfo

from ..cronspec import starts as cron_starts
from ..timeutil import format_instant, in_interval, to_utc
from .model import Window

__all__ = [
    "Occurrence",
    "occurrence_key",
    "occurrences",
    "upcoming",
    "covering",
    "next_start",
    "starting_within",
]


@dataclass(frozen=True, order=True)
class Occurrence:
    """One occurrence: `[start, end)` of `window`, held at `scope`. Instants are aware UTC."""

    start: datetime
    end: datetime
    window: str
    scope: str

    @property
    def ident(self) -> str:
        """The `occurrence` written into the hold's `window` field: the start, ISO-8601 UTC."""
        return format_instant(self.start)

    @property
    def key(self) -> str:
        """Stable identity across processes and restarts: `<scope>/<window>@<start>` (a scope
        name never contains '/'; the same window moved to another scope is another hold)."""
        return occurrence_key(self.scope, self.window, self.ident)

    def covers(self, now: datetime) -> bool:
        return in_interval(now, self.start, self.end)

    def ended(self, now: datetime) -> bool:
        return not in_interval(now, None, self.end)

    def to_json(self, now: datetime | None = None, tz: ZoneInfo | None = None) -> dict[str, object]:
        data: dict[str, object] = {"window": self.window, "scope": self.scope, "occurrence": self.ident,
                                   "start": format_instant(self.start), "end": format_instant(self.end)}
        if tz is not None:
            data["local_start"] = self.start.astimezone(tz).isoformat()
        if now is not None:
            data["active"] = self.covers(now)
        return data


def occurrence_key(scope: str, window: str, ident: str) -> str:
    return f"{scope}/{window}@{ident}"


def occurrences(window: Window, since: datetime) -> Iterator[Occurrence]:
    """Occurrences starting at or after `since`, in order, within the window's bounds
    (`not_before` / `not_after` select occurrences by their start, half-open; an occurrence is
    never cut short by a bound). Ignores `enabled`: scheduling decides what runs."""
    since = to_utc(since)
    if window.not_before is not None and window.not_before > since:
        since = window.not_before
    if window.at is not None:
        starts: Iterable[datetime] = (window.at,) if window.at >= since else ()
    else:
        starts = cron_starts(window.cron, window.tz, since)
    for start in starts:
        if not in_interval(start, window.not_before, window.not_after):
            return
        yield Occurrence(start, start + window.duration, window.name, window.scope)


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
    """The occurrences covering `now` (more than one when the duration exceeds the period)."""
    out = []
    for occurrence in occurrences(window, now - window.duration):
        if not in_interval(now, occurrence.start, None):
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


def starting_within(window: Window, first: datetime, last: datetime, limit: int = 256) -> list[Occurrence]:
    """Occurrences starting in the closed range `[first, last]`, at most `limit` of them."""
    out = []
    for occurrence in occurrences(window, first):
        if occurrence.start > last or len(out) >= limit:
            break
        out.append(occurrence)
    return out
