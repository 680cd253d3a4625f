"""Plain crontab expressions matched without croniter: numbers, `*`, ranges, lists and steps.

croniter parses an expression in about a millisecond and steps to the next match in about half
of one; a fleet of 100,000 windows with distinct schedules paid that per window on every
command. An expression in the plain grammar below is parsed here into five sets, and its next
wall-clock match found by walking days, so a start costs microseconds. Anything else (names,
`L`, `W`, `#`, `N/S`, `N-N`, a reversed range, a value out of range, `*` in a list, a step on `*`
in the day fields, where crontabs differ on the day-or-weekday rule) returns None from `parse` and stays with
croniter. tests/test_cronmatch.py checks both agree on the grammar this module takes.

The matching is croniter's: day of month and day of week both restricted (a field listing
every value is not) means either matches; day of week 7 is Sunday; the next match is strictly after the base, at whole
minutes.
"""

from __future__ import annotations

import functools
import re
from calendar import monthrange
from datetime import date, datetime, timedelta

__all__ = ["CronSet", "next_match", "parse"]

_ITEM = re.compile(r"(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:/(\d{1,2}))?\Z")
#: (low, high) of minute, hour, day of month, month, day of week
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
#: far enough ahead that a day that exists at all comes round (29 February after 2096 is 2104)
_YEARS_AHEAD = 9

#: (minutes, hours, days of month or None for any, months, days of week 0-6 or None for any),
#: each sorted
CronSet = tuple[tuple[int, ...], tuple[int, ...], "tuple[int, ...] | None", frozenset[int], "frozenset[int] | None"]


@functools.lru_cache(maxsize=1024)
def _field(text: str, index: int) -> tuple[int, ...] | None:
    """The sorted values of one field, None when it is not in the plain grammar."""
    low, high = _BOUNDS[index]
    values: set[int] = set()
    items = text.split(",")
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            return None
        star, first, last, step = match.groups()
        if star == "*":
            if len(items) > 1:
                return None  # `*` in a list: croniter reads it its own way
            if step is not None and index in (2, 4):
                return None  # `*/S` in a day field: cron implementations disagree on the day rule
            start, stop = low, high
        else:
            if step is not None and last is None:
                return None  # `N/S`: croniter reads it as N-high/S, others differently
            start = int(first)
            stop = int(last) if last is not None else start
            if not low <= start <= stop <= high or (last is not None and start == stop):
                return None  # out of range, reversed, or `N-N` (croniter reads that one its own way)
        stride = int(step) if step is not None else 1
        if stride < 1:
            return None
        values.update(range(start, stop + 1, stride))
    if index == 4:
        values = {value % 7 for value in values}
    return tuple(sorted(values))


@functools.lru_cache(maxsize=1 << 17)
def parse(expr: str) -> CronSet | None:
    """The sets of a plain 5-field expression (single-spaced, as `cronspec` normalizes it);
    None when croniter must read it."""
    texts = expr.split(" ")
    if len(texts) != 5:
        return None
    fields = [_field(text, index) for index, text in enumerate(texts)]
    minutes, hours, days, months, weekdays = fields
    if minutes is None or hours is None or days is None or months is None or weekdays is None:
        return None
    any_day, any_weekday = texts[2] == "*", texts[4] == "*"
    if (len(days) == 31 and not any_day) or (len(weekdays) == 7 and not any_weekday):
        return None  # every day spelled out: croniter reads one such field as `*` and the other not
    return (minutes, hours, None if any_day else days, _set(months), None if any_weekday else _set(weekdays))


@functools.lru_cache(maxsize=1024)
def _set(values: tuple[int, ...]) -> frozenset[int]:
    """One set per distinct field: 100,000 schedules share a few dozen month sets."""
    return frozenset(values)


def _day_matches(cron: CronSet, day: date) -> bool:
    days, weekdays = cron[2], cron[4]
    if days is None and weekdays is None:
        return True
    by_day = days is not None and day.day in days
    by_weekday = weekdays is not None and day.isoweekday() % 7 in weekdays
    return by_day or by_weekday


def next_match(cron: CronSet, base: datetime) -> datetime | None:
    """The first naive wall-clock time strictly after `base` that `cron` matches; None when
    it never does (within `_YEARS_AHEAD` years: it never will)."""
    minutes, hours, days, months, weekdays = cron
    t = base.replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = t.date()
    hour, minute = t.hour, t.minute
    limit = day.year + _YEARS_AHEAD
    while day.year <= limit:
        if day.month not in months:
            day = date(day.year + (day.month == 12), day.month % 12 + 1, 1)
            hour = minute = 0
            continue
        if days is not None and weekdays is None and day.day not in days:  # to the next listed day
            listed = next((d for d in days if d > day.day), None)
            if listed is None or listed > monthrange(day.year, day.month)[1]:
                day = date(day.year + (day.month == 12), day.month % 12 + 1, 1)
            else:
                day = day.replace(day=listed)
            hour = minute = 0
            continue
        if _day_matches(cron, day):
            for h in hours:
                if h < hour:
                    continue
                floor = minute if h == hour else 0
                for m in minutes:
                    if m >= floor:
                        return datetime(day.year, day.month, day.day, h, m)
        day += timedelta(days=1)
        hour = minute = 0
    return None
