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

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.timeutil import to_utc

__all__ = [
    "validate_cron",
    "validate_timezone",
    "wall_to_instant",
    "starts",
    "first_start_after",
    "fires",
    "probe_deferred",
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
    text = _validated(expr)
    if _PROBING.get() and not fires(text):
        raise InvalidArgument(f"invalid cron expression {expr!r}: it never fires")
    return text


#: False inside `probe_deferred`
_PROBING: ContextVar[bool] = ContextVar("probing", default=True)


@contextmanager
def probe_deferred() -> Iterator[None]:
    """`validate_cron` without its "does it ever fire" probe (a third of a distinct expression's
    croniter work), for a caller that enumerates the starts anyway and asks `fires` of an
    expression that has none (the windows compile)."""
    token = _PROBING.set(False)
    try:
        yield
    finally:
        _PROBING.reset(token)


#: distinct expressions validated per process (the texts; the parsed croniters are `_parsed`'s)
_REMEMBERED = 1 << 17


@functools.lru_cache(maxsize=_REMEMBERED)
def _validated(expr: str) -> str:
    """`expr` normalized (single spaces), when it is a 5-field crontab expression croniter reads
    deterministically; else `InvalidArgument` naming it.

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
    try:
        _parsed(text)
    except _PARSE_ERRORS:
        raise InvalidArgument(f"invalid cron expression {expr!r}: croniter cannot parse it") from None
    return expr if text == expr else text  # one string for both


@functools.lru_cache(maxsize=_REMEMBERED)
def fires(text: str) -> bool:
    """Whether the valid expression `text` (`validate_cron`'s) fires at all (croniter finds a
    start after 2000-01-01 within its search limit)."""
    from croniter import CroniterBadDateError

    try:
        _copy(_parsed(text)).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


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

    `expr` is parsed here, so a bad one raises `InvalidArgument` at the call, not at the first
    `next()`; run it through `validate_cron` first to get the stricter refusals."""
    since = to_utc(since)
    base = (since + _low_offset(since, tz)).replace(tzinfo=None) - timedelta(seconds=1)
    try:
        iterator = _copy(_parsed(expr))
    except _PARSE_ERRORS as exc:
        raise InvalidArgument(f"invalid cron expression {expr!r}: {exc}") from None
    iterator.set_current(base, force=True)
    return _starts(iterator, tz, since)


@functools.lru_cache(maxsize=256)
def _low_offset(since: datetime, tz: ZoneInfo) -> timedelta:
    """The smallest offset of `tz` within two days of `since`: wall times mapping to an instant
    at or after `since` are at least `since` plus it, so the wall-clock iteration started there
    finds every one, also those in a DST gap. Kept: a compile asks it of one `since` per zone
    and duration for all its windows (a tenth of a start's cost besides croniter's)."""
    return min((since + probe).astimezone(tz).utcoffset() or timedelta(0) for probe in _OFFSET_PROBES)


def _copy(parsed: Any) -> Any:
    """`copy.copy` of a parsed croniter (its attributes shared, as a shallow copy shares them:
    iterating rebinds `cur`, never mutates what the parse built), without `copy`'s dispatch:
    one per window compiled."""
    fresh = object.__new__(type(parsed))
    fresh.__dict__.update(parsed.__dict__)
    return fresh


#: croniters kept parsed (about 1 KB and five containers the garbage collector walks each: a
#: compile enumerates each expression's starts right after validating it, so a few recent ones
#: suffice; keeping 10,000 cost a cold `status` a tenth of a second in collections, issue 45)
_PARSED = 1 << 10


@functools.lru_cache(maxsize=_PARSED)
def _parsed(expr: str) -> Any:
    """A croniter parsed once per expression: parsing is most of what a start costs, and a
    scheduler asks for the starts of the same windows on every tick. Callers iterate copies."""
    return _composing()(expr, datetime(2000, 1, 1), ret_type=datetime)


#: an expression of five plain fields (digits, `*`, `,`, `-`, `/`) as `_validated` spells it:
#: each field's expansion depends on no other field but whether the other day field has a `*`
_PLAIN = re.compile(r"[0-9*,/-]+(?: [0-9*,/-]+){4}")


@functools.cache
def _composing() -> type[Any]:
    """croniter whose parse of a plain expression is composed of its fields' expansions, each
    croniter's own and made once per distinct field: 10,000 distinct expressions have a few
    hundred distinct fields, and croniter's parse was a third of a cold compile (issue 45).
    Any other expression (names, `L`, `W`, `#`, `?`, seconds) is parsed by croniter whole; the
    times are croniter's either way."""
    from croniter import croniter

    class Composing(croniter):  # type: ignore[misc]  # croniter is untyped
        @classmethod
        def _expand(cls, expr_format: str, **options: Any) -> tuple[list[Any], dict[int, set[int]], list[str], set[int]]:
            if not _PLAIN.fullmatch(expr_format) or any(options.values()):
                return super()._expand(expr_format, **options)  # type: ignore[no-any-return]
            fields = expr_format.split(" ")
            try:
                expanded = [_field(i, text, "*" in fields[6 - i] if i in (2, 4) else False)
                            for i, text in enumerate(fields)]
            except _PARSE_ERRORS:
                return super()._expand(expr_format)  # type: ignore[no-any-return]  # its refusal, naming it
            return expanded, {}, fields, set()

    return Composing


@functools.lru_cache(maxsize=1024)
def _field(index: int, text: str, other_day_star: bool) -> list[Any]:
    """croniter's expansion of field `index` written `text`, the other day field (day of month
    for day of week, and the reverse) a `*` or not: all a plain field's expansion reads."""
    from croniter import croniter

    fields = ["*"] * 5
    fields[index] = text
    if index in (2, 4) and not other_day_star:
        fields[6 - index] = "1"
    return croniter.expand(" ".join(fields))[0][index]  # type: ignore[no-any-return]


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
