"""Occurrences of a window: pure functions of the window and an instant (DESIGN 6).

Occurrence `k` of a window starts at `s_k` and ends at `e_k = s_k + duration`; it covers `now`
while `in_interval(now, s_k, e_k)` (half-open). Durations are absolute time: a 2h window that
starts at 02:00 on a fall-back night ends two real hours later, at 03:00 on the wall clock.

The cron math is croniter's, done on the wall clock of the window's timezone (naive local
datetimes), and each matching wall-clock time is then placed on the time line by `wall_to_instant`,
which carries THE DST rule:

- a wall-clock start that occurs twice (the fall-back hour) occurs ONCE, at its first instant;
  iterating naive wall-clock times yields each wall time once, so there is nothing to repeat
  (croniter iterating in an aware timezone returns such a start twice);
- a wall-clock start that does not exist (the spring-forward gap) moves to the first valid
  instant after it, the transition itself (02:30 in Europe/Berlin on the spring-forward day is
  03:00 CEST); several starts in one gap therefore collapse into that one occurrence.

APScheduler never interprets a cron expression here (its `CronTrigger` reads a numeric
day-of-week 0 as Monday, crontab as Sunday); it only wakes the service at instants computed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Iterator
from zoneinfo import ZoneInfo

from ..timeutil import format_instant, in_interval, to_utc
from .model import Window

__all__ = [
    "Occurrence",
    "occurrence_key",
    "wall_to_instant",
    "occurrences",
    "upcoming",
    "covering",
    "next_start",
    "starting_within",
]

_YEAR_LIMIT = 9000
_OFFSET_PROBES = (timedelta(hours=-48), timedelta(0), timedelta(hours=48))


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


def wall_to_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant (aware UTC) of the naive wall-clock time `wall` in `tz`, by the DST rule: an
    ambiguous wall time is its first instant; a non-existent one is the first valid instant
    after it (the end of the gap)."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(timezone.utc)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    other = wall.replace(tzinfo=tz, fold=1).astimezone(timezone.utc)
    lo, hi = min(first, other), max(first, other)
    # The smallest instant whose wall clock has reached `wall`: the transition ending the gap.
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp()) + 1
    while lo_s < hi_s:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi_s = mid
        else:
            lo_s = mid + 1
    return datetime.fromtimestamp(lo_s, timezone.utc)


def _cron_starts(window: Window, since: datetime) -> Iterator[datetime]:
    from croniter import CroniterError, croniter

    tz = window.tz
    # Wall times mapping to an instant >= since are at least since + (smallest nearby offset):
    # starting the wall-clock iteration there finds every one, also those in a DST gap.
    low_offset = min((since + probe).astimezone(tz).utcoffset() or timedelta(0) for probe in _OFFSET_PROBES)
    base = (since + low_offset).replace(tzinfo=None) - timedelta(seconds=1)
    iterator = croniter(window.cron, base, ret_type=datetime)
    previous = None
    while True:
        try:
            wall = iterator.get_next(datetime)
        except (CroniterError, OverflowError, ValueError):
            return
        if wall.year > _YEAR_LIMIT:
            return
        start = wall_to_instant(wall, tz)
        if start < since or start == previous:
            continue
        previous = start
        yield start


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
        starts = _cron_starts(window, since)
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
