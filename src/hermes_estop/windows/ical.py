"""An iCalendar feed as maintenance occurrences (issue 27). `icalendar` parses, `x_wr_timezone`
repairs Google's exports (the zone only in `X-WR-TIMEZONE`), `recurring_ical_events` expands
RRULE, RDATE, EXDATE and RECURRENCE-ID: no recurrence rule is interpreted here. A feed comes from
outside, so it is refused (`CalendarError`, one line naming the calendar) when too large, nested
too deep or over its expansion budget (docs/design.md §7): a hostile .ics never hangs `serve`.
Floating times and all-day events are read in the calendar's zone (the source's `timezone`, else
`X-WR-TIMEZONE`, else UTC), a start in a DST gap by `cronspec.wall_to_instant`'s rule.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from hermes_estop.model.cronspec import validate_timezone, wall_to_instant
from hermes_estop.model.durations import MAX_DURATION
from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import clean_reason
from hermes_estop.model.timeutil import to_utc

__all__ = ["MAX_CALENDAR_BYTES", "CalendarError", "CalendarEvent", "Feed", "feed_digest", "parse_feed"]

#: a feed larger than this is refused (a team calendar of years of events is a few hundred KiB)
MAX_CALENDAR_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 4
MAX_COMPONENTS = 20_000
MAX_COUNT = 100_000
#: the expansion budget (issue 32 item 7, issue 33 item 5): rule steps (periods of a rule's FREQ
#: dateutil visits, matching or not) one rule may walk, and all rules of one expansion; the
#: occurrences and (a backstop) the seconds of one expansion
MAX_STEPS = 200_000
MAX_FEED_STEPS = 1_000_000
MAX_FEED_OCCURRENCES = 500_000
MAX_EXPANSION_SECONDS = 30.0
#: a refusal for time alone (a loaded machine) is tried again after this many seconds
TIME_REFUSAL_KEPT = 600.0
_HORIZON = timedelta(days=3 * 366)
_STEP = {"HOURLY": timedelta(hours=1), "DAILY": timedelta(days=1), "WEEKLY": timedelta(days=7),
         "MONTHLY": timedelta(days=28), "YEARLY": timedelta(days=365)}
_MULTIPLIERS = ("BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH")
#: expansion is done and remembered in aligned chunks of this length
CHUNK = timedelta(days=32)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_CHUNKS = 48
#: recurring_ical_events compares a floating time or a date as if it were UTC, read here in the
#: calendar's zone (up to 14 hours off): an expansion asks this much wider than its chunks
_MARGIN = timedelta(days=1)
#: how far ahead of a start instant `Feed.events` looks before it says there is no more
LOOKAHEAD = timedelta(days=2 * 366)
_UID_RE = re.compile(r"[\x21-\x7e]{1,120}")
_US = timedelta(microseconds=1)


class CalendarError(EstopError):
    """A feed that cannot be used: one line naming the calendar."""


@dataclass(frozen=True)
class CalendarEvent:
    """One occurrence of a VEVENT: `[start, end)` in aware UTC; `ident` from UID and
    RECURRENCE-ID (stable when the instance is moved); `reason` the SUMMARY; `days` an all-day
    event's dates `[first, last)` as written."""

    start: datetime
    end: datetime
    ident: str
    uid: str
    reason: str
    days: tuple[date, date] | None = None


def _refuse(label: str, why: str) -> CalendarError:
    return CalendarError(f"calendar {label}: {why}")


def _check_shape(text: str, label: str) -> None:
    """Refuse deep nesting and too many components before the parser sees the text."""
    depth = components = 0
    for line in text.splitlines():
        if line[:6].upper() == "BEGIN:":
            depth += 1
            components += 1
            if depth > MAX_DEPTH:
                raise _refuse(label, f"components nested more than {MAX_DEPTH} deep")
            if components > MAX_COMPONENTS:
                raise _refuse(label, f"more than {MAX_COMPONENTS} components")
        elif line[:4].upper() == "END:":
            depth -= 1


def _value(component: Any, name: str) -> Any:
    return getattr(component.get(name), "dt", None)


def _check_rule(event: Any, label: str, now: datetime) -> float:
    """Refuse a rule that would run away (SECONDLY, MINUTELY, a huge COUNT, more than
    `MAX_STEPS` steps to the horizon) before anything expands it; its steps, estimated."""
    total = 0.0
    for rule in event.rrules:
        uid = str(event.get("UID", "?"))[:80]
        freq = (rule.get("FREQ") or ["?"])[0]
        if freq not in _STEP:
            raise _refuse(label, f"event {uid!r}: RRULE FREQ={freq} refused (hourly or slower only)")
        count = (rule.get("COUNT") or [None])[0]
        if count is not None and int(count) > MAX_COUNT:
            raise _refuse(label, f"event {uid!r}: RRULE COUNT={count} refused (at most {MAX_COUNT})")
        interval = max(int((rule.get("INTERVAL") or [1])[0]), 1)
        multiplier = math.prod(max(len(rule.get(key) or []), 1) for key in _MULTIPLIERS)
        start = _value(event, "DTSTART")
        if start is None:
            raise _refuse(label, f"event {uid!r}: RRULE without DTSTART")
        until = (rule.get("UNTIL") or [None])[0]
        last = now + _HORIZON if until is None else min(now + _HORIZON, _instant(until, UTC))
        steps = max((last - _instant(start, UTC)) / (_STEP[freq] * interval), 0) * multiplier
        if count is not None:
            steps = min(steps, int(count) * multiplier)
        if steps > MAX_STEPS:
            raise _refuse(label, f"event {uid!r}: RRULE would take about {int(steps)} steps to expand "
                                 f"(at most {MAX_STEPS}: a rule this dense or this old is refused)")
        total += steps
    return total


def _instant(value: date | datetime, tz: ZoneInfo | timezone) -> datetime:
    """A DTSTART/DTEND value as aware UTC: a date is its local midnight in `tz`, a floating
    time is read in `tz`."""
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return wall_to_instant(value, tz) if value.tzinfo is None and isinstance(tz, ZoneInfo) else to_utc(value)


def _shifted(at: datetime, delta: timedelta) -> datetime:
    try:
        return at + delta
    except OverflowError:
        return at


class _OverBudget(Exception):
    def __init__(self, message: str, *, timed: bool = False) -> None:
        super().__init__(message)
        self.timed = timed


class _Steps(threading.local):
    left: int | None = None
    deadline = 0.0


_STEPS = _Steps()
_COUNTING = threading.Lock()


@contextmanager
def _budget() -> Iterator[None]:
    """Count the rule steps of the expansions this thread runs inside. dateutil's `rrule._iter`
    asks its `_iterinfo` for one period's days per step, matching or not, and looks the class up
    when it starts: a subclass counting those calls, installed once, counts the steps (and
    behaves as dateutil's own outside `_budget`)."""
    from dateutil import rrule  # type: ignore[import-untyped]

    with _COUNTING:
        base: Any = rrule._iterinfo  # noqa: SLF001
        if not getattr(base, "counts_steps", False):
            rrule._iterinfo = type("Counting", (base,), {"counts_steps": True, **{  # noqa: SLF001
                name: _counted(getattr(base, name)) for name in ("ydayset", "mdayset", "wdayset", "ddayset")}})
    _STEPS.left, _STEPS.deadline = MAX_FEED_STEPS, time.monotonic() + MAX_EXPANSION_SECONDS
    try:
        yield
    finally:
        _STEPS.left = None


def _counted(method: Callable[..., Any]) -> Callable[..., Any]:
    """One `_iterinfo` serves one walk of one rule from its DTSTART (recurring_ical_events
    keeps each rule's walk and goes on with it), so its count is how far that rule walked."""
    def step_then(self: Any, *args: Any) -> Any:
        walked = self.__dict__["walked"] = self.__dict__.get("walked", 0) + 1
        steps = _STEPS
        if steps.left is not None:
            if walked > MAX_STEPS:
                raise _OverBudget(f"one rule walks more than {MAX_STEPS} steps to expand (a rule that rarely or "
                                  "never matches walks every period to the year 9999): refused")
            steps.left -= 1
            if steps.left < 0:
                raise _OverBudget(f"its rules take more than {MAX_FEED_STEPS} steps in all to expand: refused")
            if not steps.left & 1023 and time.monotonic() > steps.deadline:
                raise _OverBudget(f"expanding it takes more than {MAX_EXPANSION_SECONDS:g}s: refused", timed=True)
        return method(self, *args)
    return step_then


@functools.cache
def _selection() -> Any:
    """The VEVENTs of a calendar, each occurrence its (VEVENT, start, end): the library's default
    copies the whole VEVENT per occurrence (most of an expansion's cost). `ComponentsWithName`
    with an `Occurrence` subclass is the library's own extension point (its test_extend_classes.py)."""
    from recurring_ical_events.occurrence import Occurrence
    from recurring_ical_events.selection.name import ComponentsWithName

    class Found(Occurrence):  # type: ignore[misc]
        def as_component(self, keep_recurrence_attributes: bool) -> tuple[Any, date | datetime, date | datetime]:
            return self._adapter._component, self.start, self.end  # noqa: SLF001 - the VEVENT itself, not a copy

    return ComponentsWithName("VEVENT", occurrence=Found)


@dataclass(eq=False)
class Feed:
    """A calendar's occurrences, expanded per chunk and remembered. Equal feeds have one
    `digest` (`feed_digest`: bytes and settings). A feed of a schedule's row has no `calendar`:
    its `kept` events (every one starting from `since` to `until`, the row's), and `origin`,
    the feed parsed, for any other question."""

    label: str
    calendar: Any
    tz: ZoneInfo
    digest: str
    #: what the occurrences of each VEVENT kept share, by `id`: its UID, the UID as an ident ("" without
    #: one), whether the UID recurs, its RECURRENCE-ID, its SUMMARY (None: cancelled, or filtered out)
    sources: dict[int, tuple[str, str, bool, Any, str] | None] = field(default_factory=dict)
    #: how far before an instant an event covering it may start (at least a day, plus a day)
    longest: timedelta = timedelta(days=1)
    #: the distinct lengths of its events, as written (what `windows list` shows)
    spans: tuple[timedelta, ...] = ()
    kept: tuple[datetime, datetime, list[CalendarEvent]] | None = None
    origin: Callable[[], Feed] | None = None
    _chunks: OrderedDict[int, list[CalendarEvent]] = field(default_factory=OrderedDict)
    _days: dict[tuple[int, str], frozenset[date]] = field(default_factory=dict)
    #: UID -> the zone its DTSTART is written in (issue 38 item 6)
    _zones: dict[str, tzinfo] = field(default_factory=dict)
    _query: Any = None
    #: its expansion's refusal (one line naming the calendar), and until when (monotonic) a read refuses it again
    refused: str | None = None
    retry_at: float = float("inf")
    #: one expansion at a time: a refusal raised inside dateutil's cached iteration leaves that
    #: rule's cache lock held for good, so no thread may be walking the rule beside it, and the
    #: refused query is dropped (a retry builds its rules anew)
    _expanding: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Feed) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def _expand(self, first: datetime, last: datetime) -> list[CalendarEvent]:
        import recurring_ical_events

        with self._expanding:
            if self.refused is not None:
                raise CalendarError(self.refused)
            try:
                if self._query is None:  # collecting the series is most of the cost: once per feed
                    self._query = recurring_ical_events.of(self.calendar, components=[_selection()])
                with _budget():
                    found: list[tuple[Any, date | datetime, date | datetime]] = self._query.between(first, last)
                if len(found) > MAX_FEED_OCCURRENCES:
                    raise _OverBudget(f"expanding it makes more than {MAX_FEED_OCCURRENCES} occurrences: refused")
                out = [e for e in itertools.starmap(self._event, found) if e is not None]
            except _OverBudget as exc:
                self._query = None
                self.refused = str(_refuse(self.label, str(exc)))
                self.retry_at = time.monotonic() + TIME_REFUSAL_KEPT if exc.timed else float("inf")
                raise CalendarError(self.refused) from None
            except CalendarError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a hostile feed: one line
                raise _refuse(self.label, f"cannot expand: {type(exc).__name__}: {exc}") from None
        return sorted(out, key=lambda e: (e.start, e.end, e.ident))

    def _event(self, component: Any, raw_start: date | datetime, raw_end: date | datetime) -> CalendarEvent | None:
        source = self.sources[id(component)]  # the components live in `calendar` as long as the feed
        if source is None:
            return None
        uid, part, recurring, rid, summary = source
        start, end = _instant(raw_start, self.tz), _instant(raw_end, self.tz)
        if end <= start:
            return None  # a moment, not a span: nothing to hold
        if end - start > MAX_DURATION:
            raise _refuse(self.label, f"event {uid[:80] or '?'!r} lasts more than 366 days")
        ident = part or "sha1-" + hashlib.sha1(repr(raw_start).encode(), usedforsecurity=False).hexdigest()[:16]
        if recurring:
            rid = rid if rid is not None else raw_start
            if isinstance(rid, datetime) and rid.tzinfo is not None:
                rid = rid.astimezone(UTC)
            ident = f"{ident}@{rid.isoformat() if isinstance(rid, date) else rid}"
        days = None
        if not isinstance(raw_start, datetime):
            last = raw_end if not isinstance(raw_end, datetime) else raw_start + timedelta(days=1)
            days = (raw_start, max(last, raw_start + timedelta(days=1)))
        return CalendarEvent(start, end, ident, uid, summary, days)

    def zone_of(self, uid: str | None) -> tzinfo:
        return self._zones.get(uid, self.tz) if uid is not None else self.tz

    def events(self, since: datetime, lookahead: timedelta = LOOKAHEAD) -> Iterator[CalendarEvent]:
        """Events starting at or after `since`, in order, up to `lookahead` after it. A chunk not
        remembered is expanded in one query with the following ones not remembered either, two at
        first, then twice as many each time the caller reads on (each query walks every rule from
        its DTSTART, so fewer and longer ones are cheaper)."""
        if self.kept is not None:
            first, until, kept = self.kept
            if since >= first:
                yield from (e for e in kept if since <= e.start < until and e.start <= since + lookahead)
                since, lookahead = max(since, until), since + lookahead - max(since, until)
            if lookahead >= timedelta(0) and self.origin is not None:
                yield from self.origin().events(since, lookahead)
            return
        last = (since + lookahead - EPOCH) // CHUNK
        batch = 1
        for index in range((since - EPOCH) // CHUNK, last + 1):
            found = self._chunks.get(index)
            if found is None:
                batch *= 2
                end = min(index + batch, last + 1, index + 1 + _MAX_CHUNKS // 2)
                stop = next((i for i in range(index + 1, end) if i in self._chunks), end)
                lo, hi = EPOCH + index * CHUNK, EPOCH + stop * CHUNK
                chunks: dict[int, list[CalendarEvent]] = {i: [] for i in range(index, stop)}
                for event in self._expand(_shifted(lo, -_MARGIN), _shifted(hi, _MARGIN)):
                    if lo <= event.start < hi:
                        chunks[(event.start - EPOCH) // CHUNK].append(event)
                self._chunks.update(chunks)
                while len(self._chunks) > _MAX_CHUNKS:
                    self._chunks.popitem(last=False)
                found = chunks[index]
            else:
                self._chunks.move_to_end(index)
            yield from (event for event in found if event.start >= since)

    def between(self, first: datetime, last: datetime) -> list[CalendarEvent]:
        """Events overlapping `[first, last)`, in order."""
        starting = itertools.takewhile(lambda e: e.start < last, self.events(first - self.longest, last - first + self.longest))
        return [event for event in starting if event.end > first]

    def covers_day(self, day: date, tz: ZoneInfo) -> bool:
        """Whether an event covers the local date `day` in `tz` (holidays as exclusions)."""
        days = self._days.get((day.year, tz.key))
        if days is None:
            first = wall_to_instant(datetime(day.year, 1, 1), tz)
            found: set[date] = set()
            for e in self.between(first - timedelta(days=1), first + timedelta(days=367)):  # the year, a day either side
                lo, hi = e.days or (e.start.astimezone(tz).date(), (e.end - _US).astimezone(tz).date() + timedelta(days=1))
                found.update(lo + timedelta(days=n) for n in range((hi - lo).days))
            days = self._days[(day.year, tz.key)] = frozenset(d for d in found if d.year == day.year)
        return day in days


_PARSING = threading.Lock()


def feed_digest(raw: bytes, label: str, timezone_name: str | None, salt: str) -> str:
    """What a feed is: its bytes and what reads them (the label its events are named by, the
    zone of its floating times, the source's filters: `salt`)."""
    content = hashlib.sha256(raw).hexdigest()
    return hashlib.sha256(f"{content}\0{label}\0{salt}\0{timezone_name}".encode("utf-8", "surrogateescape")).hexdigest()


def parse_feed(raw: bytes, label: str, *, timezone_name: str | None = None,
               keep: Callable[[Any], bool] | None = None, now: datetime | None = None,
               salt: str = "") -> Feed:
    """The feed of `raw` (its rules' walks estimated to `now`'s horizon, nothing expanded), or
    `CalendarError` naming `label`. icalendar remembers the VTIMEZONEs it parses process-wide, the first
    definition of a TZID winning for every later calendar (issue 32 item 4): each feed is parsed
    alone, that memory emptied before and after (`use_zoneinfo`, icalendar's public reset)."""
    import icalendar
    import x_wr_timezone

    if len(raw) > MAX_CALENDAR_BYTES:
        raise _refuse(label, f"larger than {MAX_CALENDAR_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _refuse(label, "not UTF-8 text") from None
    _check_shape(text, label)
    started = time.monotonic()
    now = now or datetime.now(UTC)
    reset: Callable[[], object] = icalendar.use_zoneinfo
    try:
        with _PARSING:
            reset()
            try:
                calendar = icalendar.Calendar.from_ical(text)
                if not isinstance(calendar, icalendar.Calendar) or calendar.name != "VCALENDAR":
                    raise _refuse(label, "not a VCALENDAR")
                wr = str(calendar.get("X-WR-TIMEZONE") or "") or None
                calendar = x_wr_timezone.to_standard(calendar)
                events = list(calendar.walk("VEVENT"))
                steps = sum(_check_rule(event, label, now) for event in events)
            finally:
                reset()
        if steps > MAX_FEED_STEPS:
            raise _refuse(label, f"its rules would take about {int(steps)} steps to expand in all (at most "
                                 f"{MAX_FEED_STEPS} a feed: too many rules, or rules this dense or this old)")
        tz = validate_timezone(timezone_name or wr or "UTC")
        recurring = {str(e.get("UID") or "") for e in events
                     if e.get("RRULE") is not None or e.get("RDATE") is not None or e.get("RECURRENCE-ID") is not None}
        sources: dict[int, tuple[str, str, bool, Any, str] | None] = {}
        zones: dict[str, tzinfo] = {}
        lengths: set[timedelta] = set()  # of every event, as written (DTEND or DURATION; a day without either)
        for e in events:
            uid, start, end = str(e.get("UID") or ""), _value(e, "DTSTART"), _value(e, "DTEND")
            if start is not None and end is not None:
                with contextlib.suppress(TypeError, ValueError, OverflowError):
                    lengths.add(_instant(end, tz) - _instant(start, tz))
            elif start is not None:
                duration = _value(e, "DURATION")
                lengths.add(duration if isinstance(duration, timedelta) else timedelta(days=1))
            if str(e.get("STATUS", "")).upper() == "CANCELLED" or (keep is not None and not keep(e)):
                sources[id(e)] = None
                continue
            part = uid if not uid or _UID_RE.fullmatch(uid) else "sha1-" + hashlib.sha1(
                uid.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[:16]
            sources[id(e)] = (uid, part, uid in recurring, _value(e, "RECURRENCE-ID"),
                              clean_reason(str(e.get("SUMMARY") or "")) or f"calendar {label}")
            if isinstance(start, datetime) and start.tzinfo is not None:
                zones.setdefault(uid, start.tzinfo)
    except CalendarError:
        raise
    except EstopError as exc:
        raise _refuse(label, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a hostile feed fails any way it likes: one line
        raise _refuse(label, f"cannot parse: {type(exc).__name__}: {exc}") from None
    spans = tuple(sorted(span for span in lengths if span > timedelta(0)))
    longest = max((min(span, MAX_DURATION) for span in spans), default=timedelta(days=1))
    if time.monotonic() - started > 30:
        raise _refuse(label, "took more than 30 s to parse")
    return Feed(label, calendar, tz, feed_digest(raw, label, timezone_name, salt), sources,
                max(longest, timedelta(days=1)) + timedelta(days=1), spans, _zones=zones)
