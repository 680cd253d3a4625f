"""Cron math, done one way for every scheduler (maintenance windows and cron jobs alike).

A schedule is a 5-field crontab expression (minute hour day-of-month month day-of-week, day-of-week
0 and 7 are Sunday, as croniter and crontab read it) in an IANA timezone. The matching is
croniter's, done on the WALL CLOCK of the zone (naive local datetimes); each matching wall-clock
time is then placed on the time line by `wall_to_instant`, which carries THE DST rule:

- a wall-clock start that occurs twice (the fall-back hour) occurs ONCE, at its first instant;
  iterating naive wall-clock times yields each wall time once, so there is nothing to repeat
  (croniter iterating in an aware timezone returns such a start twice);
- a wall-clock start that does not exist (the spring-forward gap) moves to the first valid
  instant after it, the transition itself (02:30 in Europe/Berlin on the spring-forward day is
  03:00 CEST); several starts in one gap therefore collapse into that one start.

croniter is imported inside the functions, so importing this module (as the core and `hermes
check` do) never loads it. Every refusal is `InvalidArgument` (a `ValueError`, so pydantic
validators pass it through) naming the bad value.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
from bisect import bisect_left
from datetime import datetime, timedelta, UTC
from typing import Any
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.timeutil import to_utc

__all__ = [
    "validate_cron",
    "validate_timezone",
    "wall_to_instant",
    "starts",
    "first_start_after",
]

# croniter's `R` (random) and `H` (hashed) fields: a start must be the same instant every time it
# is computed, by every process, or a ledger (or a job table) could not name it.
_NONDETERMINISTIC_RE = re.compile(r"(?<![A-Z])[RH](?![A-Z])")
_YEAR_LIMIT = 9000
_OFFSET_PROBES = (timedelta(hours=-48), timedelta(0), timedelta(hours=48))
_ZONE_HINT = "expected an IANA zone such as Europe/Berlin"
#: what croniter raises for an expression it cannot read: its `CroniterError`s are `ValueError`s,
#: its `CroniterBadTypeRangeError` a `TypeError` (named here so croniter stays unimported)
_PARSE_ERRORS = (ValueError, TypeError)


def validate_cron(expr: Any) -> str:
    if not isinstance(expr, str):
        raise InvalidArgument(f"invalid cron expression {expr!r}: expected text such as '30 2 * * *'")
    return _validated(expr)


#: distinct expressions remembered per process: every one of a 100,000-window file, so each is
#: parsed by croniter once (about 100 us and 1.3 KB each), not once to validate and again to
#: compute its starts (a smaller cache evicts them in between: issue 24)
_REMEMBERED = 1 << 17


@functools.lru_cache(maxsize=_REMEMBERED)
def _validated(expr: str) -> str:
    """`expr` normalized (single spaces), when it is a 5-field crontab expression croniter reads
    deterministically and that fires at all; else `InvalidArgument` naming it.

    croniter itself also accepts 6- and 7-field forms (seconds, year) and `@daily`-style
    aliases; a schedule here takes exactly the five crontab fields."""
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidArgument(
            f"invalid cron expression {expr!r}: expected exactly 5 fields (minute hour day month weekday), "
            f"got {len(fields)}"
        )
    text = " ".join(fields)
    if _NONDETERMINISTIC_RE.search(text.upper()):
        raise InvalidArgument(f"invalid cron expression {expr!r}: random (R) and hashed (H) fields are not allowed")
    from croniter import CroniterBadDateError


    try:
        parsed = _parsed(text)
    except _PARSE_ERRORS:
        raise InvalidArgument(f"invalid cron expression {expr!r}: croniter cannot parse it") from None
    try:
        copy.copy(parsed).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidArgument(f"invalid cron expression {expr!r}: it never fires") from None
    return text


#: the zones found, by the name asked for (a window's `tz` is asked per occurrence: a dict
#: lookup, not ZoneInfo's own cache behind a call; IANA names a few hundred at most)
_ZONES: dict[str, ZoneInfo] = {}


def validate_timezone(name: Any) -> ZoneInfo:
    """The IANA zone `name` (surrounding blanks ignored), or `InvalidArgument` naming it."""
    if type(name) is str:
        found = _ZONES.get(name)
        if found is not None:
            return found
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"invalid timezone {name!r}: {_ZONE_HINT}")
    try:
        zone = ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        raise InvalidArgument(f"unknown timezone {name!r}: {_ZONE_HINT}") from None
    if len(_ZONES) < 4096:
        _ZONES[name] = zone
    return zone


def wall_to_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant (aware UTC) of the naive wall-clock time `wall` in `tz`, by the DST rule: an
    ambiguous wall time is its first instant; a non-existent one is the first valid instant
    after it (the end of the gap)."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    other = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = min(first, other), max(first, other)
    # The smallest instant whose wall clock has reached `wall`: the transition ending the gap.
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp()) + 1
    while lo_s < hi_s:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi_s = mid
        else:
            lo_s = mid + 1
    return datetime.fromtimestamp(lo_s, UTC)


def starts(expr: str, tz: ZoneInfo, since: datetime) -> Iterator[datetime]:
    """The starts of `expr` in `tz` at or after `since`, in order, each once, as aware UTC
    instants placed by the DST rule. Ends (rather than running on) past the year 9000.

    `expr` is parsed here (unless a remembered run answers), so a bad one raises
    `InvalidArgument` at the call, not at the first `next()`; run it through `validate_cron`
    first to get the stricter refusals. The starts computed are remembered (`StartRuns`)."""
    since = to_utc(since)
    key = (expr, tz.key) if tz.key else None
    run = RUNS.find(key, since.timestamp()) if key is not None else None
    if run is None:
        computed = _computed(expr, tz, since)
        if key is None:
            return computed
        run = RUNS.begin(key, since.timestamp())
        return _walk(run, expr, tz, 0, computed)
    return _walk(run, expr, tz, bisect_left(run.starts, since.timestamp()), None)


def _computed(expr: str, tz: ZoneInfo, since: datetime) -> Iterator[datetime]:
    """`starts`, computed by croniter (nothing remembered)."""
    # Wall times mapping to an instant >= since are at least since + (smallest nearby offset):
    # starting the wall-clock iteration there finds every one, also those in a DST gap.
    low_offset = min((since + probe).astimezone(tz).utcoffset() or timedelta(0) for probe in _OFFSET_PROBES)
    base = (since + low_offset).replace(tzinfo=None) - timedelta(seconds=1)
    try:
        iterator = copy.copy(_parsed(expr))
    except _PARSE_ERRORS as exc:
        raise InvalidArgument(f"invalid cron expression {expr!r}: {exc}") from None
    iterator.set_current(base, force=True)
    return _starts(iterator, tz, since)


class RememberedStarts:
    """Starts of one schedule remembered from `lo` (epoch seconds): the schedule's starts in
    `[lo, starts[-1]]` are exactly `starts` (epoch seconds, ascending); in `[lo, forever)` when
    `complete`. Extended by whoever walks past its end, so a run only ever holds starts that
    someone asked for."""

    __slots__ = ("complete", "lo", "starts")

    def __init__(self, lo: float, starts: list[int] | None = None, complete: bool = False) -> None:
        self.lo = lo
        self.starts = starts if starts is not None else []
        self.complete = complete

    def answers(self, at: float) -> bool:
        return self.lo <= at and (self.complete or (bool(self.starts) and at <= self.starts[-1]))


class StartRuns:
    """The starts computed in this process, per (expression, zone name): what lets a command
    with 10,000 windows with distinct schedules skip croniter (parsing one costs about 100 us,
    a step 40 us) for every start it was already told, here or, seeded from a cache
    (`windows.compiled`), in an earlier process. At most `PER_SCHEDULE` runs per schedule
    (callers ask from a few points: now, now less a duration, a `--at`), the oldest dropped;
    a run stops growing at `KEPT` starts (a walk past that is computed, not remembered), so a
    scheduler walking a minutely schedule for a year holds no more than that."""

    PER_SCHEDULE = 3
    KEPT = 64

    def __init__(self) -> None:
        # a schedule's one run on its own, its runs in a list once it has several (most have
        # one: a list each would be a fifth of the memory of 100,000 distinct schedules)
        self._runs: dict[tuple[str, str], RememberedStarts | list[RememberedStarts]] = {}
        self.changed = False

    def _of(self, key: tuple[str, str]) -> list[RememberedStarts]:
        found = self._runs.get(key)
        if found is None:
            return []
        return [found] if isinstance(found, RememberedStarts) else list(found)

    def find(self, key: tuple[str, str], at: float) -> RememberedStarts | None:
        found = self._runs.get(key)
        if found is None:
            return None
        if isinstance(found, RememberedStarts):
            return found if found.answers(at) else None
        for run in found:
            if run.answers(at):
                return run
        return None

    def begin(self, key: tuple[str, str], at: float) -> RememberedStarts:
        if len(self._runs) >= _REMEMBERED and key not in self._runs:
            self._runs.clear()
        run = RememberedStarts(at)
        self._keep(key, [*self._of(key)[-(self.PER_SCHEDULE - 1):], run])
        self.changed = True
        return run

    def seed(self, key: tuple[str, str], run: RememberedStarts) -> None:
        """A run told by an earlier process (the caller vouches for the croniter and the zone
        data it was computed with)."""
        runs = self._of(key)
        if len(runs) < self.PER_SCHEDULE:
            self._keep(key, [*runs, run])

    def _keep(self, key: tuple[str, str], runs: list[RememberedStarts]) -> None:
        self._runs[key] = runs[0] if len(runs) == 1 else runs

    def items(self) -> Iterator[tuple[tuple[str, str], RememberedStarts]]:
        for key, found in self._runs.items():
            for run in [found] if isinstance(found, RememberedStarts) else found:
                yield key, run

    def clear(self) -> None:
        self._runs.clear()
        self.changed = False


RUNS = StartRuns()
_EXTENDING = threading.Lock()


def _walk(run: RememberedStarts, expr: str, tz: ZoneInfo, index: int, computed: Iterator[datetime] | None) -> Iterator[datetime]:
    """The starts of `run` from `index` on, extending it with croniter past its end. `computed`
    (when given) continues from the run's last start; another walker may extend the run in
    between, so a walker's own iterator is used only while it is at the run's end. Runs are
    only appended to, so every walker's index stays right."""
    position = run.starts[-1] if run.starts and computed is not None else None
    while True:
        if index < len(run.starts):
            yield datetime.fromtimestamp(run.starts[index], UTC)
            index += 1
            continue
        if run.complete:
            return
        last = run.starts[-1] if run.starts else None
        if computed is None or position != last:
            since = run.lo if last is None else last + 1
            computed = _computed(expr, tz, datetime.fromtimestamp(since, UTC))
        start = next(computed, None)
        with _EXTENDING:
            if (run.starts[-1] if run.starts else None) != last:
                computed = None  # another thread extended the run meanwhile: replay what it added
                continue
            if start is None:
                run.complete = RUNS.changed = True
                return
            if len(run.starts) < StartRuns.KEPT and not start.microsecond:
                position = int(start.timestamp())
                run.starts.append(position)
                RUNS.changed = True
                continue
        yield start
        yield from computed
        return


@functools.lru_cache(maxsize=_REMEMBERED)
def _parsed(expr: str) -> Any:
    """A croniter parsed once per expression: parsing is most of what a start costs, and a
    scheduler asks for the starts of the same windows on every tick. Callers iterate copies."""
    from croniter import croniter

    return croniter(expr, datetime(2000, 1, 1), ret_type=datetime)


def _starts(iterator: Any, tz: ZoneInfo, since: datetime) -> Iterator[datetime]:
    from croniter import CroniterError

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


def first_start_after(expr: str, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first start of `expr` in `tz` strictly after `after` (aware UTC, by the DST rule);
    None when there is none before the year 9000."""
    after = to_utc(after)
    for start in starts(expr, tz, after):
        if start > after:
            return start
    return None
