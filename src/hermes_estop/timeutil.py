"""Instants, the injected clock, and the one half-open interval rule.

Time is injected everywhere as a `Clock` (a callable returning an aware UTC datetime) so every
deadline is testable; a decision reads the clock once and passes `now` down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from .errors import InvalidInstant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "COMPUTABLE",
    "AwareClock",
    "Clock",
    "WallClockGuard",
    "aware_clock",
    "format_instant",
    "format_relative",
    "in_interval",
    "next_deadline",
    "parse_instant",
    "parse_stamp",
    "schedulable",
    "to_utc",
    "utc_now",
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


def parse_stamp(value: Any) -> datetime | None:
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


def parse_instant(value: Any, *, what: str = "time") -> datetime:
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
