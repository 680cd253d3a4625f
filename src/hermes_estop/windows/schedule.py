"""One immutable compiled schedule per version of a windows file and its feeds (issues 35, 45).

Why: every windows command, `check --at`, `status` and the daemon need each window's fields and
its occurrences near the present; validating 100,000 tables and asking croniter for their starts
takes seconds, so it is done once per version and kept as plain columns: a row per window in file
order (a `[[calendars]]` table is a row whose occurrences are its feed's events, `events`), and
each row's occurrences over the horizon `[lo, hi)` (microseconds since the epoch: exact), flat,
sliced by `offsets`, then its first start at or past `hi`, so the next start after any instant
of the horizon is known. A query bisects and gives the answer of `occurrences`' exact functions
(the oracle tests compare the two), or says it cannot tell: outside the horizon, or past the
last start of a row cut at `MAX_PER_ROW` or by a run of excluded starts (`stopped`). Croniter
stays the only cron arithmetic.

It is kept beside the windows file (`.<name>.schedule`, else in the per-user cache:
`kept_files.kept_path`), sealed, and read only under `kept_files`' ownership rule; it is never
an authority: one not of these bytes, their feeds, this code and this zone data is built again.
"""

from __future__ import annotations

import copy
import functools
import gc
import hashlib
import hmac
import itertools
import json
import logging
import re
import sys
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import cache, partial
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple, overload
from zoneinfo import ZoneInfo

from tomli import TOMLDecodeError, loads as toml_loads

from hermes_estop.model.cronspec import fires, probe_deferred, starts as cron_starts, validate_timezone
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.selector import Selector
from hermes_estop.model.text import did_you_mean, printable
from hermes_estop.model.timeutil import display_instant, parse_instant, to_utc
from hermes_estop.system.fsread import read_snapshot
from hermes_estop.windows import kept_files
from hermes_estop.windows.calendars import CalendarSource, bind, calendar_window, fingerprint
from hermes_estop.windows.ical import CalendarEvent, Feed
from hermes_estop.windows.kept_files import HORIZON
from hermes_estop.windows.model import InvalidWindow, Occurrence, Window, validate_scope
from hermes_estop.windows.occurrences import covering, following, merge_armed, next_armed, occurrences, refusal
from hermes_estop.windows.windows_file import MAX_WINDOWS_BYTES, WindowsFile

__all__ = ["HORIZON", "MAX_PER_ROW", "REFRESH", "Event", "Row", "Schedule", "Part", "ScheduleTimeline",
           "Schedules", "Windows", "build", "instant_of", "load", "micros", "schedule_of"]

log = logging.getLogger(__name__)

_FORMAT = 6
#: how often `hermes serve` builds the schedule of an unchanged file again (so that the horizon
#: an operator's command finds is always at least half of `HORIZON` ahead)
REFRESH = HORIZON / 4
#: occurrences kept per row in the horizon (a minutely window's week is 10,080)
MAX_PER_ROW = 12_000
#: the columns with one value per row, and the type of their values
_PER_ROW: dict[str, type | tuple[type, ...]] = {
    "names": str, "scopes": str, "enabled": bool, "timezones": str, "schedules": str, "durations": str,
    "drains": (str, type(None)), "leads": int, "sources": str}
#: the columns, one line each, in this order (`tables` last: a line per row, decoded only when a
#: command prints the row)
_COLUMNS = (*_PER_ROW, "offsets", "starts", "ends", "calendars", "tables")
#: the columns of many equal values: one string object for them all
_SHARED = ("scopes", "timezones", "durations", "drains")
_US = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: a calendar event's occurrence: its id (UID and RECURRENCE-ID), UID, SUMMARY and zone ("": the calendar's)
Event = tuple[str, str, str, str]
_DAMAGED = ("the windows schedule's tables are damaged (delete the .schedule file beside windows.toml: the next "
            "command builds it again)")


def micros(when: datetime) -> int:
    """`when` as whole microseconds since the epoch (exact, unlike a float timestamp)."""
    return (to_utc(when) - _EPOCH) // _US


def instant_of(count: int) -> datetime:
    return _EPOCH + timedelta(microseconds=count)


@dataclass(frozen=True, slots=True, eq=False)
class Schedule:
    """The compiled schedule of one version of a windows file (see the module docstring)."""

    digest: str
    zones: Sequence[str]
    lo: int
    hi: int
    names: Sequence[str]
    scopes: Sequence[str]
    enabled: Sequence[bool]
    timezones: Sequence[str]
    schedules: Sequence[str]
    durations: Sequence[str]
    drains: Sequence[str | None]
    leads: Sequence[int]
    sources: Sequence[str]
    offsets: Sequence[int]
    starts: Sequence[int]
    ends: Sequence[int]
    #: each row's `Window.to_json_bytes()`, decoded only when a command prints the row (`shown`)
    tables: Sequence[bytes]
    #: occurrence (its index in `starts`) -> its calendar event
    events: Mapping[int, Event] = field(default_factory=dict)
    #: a calendar's row -> JSON of its table and its feed's digest, look-back and lengths (`_calendar`)
    calendars: Mapping[int, str] = field(default_factory=dict)
    #: each feed a row is of -> `calendars.fingerprint` when read; None: not known (never kept)
    feeds: Mapping[str, str] | None = field(default_factory=dict)
    #: the windows file, to bind a row to its feed again (`window`)
    windows_path: Path | None = None
    #: the rows whose scan a run of more than `MAX_EXCLUDED_RUN` excluded starts ended: they may
    #: go on past their last start, so a query past it declines (issue 45)
    stopped: frozenset[int] = frozenset()
    _rows_by_name: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rows_by_name", dict(zip(self.names, range(len(self.names)), strict=True)))

    def __len__(self) -> int:
        return len(self.names)

    def row_of(self, name: str) -> int | None:
        return self._rows_by_name.get(name)

    def row_compiled_from(self, window: Window) -> int | None:
        """The row of `window`'s name when its table is `window`'s (not another version of it)."""
        row = self.row_of(window.name)
        return row if row is not None and self.tables[row] == window.to_json_bytes() else None

    def window(self, row: int) -> Window:
        """Bound to its feed as it is now (raising what `WindowsFile.parse` raises when it cannot
        be read); `StoreError` when the table is not the row's valid window."""
        try:
            window = self._calendar(row) if row in self.calendars else Window.parse(self.shown(row))
        except (InvalidWindow, ValueError, KeyError, TypeError):
            raise StoreError(_DAMAGED) from None
        if window.exclude_calendar is not None:
            window = _bound(self.windows_path, window)
        if window.name != self.names[row] or window.scope != self.scopes[row]:
            raise StoreError(_DAMAGED)
        return window

    def shown(self, row: int) -> dict[str, Any]:
        try:
            shown = json.loads(self.tables[row])
        except ValueError:
            shown = None
        if not isinstance(shown, dict):
            raise StoreError(_DAMAGED)
        return shown

    def _calendar(self, row: int) -> Window:
        """The row's events as far as it keeps them, then its feed's as it is now (read only if asked)."""
        kept = json.loads(self.calendars[row])
        source = CalendarSource.parse(kept["source"], path=self.windows_path)
        lo, hi = self.offsets[row], self.offsets[row + 1]
        events = [CalendarEvent(instant_of(self.starts[i]), instant_of(self.ends[i]), *self.events[i][:3])
                  for i in range(lo, hi)]
        until = self.starts[hi - 1] + 1 if self._goes_on(row) else self.hi
        feed = Feed(repr(source.name), None, validate_timezone(self.timezones[row]), kept["digest"],
                    longest=timedelta(seconds=kept["longest"]), spans=tuple(timedelta(seconds=s) for s in kept["spans"]),
                    kept=(instant_of(self.lo) - timedelta(seconds=kept["longest"]), instant_of(until), events),
                    origin=cache(lambda: _bound(self.windows_path, source).feed),  # type: ignore[arg-type]
                    _zones={e[1]: validate_timezone(e[3]) for e in map(self.events.get, range(lo, hi)) if e and e[3]})
        return calendar_window(source, feed)

    def item_named(self, name: str, windows_path: Path) -> int:
        row = self.row_of(name)
        if row is None:
            raise InvalidArgument(f"no window named {name!r} in {printable(windows_path)}: "
                                  f"{did_you_mean(name, self.names)}`hermes windows list` lists them")
        return row

    def answers(self, t: datetime) -> bool:
        return self.lo <= micros(t) < self.hi

    def occurrence(self, row: int, index: int) -> Occurrence:
        event = self.events.get(index) if self.events else None
        return Occurrence(instant_of(self.starts[index]), instant_of(self.ends[index]), self.names[row], self.scopes[row],
                          timedelta(microseconds=self.leads[row]), *(event[:3] if event else ()))

    def row(self, row: int) -> Row:
        zones = {e[1]: e[3] for e in map(self.events.get, range(self.offsets[row], self.offsets[row + 1]))
                 if e and e[3]} if row in self.calendars else None
        return Row(self.names[row], self.scopes[row], self.enabled[row], self.timezones[row], self.schedules[row],
                   self.durations[row], self.drains[row], zones)

    def upcoming(self, row: int, now: datetime, count: int) -> list[Occurrence] | None:
        """None outside the horizon or past what the row keeps."""
        if not self.answers(now):
            return None
        found = list(itertools.islice(self._live(row, micros(now)), count))
        if len(found) < count and self._goes_on(row):
            return None
        return [self.occurrence(row, i) for i in found]

    def _live(self, row: int, at: int, until: int | None = None) -> Iterator[int]:
        """Up to the last starting at or before `until`. A calendar's events may overlap (ends not
        ascending): each is asked."""
        lo, hi = self.offsets[row], self.offsets[row + 1]
        if until is not None:
            hi = bisect_right(self.starts, until, lo, hi)
        if row in self.calendars:
            return (i for i in range(lo, hi) if self.ends[i] > at)
        return iter(range(bisect_right(self.ends, at, lo, hi), hi))

    def covering_row(self, row: int, t: datetime) -> tuple[Occurrence, ...] | None:
        """None when `t`, or `t` plus the drain lead, is outside the horizon (one starting past it
        may be armed at `t`: issue 45)."""
        at = micros(t)
        armed_by = at + self.leads[row]
        if at < self.lo or armed_by >= self.hi:
            return None
        return tuple(self.occurrence(row, i) for i in self._live(row, at, armed_by))

    def next_start(self, row: int, after: datetime) -> Occurrence | bool | None:
        """None when it has none; False when the schedule cannot tell (ask the exact functions)."""
        if not self.answers(after):
            return False
        lo, hi = self.offsets[row], self.offsets[row + 1]
        index = bisect_right(self.starts, micros(after), lo, hi)
        if index < hi:
            return self.occurrence(row, index)
        return False if self._goes_on(row) else None

    def not_ended(self, row: int, t: datetime) -> Iterator[Occurrence]:
        """The schedule's as far as it keeps the row, the exact functions' past that."""
        last = None
        if self.answers(t):
            for last in self._live(row, micros(t)):
                yield self.occurrence(row, last)
            if not self._goes_on(row):
                return
        window = self.window(row)
        since = instant_of(self.starts[self.offsets[row + 1] - 1] + 1) if last is not None else t - window.duration
        yield from (o for o in occurrences(window, since) if not o.ended(t))

    def next_arm_index(self, row: int, now: datetime) -> int | None:
        """No `Occurrence` made: `status` asks every row (None: ask `unkept_arm`)."""
        if not self.answers(now):
            return None
        hi = self.offsets[row + 1]
        index = bisect_right(self.starts, micros(now) + self.leads[row], self.offsets[row], hi)
        return index if index < hi else None

    def unkept_arm(self, row: int, now: datetime) -> datetime | None:
        """The earliest an occurrence the schedule does not keep can arm; None when it keeps every
        one: the caller then builds no `Window` and asks no croniter."""
        if not self.answers(now):
            return now
        return instant_of(self.hi - self.leads[row]) if self._goes_on(row) else None

    def _goes_on(self, row: int) -> bool:
        lo, hi = self.offsets[row], self.offsets[row + 1]
        return (hi > lo and self.starts[hi - 1] >= self.hi) or row in self.stopped


@dataclass(frozen=True, slots=True)
class Row:
    """One window as `windows next` and `status` show it, besides its occurrences."""

    name: str
    scope: str
    enabled: bool
    timezone: str
    schedule: str
    duration: str
    drain: str | None
    #: a calendar's: UID -> the zone its events are shown in
    zones: Mapping[str, str] | None = None

    def zone_of(self, occurrence: Occurrence) -> tzinfo:
        zone = self.zones.get(occurrence.uid or "") if self.zones else None
        return validate_timezone(zone or self.timezone)

    def describe_schedule(self) -> str:
        """Local, to the second (the column keeps it exact, UTC)."""
        if self.schedule.startswith("at "):
            return f"at {display_instant(parse_instant(self.schedule[3:], what='at time'))}"
        return self.schedule


def schedule_of(windows_file: WindowsFile, now: datetime) -> Schedule:
    """The one value every command reads the windows from. Raises what `WindowsFile.parse`
    raises when it must be built from a file that does not validate."""
    snapshot = read_snapshot(windows_file.path, MAX_WINDOWS_BYTES)
    if snapshot.identity is None:  # no file: no windows
        found = build(hashlib.sha256(b"").hexdigest(), [], now)
    else:
        found = load(windows_file.path, snapshot.raw, partial(windows_file.parse, snapshot.raw), now)
    if found is None:  # a file that validates has one (no two rows share a name)
        raise StoreError(f"{printable(windows_file.path)}: no schedule can be compiled of it")
    return found


def _bound(windows_path: Path | None, table: Window | CalendarSource) -> Window:
    """`table` bound to the feed it reads as it is now; raises the first failure (`bind`'s)."""
    if windows_path is None:
        raise StoreError(_DAMAGED)
    found = bind(windows_path.parent, windows_path, *(([], [table]) if isinstance(table, CalendarSource) else ([table], [])))
    if found.failures:
        raise found.failures[0]
    return found.windows[0]


def _fed_as_now(found: Schedule, windows_path: Path) -> bool:
    """The local file, the last good copy, the last fetch's error: `calendars.fingerprint`."""
    return found.feeds is not None and all(
        fingerprint(windows_path.parent, at) == was for at, was in found.feeds.items())


#: a line that opens a `[[windows]]` or a `[[calendars]]` table (where `_validations` cuts the file)
_TABLE_HEADER = re.compile(rb"^[ \t]*\[\[[ \t]*(?:windows|calendars)[ \t]*\]\][ \t]*(?:#[^\n]*)?$", re.MULTILINE)
_BOM = b"\xef\xbb\xbf"
#: tables parsed at once (one parse per table costs a third more than one per file)
_BATCH = 200
#: the expressions whose starts a compile keeps for the next window of the same, and the starts
#: they may hold in all (about 10 MB; a minutely expression's week is 10,080)
_KEPT_EXPRESSIONS, _KEPT_STARTS = 256, 50_000


class _NotSimple(Exception):
    """Not a file of `[[windows]]` and `[[calendars]]` tables only: the whole validation says why."""


class _Builder:
    """No `Window` kept once its row is in."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self.columns: dict[str, Any] = {name: [] for name in _COLUMNS if name not in ("tables", "calendars")}
        self.columns["offsets"].append(0)
        self.tables: list[bytes] = []
        self.zones: set[str] = set()
        self.stopped: set[int] = set()
        self.events: dict[int, Event] = {}
        self.calendars: dict[int, str] = {}
        #: an expression's starts in a zone from an instant, kept as they are read (`_KEPT_EXPRESSIONS`):
        #: the windows of one expression ask croniter once, which is most of a compile
        self._starts: dict[tuple[str, ZoneInfo, datetime], Iterator[datetime]] = {}
        self._held = 0

    def _shared_starts(self, expr: str, tz: ZoneInfo, since: datetime) -> Iterator[datetime]:
        key = (expr, tz, since)
        found = self._starts.get(key)
        if found is None:
            found = cron_starts(expr, tz, since)
            if len(self._starts) >= _KEPT_EXPRESSIONS or self._held > _KEPT_STARTS:
                return found
            found = self._starts[key] = itertools.tee(self._counted(found), 1)[0]
        return copy.copy(found)  # from the first start: the one kept is never read

    def _counted(self, starts: Iterator[datetime]) -> Iterator[datetime]:
        """Past `_KEPT_STARTS` held, none is kept: every window asks croniter."""
        for start in starts:
            self._held += 1
            if self._held > _KEPT_STARTS:
                self._starts.clear()
            yield start

    def add_window(self, window: Window, source: str) -> bool:
        """False when one of its expressions never fires (validated under `probe_deferred`: only a
        row without a start can be such)."""
        starts, ends = self.columns["starts"], self.columns["ends"]
        feed = window.feed
        first = len(starts)
        stopped: list[datetime] = []
        beyond: int | None = None  # a calendar's first start past the horizon: its every event there kept
        for occurrence in occurrences(window, instant_of(self.lo) - window.duration, stopped, self._shared_starts):
            start, end = micros(occurrence.start), micros(occurrence.end)
            if end <= self.lo and feed is None:  # a calendar's kept from `lo - duration`: its window's feed
                continue
            if beyond is not None and start > beyond:
                break
            if len(starts) - first >= MAX_PER_ROW:
                self.hi = min(self.hi, starts[-1])
                break
            if occurrence.event is not None and feed is not None:
                zone = feed.zone_of(occurrence.uid)
                self.events[len(starts)] = (occurrence.event, occurrence.uid or "", occurrence.reason or "",
                                            getattr(zone, "key", ""))
                self.zones.add(getattr(zone, "key", window.timezone))
            starts.append(start)
            ends.append(end)
            if start >= self.hi:
                if feed is None:
                    break
                beyond = start
        if stopped:  # a run of excluded starts ended the scan: nothing is known past it
            self.hi = max(self.lo + 1, min(self.hi, micros(stopped[0])))
            self.stopped.add(len(self.tables))
        if window.cron is not None or feed is not None:
            self.zones.add(window.timezone)
        if window.cron is not None and not (len(starts) > first or stopped or fires(window.cron)):
            return False
        if window.exclude_cron is not None and not fires(window.exclude_cron):
            return False
        if feed is not None:
            self.calendars[len(self.tables)] = json.dumps({
                "source": window.to_toml(), "digest": feed.digest, "longest": feed.longest.total_seconds(),
                "spans": [span.total_seconds() for span in feed.spans]})
        self.add_row(window, source)
        return True

    def add_row(self, window: Window, source: str) -> None:
        """Without occurrences when its feed was refused: it has none to tell (the pass holds its
        scopes as they were: `WindowService._held_as_was`)."""
        drain = window.drain
        self._add((window.name, window.scope, window.enabled, window.timezone, window.describe_schedule(for_json=True),
                   window.describe_duration(), None if drain is None else format_duration(drain),
                   (drain or timedelta(0)) // _US, source), window.to_json_bytes())

    def add_kept(self, previous: Schedule, row: int, source: str) -> None:
        """As it is (same code, zone data and horizon)."""
        lo, hi = previous.offsets[row], previous.offsets[row + 1]
        if row in previous.stopped:
            self.stopped.add(len(self.tables))
        if row in previous.calendars:
            self.calendars[len(self.tables)] = previous.calendars[row]
        shift = len(self.columns["starts"]) - lo
        self.events.update((index + shift, previous.events[index]) for index in range(lo, hi) if index in previous.events)
        self.columns["starts"].extend(previous.starts[lo:hi])
        self.columns["ends"].extend(previous.ends[lo:hi])
        self._add([*(getattr(previous, name)[row] for name in _PER_ROW if name != "sources"), source], previous.tables[row])

    def _add(self, values: Sequence[Any], table: bytes) -> None:
        """`values`: one of each `_PER_ROW` column, in order."""
        for name, value in zip(_PER_ROW, values, strict=True):
            self.columns[name].append(value)
        self.columns["offsets"].append(len(self.columns["starts"]))
        self.tables.append(table)

    def schedule(self, digest: str, feeds: Mapping[str, str] | None, windows_path: Path | None = None) -> Schedule | None:
        """None when two rows share a name (the whole validation refuses it). `feeds`: those the
        rows read, as fingerprinted (None: not all, never kept)."""
        self._starts.clear()  # its enumerations refer to this builder: a cycle only a later collection would free
        if len(set(self.columns["names"])) != len(self.columns["names"]):
            return None
        return Schedule(digest, sorted(self.zones), self.lo, self.hi, **{name: self.columns[name] for name in _COLUMNS[:-2]},
                        tables=self.tables, events=self.events, calendars=self.calendars, feeds=feeds,
                        windows_path=windows_path, stopped=frozenset(self.stopped))


def _horizon(now: datetime) -> tuple[int, int]:
    lo = micros(now)
    return lo, lo + HORIZON // _US


def build(digest: str, windows: Sequence[Window], now: datetime, windows_path: Path | None = None) -> Schedule | None:
    """Of windows validated whole (a file not cut table by table): no row of a table a later
    compile takes rows by; one of a feed's rows not fingerprinted (read before), never kept."""
    builder = _Builder(*_horizon(now))
    for window in windows:
        builder.add_window(window, "")
    fed = any(window.feed is not None or window.exclude_calendar is not None for window in windows)
    return builder.schedule(digest, None if fed else {}, windows_path)


def _compiled(digest: str, raw: bytes, windows_path: Path, now: datetime, kept: list[Schedule] | None = None,
              validated: Sequence[Window] | None = None) -> Schedule | None:
    """One `Window` held at once; with the schedule `kept` before an edit (taken out of the list,
    so that it is let go once a batch of tables reuses none of its rows: a rewrite), an unchanged
    table's row taken from it as it is; with the file's windows `validated`, a table that reads no
    feed is its window there, not validated again (one that reads a feed is, bound to the feed as
    fingerprinted). None when the file is not that simple (a table that does not validate or never
    fires, a feed that cannot be read, a repeated name)."""
    previous = kept.pop() if kept else None
    known = {source: row for row, source in enumerate(previous.sources) if source} if previous is not None else {}
    builder = _Builder(previous.lo, previous.hi) if previous is not None else _Builder(*_horizon(now))
    builder.zones.update(previous.zones if previous is not None else ())
    feeds: dict[str, str] = {}
    reused = 0
    paused = gc.isenabled()
    gc.disable()  # every row built survives: a collection would only walk them again
    try:
        with probe_deferred():
            for n, (source, validate) in enumerate(_validations(raw, windows_path, feeds, validated)):
                if previous is not None and source in known:
                    builder.add_kept(previous, known[source], source)
                    reused += 1
                    continue
                if n >= _BATCH and not reused:
                    previous, known = None, {}
                valid = validate()
                if isinstance(valid, CalendarSource) or valid.exclude_calendar is not None:
                    valid = _bound(windows_path, valid)
                if not builder.add_window(valid, source):
                    return None
    except (_NotSimple, InvalidWindow):
        return None
    finally:
        if paused:
            gc.enable()
    return builder.schedule(digest, feeds, windows_path)


def _validations(raw: bytes, windows_path: Path, feeds: dict[str, str], validated: Sequence[Window] | None = None,
                 ) -> Iterator[tuple[str, Callable[[], Window | CalendarSource]]]:
    """Each table of `raw` in the validated file's order (the windows', then the calendars'): what
    it is of (`_source`) and its validation (a `[[windows]]` table's that reads no feed: its window
    in `validated`, if given); `_NotSimple` when `raw` holds anything else. Parsed `_BATCH` tables
    at a time (100,000 tables are never held parsed, nor the file as text): a cut inside a
    multi-line string leaves a part that does not parse, a key before the first table or a
    sub-table of an array its part does not start is refused, so a file is cut only where each
    part parses as in the whole."""
    start = len(_BOM) if raw.startswith(_BOM) else 0
    cut, headers, index = start, 0, 0
    calendars: list[dict[str, Any]] = []
    for at in itertools.chain((header.start() for header in _TABLE_HEADER.finditer(raw, start)), [len(raw)]):
        if at > cut and (headers == 0 or headers >= _BATCH or at == len(raw)):
            chunk, cut, headers = raw[cut:at], at, 0
            try:
                data = toml_loads(chunk.decode("utf-8"))
            except (UnicodeDecodeError, TOMLDecodeError):
                raise _NotSimple from None
            if set(data) - {"windows", "calendars"} or (data and not _TABLE_HEADER.match(chunk)) or not all(
                    isinstance(tables, list) and all(isinstance(t, dict) for t in tables) for tables in data.values()):
                raise _NotSimple
            for table in data.get("windows", ()):
                location = table.get("exclude_calendar")
                yield _source(table, location, windows_path, feeds), (
                    partial(Window.parse, table, path=windows_path, index=index)
                    if validated is None or location is not None else partial(itemgetter(index), validated))
                index += 1
            calendars += data.get("calendars", ())
        headers += 1
    for index, table in enumerate(calendars):
        yield (_source(table, table.get("url") or table.get("ics"), windows_path, feeds),
               partial(CalendarSource.parse, table, path=windows_path, index=index))


def _source(table: dict[str, Any], location: object, windows_path: Path, feeds: dict[str, str]) -> str:
    """A table as written, by value, type and order (a TOML datetime is not the string that spells
    it: the `repr` of what TOML parses to says all three, in half the time of JSON), and the
    fingerprint of the feed at `location` when it reads one (noted in `feeds`)."""
    source = hashlib.sha256(repr(table).encode("utf-8", "surrogateescape")).hexdigest()
    if not isinstance(location, str):
        return source
    found = feeds[location] = feeds.get(location) or fingerprint(windows_path.parent, location)
    return hashlib.sha256(f"{source}\0{location}\0{found}".encode("utf-8", "surrogateescape")).hexdigest()


def dumps(schedule: Schedule, key: bytes) -> bytearray:
    """A header line, one JSON line per column, then one line per row's table, in one buffer
    (100,000 windows' tables are tens of MB: never held twice); the header carries the seal of
    the rest under `key`."""
    header = {"format": _FORMAT, "digest": schedule.digest, "basis": kept_files.basis(schedule.zones),
              "zones": list(schedule.zones), "lo": schedule.lo, "hi": schedule.hi, "count": len(schedule),
              "stopped": sorted(schedule.stopped)}
    body = bytearray()
    for name in _COLUMNS[:-2]:
        body += _compact(getattr(schedule, name)) + b"\n"
    body += _compact({"events": [[index, *event] for index, event in schedule.events.items()],
                      "calendars": [[row, table] for row, table in schedule.calendars.items()],
                      "feeds": sorted((schedule.feeds or {}).items())}) + b"\n"
    for table in schedule.tables:
        body += table + b"\n"
    del body[-1:]
    header["seal"] = kept_files.seal(key, _sealed_header(header), body)
    body[:0] = _compact(header) + b"\n"
    return body


def _sealed_header(header: dict[str, Any]) -> bytes:
    return _compact({k: v for k, v in header.items() if k != "seal"}, sort_keys=True)


def _compact(value: Any, *, sort_keys: bool = False) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys).encode("utf-8")


def loads(sealed: bytes, key: bytes, windows_path: Path | None = None) -> Schedule | None:
    """None when not computed by this code with today's zone data; `ValueError` (or `TypeError`,
    `KeyError`) for a damaged one or a seal that does not hold (edited, copied from elsewhere)."""
    data = sealed.split(b"\n")
    header = json.loads(data[0] or b"null")
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        return None
    body = memoryview(sealed)[len(data[0]) + 1:]
    if not isinstance(header.get("seal"), str) or not hmac.compare_digest(
            header["seal"], kept_files.seal(key, _sealed_header(header), body)):
        raise ValueError("its seal is not this directory's over its content (not built here for these bytes)")
    zones = header["zones"]
    if type(zones) is not list or not all(type(z) is str for z in zones):
        raise ValueError("zones is not a list of names")
    if header.get("basis") != kept_files.basis(zones) or type(header.get("digest")) is not str:
        return None
    count = header["count"]
    if type(count) is not int or len(data) != len(_COLUMNS) + count:
        raise ValueError("wrong number of lines")
    columns = {name: json.loads(line or b"null") for name, line in zip(_COLUMNS[:-1], data[1:], strict=False)}
    # what a schedule holds is never taken on trust (an occurrence carries its scope): every column
    # of its length and types, and the occurrences whole numbers ascending per row (a calendar's
    # starts: not descending)
    lo, hi = header["lo"], header["hi"]
    offsets, starts, ends = columns["offsets"], columns["starts"], columns["ends"]
    for name, kind in _PER_ROW.items():
        if type(columns[name]) is not list or len(columns[name]) != count:
            raise ValueError("columns of the wrong lengths")
        if not all(isinstance(v, kind) and (kind is not int or type(v) is int) for v in columns[name]):
            raise ValueError(f"a value of {name} of the wrong type")
    for scope in set(columns["scopes"]):
        validate_scope(scope)
    if type(offsets) is not list or type(starts) is not list or type(ends) is not list \
            or len(offsets) != count + 1 or len(ends) != len(starts) or offsets[0] != 0 or offsets[-1] != len(starts):
        raise ValueError("occurrences of the wrong lengths")
    if not all(type(v) is int for v in itertools.chain(starts, ends, offsets, (lo, hi))):
        raise ValueError("a start, an end or an offset is not an integer")
    events, calendars, feeds = (columns["calendars"][name] for name in ("events", "calendars", "feeds"))
    if not all(type(e) is list and len(e) == 5 and type(e[0]) is int and 0 <= e[0] < len(starts)
               and all(type(v) is str for v in e[1:]) for e in events):
        raise ValueError("events is not a list of calendar events")
    if not all(type(c) is list and len(c) == 2 and type(c[0]) is int and 0 <= c[0] < count and type(c[1]) is str
               for c in calendars) or not all(type(f) is list and len(f) == 2 and all(type(v) is str for v in f) for f in feeds):
        raise ValueError("calendars or feeds of the wrong types")
    events, calendars, feeds = {e[0]: (e[1], e[2], e[3], e[4]) for e in events}, dict(calendars), dict(feeds)
    if any(a > b for a, b in itertools.pairwise(offsets)) or any(
            starts[i] > starts[i + 1] if row in calendars else starts[i] >= starts[i + 1] or ends[i] > ends[i + 1]
            for row, (a, b) in enumerate(itertools.pairwise(offsets)) for i in range(a, b - 1)):
        raise ValueError("starts (or ends) not ascending per row")
    stopped = header.get("stopped", [])
    if type(stopped) is not list or not all(type(row) is int and 0 <= row < count for row in stopped):
        raise ValueError("stopped is not a list of rows")
    for name in _SHARED:
        columns[name] = [sys.intern(v) if v is not None else None for v in columns[name]]
    return Schedule(header["digest"], zones, lo, hi,
                    **{name: columns[name] for name in _COLUMNS[:-2]}, tables=data[len(_COLUMNS):],
                    events=events, calendars=calendars, feeds=feeds, windows_path=windows_path,
                    stopped=frozenset(stopped))


def load(windows_path: Path, raw: bytes, windows: Sequence[Window] | Callable[[], Sequence[Window]] | None,
         now: datetime, fresh_for: timedelta = HORIZON) -> Schedule | None:
    """The one kept when built less than `fresh_for` ago; else compiled table by table (the rows
    of unchanged tables and feeds taken from the one kept while it has half its horizon, the
    others from `windows` when it is the caller's validated list); else, a file not cut table by
    table, built of `windows` (a function is called only then: it validates the file whole);
    None when two rows share a name, or `windows` is None and the file does not compile table by
    table (the pass validates it whole). Kept."""
    path = kept_files.kept_path(windows_path, ".schedule")
    digest = hashlib.sha256(raw).hexdigest()
    found = _kept(path, windows_path) if path is not None else None
    if found is not None and found.digest == digest and found.answers(now) and micros(now) < found.lo + fresh_for // _US \
            and _fed_as_now(found, windows_path):
        return found
    kept = [found] if found is not None and found.answers(now) and micros(now) < found.lo + HORIZON // _US // 2 and (
        found.digest != digest or micros(now) < found.lo + fresh_for // _US) else []
    del found  # `_compiled` holds it alone: let go once its rows are taken, not held while another is written
    built = _compiled(digest, raw, windows_path, now, kept, None if windows is None or callable(windows) else windows)
    if built is None and windows is not None:
        built = build(digest, windows() if callable(windows) else windows, now, windows_path)
    if built is not None and built.feeds is not None and path is not None:
        key = kept_files.seal_key(path.parent, create=True)
        if key is not None:  # an unsealed schedule would never be read: not written
            kept_files.write_trusted(path, dumps(built, key))
    return built


def _kept(path: Path, windows_path: Path) -> Schedule | None:
    """Only when sealed with its directory's key (one line when it is damaged or its seal does not hold)."""
    data = kept_files.trusted_bytes(path)
    key = kept_files.seal_key(path.parent, create=False) if data else None
    if key is None:
        return None
    try:
        return loads(data, key, windows_path)
    except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
        log.warning("windows schedule %s ignored and built again: %s", printable(path), printable(str(exc)))
        return None


#: the rows' `Window`s a timeline keeps built at most (the oldest built dropped first)
WINDOWS_KEPT = 1024
#: a row holding longer than a day (microseconds), drain lead included, is asked on its own by
#: `covering_now`, so the stretch of the arm order it looks back over stays short
_LONG = 86_400_000_000


class ScheduleTimeline:
    """Where a pass looks occurrences up, read off `schedule` by bisection (no cron
    arithmetic: a held chain is walked afresh every pass), the exact functions where it does
    not answer (outside its horizon, a window that is not a row: another version of a row's, by
    its table)."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        # every occurrence (its index in `starts`) in arm order, and its arm instant: 16 bytes each
        offsets, leads = schedule.offsets, schedule.leads
        arm = array("q", (start - leads[row] for row in range(len(schedule))
                          for start in schedule.starts[offsets[row]:offsets[row + 1]]))
        self._armed = array("q", sorted(range(len(arm)), key=arm.__getitem__))
        self._arms = array("q", (arm[i] for i in self._armed))
        #: every arm before this instant is in `_arms` (its start lies before the horizon's end)
        self._whole_until = schedule.hi - max(leads, default=0)
        spans = [max(map(int.__sub__, schedule.ends[offsets[row]:offsets[row + 1]],
                         schedule.starts[offsets[row]:offsets[row + 1]]), default=0) + leads[row]
                 for row in range(len(schedule))]
        self._long = {row for row, span in enumerate(spans) if span > _LONG}
        #: the longest any other row holds: what covers an instant was armed less than this before it
        self._span = max((span for span in spans if span <= _LONG), default=0)
        # the window tasks' thread shares the scheduler's timeline (`TaskService.schedules`)
        self._built: dict[int, Window] = {}
        self._building = threading.Lock()

    @functools.cached_property
    def windows(self) -> Windows:
        return Windows(self)

    def window(self, row: int) -> Window:
        """Kept built: a running daemon asks for the same rows pass after pass."""
        window = self._built.get(row)
        if window is None:
            window = self.schedule.window(row)
            with self._building:
                if len(self._built) >= WINDOWS_KEPT:
                    del self._built[next(iter(self._built))]
                window = self._built.setdefault(row, window)
        return window

    def _row(self, window: Window) -> int | None:
        """The row `window` is: the one built of it, or of an equal table (not another version of
        a window of that name: one an edit moves to another scope)."""
        row = self.schedule.row_of(window.name)
        return row if row is not None and self._built.get(row) is window else self.schedule.row_compiled_from(window)

    def seed(self, built: Mapping[int, Window]) -> None:
        """The `Window`s some rows were compiled from, so that asking for those rows validates none
        again (a calendar's: bound to its feed as it read, never read again)."""
        with self._building:
            self._built.update(itertools.islice(built.items(), WINDOWS_KEPT))

    def built(self, row: int) -> Window | None:
        return self._built.get(row)

    def whole(self, at: int) -> bool:
        """Whether every occurrence armed by `at` and every row's first arm after it are held."""
        return self.schedule.lo <= at < self._whole_until

    def covering(self, window: Window, now: datetime) -> tuple[Occurrence, ...]:
        row = self._row(window)
        found = self.schedule.covering_row(row, now) if row is not None else None
        return tuple(covering(window, now)) if found is None else found

    def armed_after(self, listed: Windows, now: datetime) -> Iterator[Occurrence]:
        """Read off the arm order (a chain of 256 among 10,000 windows costs its 256 occurrences);
        past the part of the horizon held whole, as `merge_armed`."""
        lane, _ = self._parts(listed, micros(now))
        if lane:
            for _, tied in itertools.groupby(self._rows_armed(lane, micros(now), self._whole_until), key=itemgetter(0)):
                # at one instant, in the order of `listed` (as `merge_armed`)
                yield from (self.schedule.occurrence(row, index) for _, _, row, index in sorted(tied))
            # every arm instant is a whole microsecond: "after the microsecond before `_whole_until`"
            now = max(now, instant_of(self._whole_until - 1))
        yield from merge_armed(listed, now, self.first_armed, self.after)

    def _parts(self, windows: Windows, at: int) -> tuple[dict[int, int], Sequence[int]]:
        """Each row of `windows` -> its place among them, and the places of those asked one by one:
        all of them when `at` is not held whole or they are not this schedule's rows."""
        if windows.timeline is self and self.whole(at):
            return windows.lane, ()
        return {}, range(len(windows))

    def _rows_armed(self, lane: dict[int, int], at: int, until: int) -> Iterator[tuple[int, int, int, int]]:
        """(arm, place, row, index in `starts`) of each occurrence of the rows of `lane` armed
        after `at` and before `until`, in arm order."""
        if not lane:
            return
        arms, armed, offsets = self._arms, self._armed, self.schedule.offsets
        for k in range(bisect_right(arms, at), bisect_left(arms, until)):
            row = bisect_right(offsets, armed[k]) - 1
            if row in lane:
                yield arms[k], lane[row], row, armed[k]

    def covering_now(self, windows: Windows, now: datetime) -> dict[str, list[Occurrence]]:
        """Of each enabled window that has some, in start order: read off the arm order within the
        longest hold before `now`, never a question to every window (issue 24)."""
        at = micros(now)
        lane, others = self._parts(windows, at)
        out: dict[str, list[Occurrence]] = {}
        schedule, long = self.schedule, self._long
        for _, _, row, index in self._rows_armed(lane, at - self._span, at + 1):
            if schedule.ends[index] > at and row not in long and schedule.enabled[row]:
                out.setdefault(schedule.names[row], []).append(schedule.occurrence(row, index))
        for row in long:
            if row in lane and schedule.enabled[row] and (found := schedule.covering_row(row, now)):
                out[schedule.names[row]] = list(found)
        for order in others:
            if windows.enabled(order) and (found := self.covering(windows[order], now)):
                out[windows.name(order)] = list(found)
        return out

    def next_arms(self, windows: Windows, now: datetime, count: int) -> list[tuple[str, Occurrence]]:
        """The first arm after `now` of each enabled window, soonest first (at one
        instant, in the order of `windows`): the first `count` and any other at the last one's
        instant."""
        at = micros(now)
        lane, others = self._parts(windows, at)
        found: list[tuple[datetime, int, str, Occurrence]] = []
        for order in others:
            if windows.enabled(order):
                upcoming = self.first_armed(windows[order], now)
                if upcoming is not None:
                    found.append((upcoming.arm_at, order, windows.name(order), upcoming))
        schedule = self.schedule
        seen: set[int] = set()
        taken, last = 0, -1
        for arm, order, row, index in self._rows_armed(lane, at, sys.maxsize):
            if taken >= count and arm != last:
                break
            if row not in seen:
                seen.add(row)
                if schedule.enabled[row]:
                    found.append((instant_of(arm), order, schedule.names[row], schedule.occurrence(row, index)))
                    taken, last = taken + 1, arm
                if len(seen) == len(lane):  # every row's first arm met: the rest are later ones
                    break
        found.sort(key=lambda item: (item[0], item[1]))
        if len(found) > count:
            cut = found[count - 1][0] if count > 0 else None
            found = [item for n, item in enumerate(found) if n < count or item[0] == cut]
        return [(name, occurrence) for _, _, name, occurrence in found]

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        row = self._row(window)
        found = self.schedule.next_start(row, now + timedelta(microseconds=self.schedule.leads[row])) \
            if row is not None else False
        return next_armed(window, now) if isinstance(found, bool) else found

    def after(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        row = self._row(window)
        found = self.schedule.next_start(row, occurrence.start) if row is not None else False
        return following(window, occurrence) if isinstance(found, bool) else found


class Windows(Sequence[Window]):
    """The windows a pass decides on: rows of one compiled schedule (`timeline`) read off its
    columns, a row's `Window` built only when asked for (`[i]`, `named`): a pass builds one only
    for a row it acts on (issue 35). Iterating builds every row: a decision asks by index."""

    def __init__(self, timeline: ScheduleTimeline, rows: Sequence[int] | None = None) -> None:
        self.timeline = timeline
        self.rows: Sequence[int] = rows if rows is not None else range(len(timeline.schedule))

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Window: ...

    @overload
    def __getitem__(self, index: slice) -> Windows: ...

    def __getitem__(self, index: int | slice) -> Window | Windows:
        if isinstance(index, slice):
            return self.subset(range(len(self))[index])
        return self.timeline.window(self.rows[index])

    def subset(self, positions: Iterable[int]) -> Windows:
        return Windows(self.timeline, [self.rows[i] for i in positions])

    def part(self, index: int) -> Part:
        return Part(self.timeline, self.rows[index])

    def name(self, index: int) -> str:
        return self.timeline.schedule.names[self.rows[index]]

    def enabled(self, index: int) -> bool:
        return self.timeline.schedule.enabled[self.rows[index]]

    def scope(self, index: int) -> str:
        return self.timeline.schedule.scopes[self.rows[index]]

    def selector(self, index: int) -> Selector | None:
        """Read off the row's table, no `Window` built."""
        table = self.table(index)
        if b'"only":' not in table and b'"jobs":' not in table:  # `Window.to_json` leaves them out when empty
            return None
        shown = self.timeline.schedule.shown(self.rows[index])
        return Selector.of(shown.get("only", ()), shown.get("jobs", ()))

    def table(self, index: int) -> bytes:
        return self.timeline.schedule.tables[self.rows[index]]

    @functools.cached_property
    def _positions(self) -> dict[str, int]:
        names = self.timeline.schedule.names  # one row per name
        return {names[row]: i for i, row in enumerate(self.rows)}

    def position(self, name: str) -> int | None:
        return self._positions.get(name)

    @functools.cached_property
    def lane(self) -> dict[int, int]:
        return {row: order for order, row in enumerate(self.rows)}


class Part(NamedTuple):
    """Row `row` of `timeline` as it is, or (`window` given) that window compiled."""

    timeline: ScheduleTimeline | None
    row: int = 0
    window: Window | None = None

    @classmethod
    def of(cls, window: Window) -> Part:
        return cls(None, 0, window)


class Schedules:
    """The compiled schedules one `hermes serve` holds (its passes and window tasks share them),
    keyed by the file bytes they are of, the newest `KEPT` at most; nothing builds in the
    background. One of a feed is held too, never planned from once a feed it is of reads
    otherwise (`held`): its rows are the file's windows bound to those feeds, which the pass
    still validates (a feed that fails, one on its last good copy), then plans off it."""

    #: the file's and the one before an edit (the guard's put-back rows)
    KEPT = 2
    #: the schedules `compose` keeps: a pass's read, it with a failing table's last version, and
    #: that with the guard's put-back
    COMPOSED = 3
    #: how far off the next wake-up must be for a pass to refresh a schedule (`keep`)
    QUIET = timedelta(minutes=1)

    def __init__(self, windows_path: Path) -> None:
        self.windows_path = windows_path
        self._held: dict[bytes, ScheduleTimeline] = {}
        #: the last bytes that do not compile table by table (the pass validates them)
        self._refused: bytes | None = None
        #: the digest of the last bytes `keep` could not build a schedule of (not tried again)
        self._failed: str | None = None
        #: the schedules `compose` built (the newest `KEPT`), by their rows' keys, with their parts
        self._composed: dict[tuple[str, ...], tuple[ScheduleTimeline, list[Part]]] = {}
        #: the last `compose`'s windows -> (the window, its feeds' state, its key): `_key` encodes
        #: and hashes a window's table, which a pass composing 10,000 windows did every pass
        self._keys: dict[int, tuple[Window, object, str]] = {}

    def held(self, raw: bytes) -> ScheduleTimeline | None:
        """One whose feed changed (a holiday removed, a fetch failing) is never planned from, and
        replaced by the next `rows` or `keep` (not dropped here: the window tasks' thread asks too)."""
        found = self._held.get(raw)
        return found if found is None or _fed_as_now(found.schedule, self.windows_path) else None

    def timeline(self, raw: bytes, now: datetime) -> ScheduleTimeline | None:
        """Held, else kept or compiled table by table (`load`) and held, never by validating the
        file whole; None for a file that is not that simple (a failing table, a repeated name)."""
        found = self.held(raw)
        if found is None and raw != self._refused:
            built = self._load(raw, None, now)
            if built is None or built.feeds is None:
                self._refused = raw
                return None
            found = self._hold(raw, built)
        return found

    def rows(self, raw: bytes, now: datetime) -> Windows | None:
        """None also for a file of a feed: the pass validates it and says what is wrong (a feed
        that fails, one read from its last good copy), then plans off that schedule."""
        found = self.timeline(raw, now)
        return found.windows if found is not None and not found.schedule.feeds else None

    def keep(self, raw: bytes, validated: Sequence[Window] | None, now: datetime,
             next_wake: datetime | None = None) -> None:
        """Once a pass acted: the schedule of `raw` (a file that validates whole, as `validated`;
        None: one that compiles table by table, `rows`) written and held, so the next command
        reads it warm; built again when `_due` or no longer answering now, the one it replaces
        let go first (never three held: a peak the allocator keeps)."""
        held = self.held(raw)
        if held is not None and held.whole(micros(now)) and not self._due(held, now, next_wake):
            return
        digest = hashlib.sha256(raw).hexdigest()
        if held is None and digest == self._failed:
            return
        self._held.pop(raw, None)
        if validated is not None:
            self._held.clear()
        del held
        built = self._load(raw, validated, now, REFRESH)
        if built is not None and built.feeds is not None and built.digest == digest:
            self._hold(raw, built)
        else:
            self._failed = digest

    def _load(self, raw: bytes, windows: Sequence[Window] | None, now: datetime,
              fresh_for: timedelta = HORIZON) -> Schedule | None:
        """None (one line when it failed): an accelerator never fails its caller."""
        try:
            return load(self.windows_path, raw, windows, now, fresh_for)
        except Exception as exc:  # noqa: BLE001
            log.warning("windows schedule of %s not built: %s", printable(self.windows_path), printable(str(exc)))
            return None

    def compose(self, parts: Sequence[Part], now: datetime, *, kept: bool = True) -> Windows:
        """The rows a pass plans off when its windows are not one version of the file's own (a
        failing table's last version, a window a policy refuses, the guard's put-back), never
        written: one per name (the first). The same while the keys are and it answers now whole
        (`kept`: remembered; compiled again only after a pass acts: `refresh`)."""
        at = micros(now)
        first = parts[0].timeline if parts else None
        if first is not None and first.whole(at) and len(parts) == len(first.schedule) and all(
                part.timeline is first and part.row == row for row, part in enumerate(parts)):
            return first.windows  # one schedule's rows: that schedule
        listed: dict[str, Part] = {}
        for part in parts:
            name = part.window.name if part.timeline is None else part.timeline.schedule.names[part.row]  # type: ignore[union-attr]
            listed.setdefault(name, part)
        known, self._keys = self._keys, {}
        keys = tuple(self._key(known, part) for part in listed.values())
        found = self._composed.get(keys)
        if found is not None and found[0].whole(at):
            return found[0].windows
        timeline = self._compose(list(listed.values()), keys, now)
        if kept:
            self._composed.pop(keys, None)
            self._composed[keys] = (timeline, list(listed.values()))
            while len(self._composed) > self.COMPOSED:
                del self._composed[next(iter(self._composed))]
        return timeline.windows

    def _compose(self, parts: Sequence[Part], keys: Sequence[str], now: datetime, *,
                 fresh: bool = False) -> ScheduleTimeline:
        """Each row of another schedule copied as it is, else compiled, over one horizon: that of
        the last composed that answers for long (its rows taken by key), else of a held one (its
        rows of equal tables), else (`fresh`) from now."""
        at = micros(now)
        previous = next((t.schedule for t, _ in reversed(self._composed.values()) if _answers_for_long(t, at)), None)
        held = None if previous is not None or fresh else next(
            (t.schedule for t in reversed(self._held.values()) if _answers_for_long(t, at)), None)
        base = previous if previous is not None else held
        builder = _Builder(base.lo, base.hi) if base is not None else _Builder(*_horizon(now))
        by_key = {key: row for row, key in enumerate(previous.sources)} if previous is not None else {}
        built: dict[int, Window] = {}
        for part, key in zip(parts, keys, strict=True):
            source, row, window = part
            if source is not None and (window := source.built(row)) is not None:
                built[len(builder.tables)] = window  # as it was built (a calendar's, bound to its feed then)
            if source is not None and (other := source.schedule).lo < builder.hi and builder.lo < other.hi:
                # the row as it is (a calendar's refused since is never asked again), the horizon
                # narrowed to what both answer for (`lo` raised: earlier rows only hold more)
                builder.lo, builder.hi = max(builder.lo, other.lo), min(builder.hi, other.hi)
                builder.add_kept(other, row, key)
                continue
            window = window if window is not None else source.window(row)  # type: ignore[union-attr]
            built[len(builder.tables)] = window
            found = by_key.get(key)
            if found is None and held is not None and window.feed is None and window.exclude_calendar is None:
                found = held.row_compiled_from(window)
            if base is not None and found is not None:
                builder.add_kept(base, found, key)
            elif refusal(window) is not None:
                builder.add_row(window, key)
            else:
                builder.add_window(window, key)
        schedule = builder.schedule(hashlib.sha256("\n".join(keys).encode()).hexdigest(), None, self.windows_path)
        assert schedule is not None  # noqa: S101 - one row per name
        timeline = ScheduleTimeline(schedule)
        timeline.seed(built)
        return timeline

    def _key(self, known: Mapping[int, tuple[Window, object, str]], part: Part) -> str:
        """What a row of `compose` is of: a row's place in the schedule it is taken from (whose
        digest says what it is of), or a window's table and the feeds it reads (a calendar's, or
        the holidays it excludes, which the table does not say), refused or not. Taken from the
        last `compose` for the very object with its feeds as they read now (a window is frozen: a
        pass reads the same objects while the file's bytes are the same, `WindowsFile.parse_each`);
        remembered for the next."""
        source, row, window = part
        if source is not None:
            schedule = source.schedule
            read = sorted(schedule.feeds.items()) if schedule.feeds else ""
            return f"{schedule.digest}@{schedule.lo}/{row}{read}"
        assert window is not None  # noqa: S101 - a part is one or the other
        # a private attribute is read through pydantic's `__getattr__`: only of a window that has one
        holidays = window._holidays if window.exclude_calendar is not None else None  # noqa: SLF001 - bound to it
        feeds = [(feed.digest, feed.refused is None) if feed is not None else None for feed in (window.feed, holidays)]
        found = known.get(id(window))
        key = found[2] if found is not None and found[0] is window and found[1] == feeds \
            else hashlib.sha256(window.to_json_bytes() + repr(feeds).encode()).hexdigest()
        self._keys[id(window)] = (window, feeds, key)
        return key

    def _due(self, timeline: ScheduleTimeline, now: datetime, next_wake: datetime | None) -> bool:
        """Once `REFRESH` old with no wake-up due within `QUIET` (an arm would wait for the
        build), at the latest when half the horizon is gone."""
        age = micros(now) - timeline.schedule.lo
        return age >= REFRESH // _US and (next_wake is None or next_wake - now >= self.QUIET
                                         or age >= HORIZON // _US // 2)

    def refresh(self, now: datetime, next_wake: datetime | None = None) -> None:
        """Once a pass acted (never before it acts): `compose`'s newest schedule compiled anew when `_due`."""
        if not self._composed:
            return
        keys, (timeline, parts) = next(reversed(self._composed.items()))
        if self._due(timeline, now, next_wake):
            self._composed.clear()
            windows = [Part.of(part.window if part.window is not None else timeline.window(row))
                       for row, part in enumerate(parts)]
            self._composed[keys] = (self._compose(windows, keys, now, fresh=True), windows)

    def _hold(self, raw: bytes, schedule: Schedule) -> ScheduleTimeline:
        found = self._held[raw] = ScheduleTimeline(schedule)
        while len(self._held) > self.KEPT:
            del self._held[next(iter(self._held))]
        return found


def _answers_for_long(timeline: ScheduleTimeline, at: int) -> bool:
    """What a schedule compiled in memory may take rows from: more than half its horizon left."""
    return timeline.whole(at) and at < timeline.schedule.lo + HORIZON // _US // 2
