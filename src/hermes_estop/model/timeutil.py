"""Instants, the injected clock, and the one half-open interval rule.

Time is injected everywhere as a `Clock` (a callable returning an aware UTC datetime) so every
deadline is testable; a decision reads the clock once and passes `now` down.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

from hermes_estop.model.errors import InvalidInstant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "COMPUTABLE",
    "AwareClock",
    "Clock",
    "WallClockGuard",
    "aware_clock",
    "display_instant",
    "format_instant",
    "format_relative",
    "in_interval",
    "local_zone",
    "next_deadline",
    "parse_instant",
    "parse_operator_time",
    "parse_stamp",
    "schedulable",
    "short_utc",
    "to_utc",
    "utc_now",
    "zone_name",
]

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock: an aware datetime in UTC."""
    return datetime.now(UTC)


class AwareClock:
    """An injected clock whose every reading is aware UTC: a naive reading is taken as UTC, like
    a naive stamp in a body, and an aware one in another zone is converted. Why convert: `now +
    ttl` on a zoned datetime is wall-clock arithmetic, so a 2h TTL armed before a fall-back night
    would last 3h. Other attributes reach the wrapped clock (a test's `advance()`)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Clock) -> None:
        self.inner = inner

    def __call__(self) -> datetime:
        value = self.inner()
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value if value.tzinfo is UTC else value.astimezone(UTC)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def aware_clock(clock: Clock) -> Clock:
    """`clock`, wrapped in `AwareClock` unless it is known to read aware time already."""
    if clock is utc_now or isinstance(clock, AwareClock):
        return clock
    return AwareClock(clock)


def to_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_stamp(value: object) -> datetime | None:
    """Lenient reading of a stamp found in a sentinel body: aware UTC, or None when absent or
    unparsable. Used on untrusted bodies, so it never raises; callers treat None as 'no deadline'
    (an unparsable deadline never means expired)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 64:
        return None
    if text[-1] in "zZ":
        text = text[:-1] + "+00:00"
    try:
        return to_utc(datetime.fromisoformat(text))
    except (ValueError, OverflowError):
        return None


def parse_instant(value: object, *, what: str = "time") -> datetime:
    """Strict reading of an operator-supplied absolute time (ISO-8601; naive means UTC).

    Raises `InvalidInstant` naming the value."""
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, bool) or not isinstance(value, str):
        raise InvalidInstant(f"invalid {what} {value!r}: expected an ISO-8601 time such as 2026-12-02T18:00:00Z")
    if not value.isascii():
        raise InvalidInstant(f"invalid {what} {value!r}: an ISO-8601 time takes ASCII digits only")
    stamp = parse_stamp(value)
    if stamp is None:
        raise InvalidInstant(f"invalid {what} {value!r}: expected an ISO-8601 time such as 2026-12-02T18:00:00Z")
    return stamp


#: the instants schedule math is done from, [first, last): croniter's walk stops at the year 9000
#: (`cronspec`), and an instant in range plus any bounded duration (a year at most) stays
#: representable, where one in the year 9999 overflows
COMPUTABLE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))


def schedulable(value: datetime, *, what: str = "time") -> datetime:
    """`value` when schedule math can start from it; else `InvalidInstant` naming it and the range."""
    first, last = COMPUTABLE
    if not first <= value < last:
        raise InvalidInstant(f"invalid {what} {format_instant(value)!r}: outside the range the schedule is "
                             f"computed in ({format_instant(first)} to before {format_instant(last)})")
    return value


def format_instant(value: datetime | None) -> str | None:
    """The wire and display form: ISO-8601 in UTC with an explicit offset."""
    if value is None:
        return None
    return to_utc(value).isoformat()


_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Zulu", "Etc/Zulu", "Universal", "Etc/Universal",
                        "GMT", "Etc/GMT", "Etc/GMT0", "GMT0"})
#: (the `time.tzname` it was found under, the local zone): `time.tzset()` makes a new `tzname`,
#: so the zone is looked up again exactly when the C library's is (`windows next` shows 100,000
#: times, and reading `$TZ` costs more than formatting one)
_LOCAL_ZONE: list[Any] = [None, None]


def local_zone() -> tzinfo | None:
    """The zone human-facing times are shown and read in: `$TZ` when it names an IANA zone,
    else the zone `/etc/localtime` links to; None leaves it to the C library's local time
    (a POSIX `TZ` rule, a copied zone file). Read again after `time.tzset()`."""
    if _LOCAL_ZONE[0] is time.tzname:
        return _LOCAL_ZONE[1]  # type: ignore[no-any-return]
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        target = os.path.realpath("/etc/localtime")
        name = target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""
    zone: tzinfo | None = None
    if name in _UTC_NAMES:
        zone = UTC  # the same instant-to-text as a ZoneInfo of it, a fraction of the cost
    elif name:
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            zone = None
    _LOCAL_ZONE[:] = [time.tzname, zone]
    return zone


def zone_name(zone: tzinfo | None) -> str:
    """`Europe/Berlin`, `UTC`, or the local zone's abbreviation when it has no IANA name."""
    if zone is None:
        return datetime.now().astimezone().tzname() or "local time"
    return str(getattr(zone, "key", None) or zone.tzname(None) or zone)


def display_instant(value: datetime | None) -> str | None:
    """THE form of an instant a person reads (every human-facing line: `hermes status`, pause
    and resume, `windows`, `check --at`, the notice refused users get): to the second, in the
    local zone, with its offset (`2026-12-05 14:54:18+01:00`, which `--until` reads back).
    Scripts get `format_instant` (UTC, exact) in `--json`."""
    if value is None:
        return None
    if value.microsecond:
        value = value.replace(microsecond=0)
    zone = local_zone()
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).astimezone(zone).isoformat()


_EXPECTED = "expected 15:00, tomorrow 03:00 or an ISO-8601 time (2026-12-02T18:00:00Z), each optionally followed by a zone"
#: the day words `parse_operator_time` reads before a wall-clock time
_DAYS = {"today": 0, "tomorrow": 1}


def parse_operator_time(value: str, now: datetime, *, what: str = "time") -> tuple[datetime, str | None]:
    """An operator's `--at` / `--until`: an ISO-8601 time (an offset or `Z` is exact; naive is
    UTC, as it always was; what `display_instant` shows reads back), or a wall-clock time `15:00` (the next one at or after `now`),
    `today 15:00`, `tomorrow 03:00`; any of them may end with a zone (`Europe/Berlin`, `UTC`),
    else a wall-clock time is local time. Returns the instant (aware UTC) and, when a zone was
    assumed, a sentence saying which and what the value was read as (None when it said).
    Raises `InvalidInstant` naming the value."""
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or not text or not text.isascii():
        return parse_instant(value, what=what), None
    words = text.split()
    named = len(words) > 1 and not words[-1][:1].isdigit()
    zone = _named_zone(words, value, what) if named else None
    if named:
        words = words[:-1]
    if len(words) == 2 and "-" in words[0] and ":" in words[1]:
        words = [f"{words[0]}T{words[1]}"]  # `2026-12-05 14:54:18+01:00`, ISO-8601 with a space
    day = _DAYS.get(words[0].lower()) if len(words) == 2 else None
    clock = words[-1] if len(words) == 1 or day is not None else None
    if clock is None or not _is_wall_clock(clock):
        if not _may_be_iso(words, clock, day):
            raise InvalidInstant(f"invalid {what} {value!r}: {_EXPECTED}")
        return _iso_time(value, words[0], zone, what)
    local = zone if named else local_zone()
    instant = _next_wall_clock(clock, day, local, now, value, what)
    if named:
        return instant, None
    return instant, f"{what} {value!r} read in local time ({zone_name(local)}): {display_instant(instant)}"


def _is_wall_clock(clock: str) -> bool:
    return ":" in clock and "-" not in clock and "T" not in clock.upper()


def _may_be_iso(words: list[str], clock: str | None, day: int | None) -> bool:
    return len(words) == 1 and clock is not None and ("-" in clock or day is not None or ":" in clock)


def _named_zone(words: list[str], value: str, what: str) -> tzinfo:
    """The zone the last word names (`UTC`, `Z`, an IANA name); `InvalidInstant` otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return UTC if words[-1].upper() in ("UTC", "Z") else ZoneInfo(words[-1])
    except (ZoneInfoNotFoundError, ValueError, OSError):
        if not any(mark in words[-2] for mark in ":-"):
            raise InvalidInstant(f"invalid {what} {value!r}: {_EXPECTED}") from None
        raise InvalidInstant(f"invalid {what} {value!r}: unknown time zone {words[-1]!r} "
                             "(an IANA name such as Europe/Berlin, or UTC)") from None


def _next_wall_clock(clock: str, day: int | None, local: tzinfo | None, now: datetime, value: str, what: str) -> datetime:
    """The instant of the wall-clock time `clock` in `local`: on the day `day` days from today, or
    (no day given) the next one at or after `now`."""
    wall = _wall_clock(clock)
    if wall is None:
        raise InvalidInstant(f"invalid {what} {value!r}: expected a time of day such as 15:00 or 03:30:00")
    here = now.astimezone(local)
    start = here.replace(hour=wall[0], minute=wall[1], second=wall[2], microsecond=0, tzinfo=None)
    start += timedelta(days=day or 0)
    instant = _localized(start, local)
    if day is None and instant < now:
        instant = _localized(start + timedelta(days=1), local)
    return instant


def _iso_time(value: str, text: str, zone: tzinfo | None, what: str) -> tuple[datetime, str | None]:
    """An ISO-8601 `text` (of `value`), read in `zone` when one was named after it."""
    instant = parse_instant(text, what=what)
    naive = datetime.fromisoformat(text).tzinfo is None
    if zone is None:
        return instant, None  # naive ISO-8601 is UTC, as the help says and always was
    if not naive:
        raise InvalidInstant(f"invalid {what} {value!r}: give an offset or a zone, not both")
    return to_utc(datetime.fromisoformat(text).replace(tzinfo=zone)), None


def _wall_clock(text: str) -> tuple[int, int, int] | None:
    """(hour, minute, second) of `HH:MM` or `HH:MM:SS` (`3:00` too), else None."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(part.isdigit() and len(part) in (1, 2) for part in parts):
        return None
    hour, minute, second = (int(part) for part in (*parts, "00")[:3])
    return (hour, minute, second) if hour < 24 and minute < 60 and second < 60 else None


def _localized(wall: datetime, zone: tzinfo | None) -> datetime:
    """The aware UTC instant of the naive wall-clock time `wall` in `zone` (None: C local time)."""
    return to_utc(wall.astimezone() if zone is None else wall.replace(tzinfo=zone))


def format_relative(target: datetime, now: datetime) -> str:
    """'in 43m', 'in 2h05m', '3m ago': the human half of a deadline."""
    seconds = (target - now).total_seconds()
    if not math.isfinite(seconds):
        return "never"
    future = seconds >= 0
    seconds = int(abs(seconds) + (0.999 if future else 0))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days}d{hours:02d}h"
    elif hours:
        text = f"{hours}h{minutes:02d}m"
    elif minutes:
        text = f"{minutes}m" if not secs else f"{minutes}m{secs:02d}s"
    else:
        text = f"{secs}s"
    return f"in {text}" if future else f"{text} ago"


def in_interval(now: datetime, start: datetime | None, end: datetime | None) -> bool:
    """THE interval rule, half-open `[start, end)`: at exactly `end` it no longer holds.

    `None` for either bound means unbounded on that side. A hold is active while
    `in_interval(now, None, expires_at)`; an occurrence covers `now` while
    `in_interval(now, start, end)`. Every caller uses this one function."""
    if start is not None and now < start:
        return False
    return end is None or now < end


def next_deadline(deadline: float, interval: float, current: float) -> tuple[float, int]:
    """The next tick's monotonic deadline after the one at `deadline`, and how many ticks were
    missed: deadlines already in the past at `current` are skipped, never run in a burst."""
    deadline += interval
    if current < deadline:
        return deadline, 0
    missed = int((current - deadline) // interval) + 1
    return deadline + missed * interval, missed


class WallClockGuard:
    """This host's wall clock as far as the monotonic clock confirms it: what the file store
    checks an expiry against before it retires one (docs/design.md, "Which clock decides an
    expiry").

    Each reading is compared with the last confirmed (wall, monotonic) pair: a wall clock that
    moved ahead by more than the monotonic clock did (plus `SLEW`: NTP's slewing) jumped, and the
    jump is not trusted: `trusted()` keeps answering the last confirmed wall time plus the
    monotonic time since, until the wall clock comes back to it. A backward jump only makes
    retires later, so it is accepted at once. A process that starts after a jump takes the wall
    clock as it finds it when it starts (restart `hermes serve` to accept a correction forward)."""

    #: seconds of disagreement tolerated per reading, and per second elapsed (500 ppm: NTP's bound)
    TOLERANCE = 1.0
    SLEW = 0.0005

    def __init__(self, wall: Callable[[], float] | None = None, monotonic: Callable[[], float] | None = None) -> None:
        import time

        self._wall = wall or time.time
        self._monotonic = monotonic or time.monotonic
        self._base = (self._wall(), self._monotonic())

    def trusted(self) -> tuple[datetime, float]:
        """(the instant this process can vouch for, seconds the wall clock is ahead of it: 0.0
        when nothing unconfirmed happened)."""
        wall, mono = self._wall(), self._monotonic()
        base = self._base
        elapsed = mono - base[1]
        projected = base[0] + elapsed
        ahead = wall - projected
        if ahead > self.TOLERANCE + self.SLEW * max(elapsed, 0.0):
            return datetime.fromtimestamp(projected, UTC), ahead
        self._base = (wall, mono)
        return datetime.fromtimestamp(wall, UTC), 0.0


def short_utc(when: datetime) -> str:
    """An instant in UTC to the minute with its weekday: short enough for a timeline label."""
    return when.astimezone(UTC).strftime("%a %d %b %H:%M UTC")
