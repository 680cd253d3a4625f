"""One immutable compiled schedule per windows file (issue 35).

Why: every windows command, `check --at` and `status` need the same two things from
`windows.toml`: each window's validated fields and its occurrences near the present. Validating
100,000 tables (pydantic) and asking croniter for their starts is seconds of work; this module
does it once per version of the file, for every process of the fleet, and keeps the outcome as
plain columns:

- **key**: the SHA-256 of the file's bytes, the stamp of the code that read them
  (`kept_files.code_stamp`: our modules, pydantic, croniter, tomli, Python) and the SHA-256 of the
  TZif data of every zone a window uses. Any difference and the schedule is built again.
- **rows**: one per window, in file order: `names`, `scopes`, `enabled`, what `status` and
  `windows next` print of it (zone, schedule, duration, drain), its drain lead, the digest of
  its table as written (`sources`, what an edit is compared by), and the window as `windows
  list --json` shows it (`tables`: `Window.to_json`, compact JSON, a line of the file per row,
  decoded only when a command prints it, a `Window` validated from it only for a row a command must ask the exact
  functions about).
- **occurrences**: over the stated horizon `[lo, hi)` (microseconds since the epoch, exact:
  a one-shot's start keeps its fraction; `HORIZON` from the build), each row's occurrences that
  have not ended at `lo` and start before `hi`, and then its first occurrence starting at or
  after `hi` (so "next start after T" is known for every T in the horizon); starts and ends,
  flat, the rows' slices given by `offsets`. A row with more than `MAX_PER_ROW` occurrences in
  the horizon is cut, and the horizon of the whole schedule shrinks to the last start kept
  (`hi`), so an answer is never a guess; a row whose scan a run of more excluded starts than a
  scan takes ended (`stopped`, in the header) is asked of the exact functions past its last start.
- **queries** by bisection: `covering(t)`, `next_start(row, t)`, `upcoming(row, t, n)`,
  `not_ended(row, t)`; an instant outside the horizon is not answered
  (None), or (`not_ended`) answered by the exact functions of `occurrences`, which remain the
  definition (the property tests compare the two).

- **bound**: the tables bound to a calendar feed (each `[[calendars]]` table, each `[[windows]]`
  table with `exclude_calendar`): their occurrences change when the feed does, not the file, so
  they have no row; each is kept as written (its TOML text, with its place: which array, which
  index), validated again and bound to its feed (`calendars.bind`, one compiled schedule per
  feed) by `schedule_of`, which fails as the validated file does when a feed cannot be read.
  `in_file_order` gives the rows and the bound windows in the order the validated file lists
  them.

Croniter stays the only cron arithmetic: the occurrences are `occurrences.occurrences`'s.

The schedule is written beside the windows file (`.<name>.schedule`, so every operator who can
read the fleet root finds the one the daemon or another command built), atomically, by whoever
builds it first; when the fleet root is not its owner's alone, in the per-user cache directory
(`kept_files.kept_path`). It is read only under `kept_files`'s StrictModes rule (the file and its directory
owned by the running user or root and writable by nobody else); anything doubtful (damaged, of
another key, wrongly owned) is ignored with one line and the schedule built again.
"""

from __future__ import annotations

import gc
import hashlib
import heapq
import hmac
import itertools
import json
import logging
import re
import sys
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import Any

import tomli_w
from tomli import TOMLDecodeError, loads as toml_loads

from hermes_estop.model.cronspec import fires, probe_deferred, validate_timezone
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.selector import Selector
from hermes_estop.model.text import did_you_mean, printable
from hermes_estop.model.timeutil import display_instant, parse_instant, to_utc
from hermes_estop.windows import kept_files
from hermes_estop.windows.calendars import CalendarSource, bind
from hermes_estop.windows.model import InvalidWindow, Window, validate_scope
from hermes_estop.windows.occurrences import EXACT, Around, Occurrence, Windows, merge_armed, occurrences, table_of
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["HORIZON", "MAX_PER_ROW", "REFRESH", "Entry", "Item", "Row", "Schedule", "ScheduleTimeline", "Schedules",
           "Tables", "build", "instant_of", "kept_schedule", "load", "micros", "schedule_of"]

log = logging.getLogger(__name__)

_FORMAT = 5
#: how far past its build a schedule answers (a week: the daemon's and the operators' questions
#: are about now and the next few days; a later instant is asked of the exact functions)
HORIZON = kept_files.HORIZON
#: how often `hermes serve` builds the schedule of an unchanged file again (so that the horizon
#: an operator's command finds is always at least half of `HORIZON` ahead)
REFRESH = HORIZON / 4
#: occurrences kept per row in the horizon (a minutely window's week is 10,080)
MAX_PER_ROW = 12_000
#: the columns, one line each, in this order (`tables` last: a line per row, decoded only when a
#: command prints the row)
_COLUMNS = ("names", "scopes", "enabled", "timezones", "schedules", "durations", "drains", "leads", "sources",
            "offsets", "starts", "ends", "bound", "tables")
#: the columns with one value per row, and the type of their values
_PER_ROW: dict[str, type | tuple[type, ...]] = {
    "names": str, "scopes": str, "enabled": bool, "timezones": str, "schedules": str, "durations": str,
    "drains": (str, type(None)), "leads": int, "sources": str}
#: the columns of many equal values: one string object for them all
_SHARED = ("scopes", "timezones", "durations", "drains")
_US = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: a table bound to a calendar feed: which array ("windows" or "calendars"), its index there, its TOML text
Entry = tuple[str, int, str]
#: a window of the file as a command goes through them: a row of the schedule, or a bound window
Item = int | Window
_DAMAGED = ("the windows schedule's tables are damaged (delete the .schedule file beside windows.toml: the next "
            "command builds it again)")


def micros(when: datetime) -> int:
    """`when` as whole microseconds since the epoch (exact, unlike a float timestamp)."""
    return (to_utc(when) - _EPOCH) // _US


def instant_of(count: int) -> datetime:
    """The instant `count` microseconds after the epoch (`micros`' inverse)."""
    return _EPOCH + timedelta(microseconds=count)


class Tables:
    """The `tables` column: each row's `Window.to_json()` as compact JSON, one line of the file
    each (the bytes the read split the file into: nothing decoded until a command prints a row,
    and an edit carries a row over as the bytes it is)."""

    __slots__ = ("_values",)

    def __init__(self, values: list[bytes]) -> None:
        self._values = values

    def values(self) -> list[bytes]:
        return self._values

    def __getitem__(self, row: int) -> bytes:
        return self._values[row]

    def shown(self, row: int) -> dict[str, Any]:
        """Row `row` as `Window.to_json` made it; `StoreError` when it is not a JSON object."""
        try:
            shown = json.loads(self._values[row])
        except ValueError:
            shown = None
        if not isinstance(shown, dict):
            raise StoreError(_DAMAGED)
        return shown


@dataclass(frozen=True, slots=True, eq=False)
class Schedule:
    """The compiled schedule of one version of a windows file (see the module docstring)."""

    digest: str
    basis: str
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
    tables: Tables
    bound: Sequence[Entry] = ()
    #: the `bound` tables' windows bound to their feeds (`bind_calendars`), in `bind`'s order
    bound_windows: Sequence[Window] = ()
    #: the rows whose scan a run of more than `MAX_EXCLUDED_RUN` excluded starts ended (nothing
    #: is known past their last start: they may go on after the horizon's end, so a query that
    #: runs out of them declines rather than says "no next occurrence"; issue 45)
    stopped: frozenset[int] = frozenset()
    #: each row by its name (made with the schedule: nothing in it changes after)
    _rows_by_name: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rows_by_name", dict(zip(self.names, range(len(self.names)), strict=True)))

    def __len__(self) -> int:
        return len(self.names)

    def row_of(self, name: str) -> int | None:
        return self._rows_by_name.get(name)

    def window(self, row: int) -> Window:
        """The `Window` of `row`, validated from its table (only rows a command must ask the
        exact functions about; the daemon keeps those it built, `timeline.ScheduleTimeline`);
        `StoreError` when the table is not the row's valid window."""
        try:
            window = Window.parse(self.tables.shown(row))
        except InvalidWindow:
            raise StoreError(_DAMAGED) from None
        if window.name != self.names[row] or window.scope != self.scopes[row]:
            raise StoreError(_DAMAGED)
        return window

    def bind_calendars(self, windows_path: Path) -> Schedule:
        """This schedule with its `bound` tables validated again and bound to their feeds as they
        are now (`bound_windows`: the feeds' bytes decide their occurrences, never the schedule);
        raises the first failure, as `WindowsFile.parse` does (a feed that cannot be read, with
        no last good copy)."""
        windows: list[Window] = []
        sources: list[CalendarSource] = []
        try:
            for kind, index, text in self.bound:
                table = toml_loads(text)
                if kind == "windows":
                    windows.append(Window.parse(table, path=windows_path, index=index))
                    if windows[-1].exclude_calendar is None:
                        raise StoreError(_DAMAGED)
                else:
                    sources.append(CalendarSource.parse(table, path=windows_path, index=index))
        except (InvalidWindow, TOMLDecodeError):
            raise StoreError(_DAMAGED) from None
        found = bind(windows_path.parent, windows_path, windows, sources)
        if found.failures:
            raise found.failures[0]
        return replace(self, bound_windows=found.windows)

    def in_file_order(self) -> list[Item]:
        """The rows and the bound windows (`bind_calendars`) in the order the validated file
        lists its windows: the `[[windows]]` tables as written, then the calendars."""
        excluding = {index for kind, index, _ in self.bound if kind == "windows"}
        if not excluding and not self.bound_windows:
            return list(range(len(self)))
        bound, rows = iter(self.bound_windows), iter(range(len(self)))
        out: list[Item] = [next(bound) if i in excluding else next(rows) for i in range(len(self) + len(excluding))]
        out.extend(bound)
        return out

    def named(self, name: str) -> Item | None:
        """The row, or the bound window, called `name`."""
        row = self.row_of(name)
        return row if row is not None else next((w for w in self.bound_windows if w.name == name), None)

    def item_named(self, name: str, windows_path: Path) -> Item:
        """`named`, or `InvalidArgument` in one line naming `name`, the file and the closest name
        there is: what every command that takes a window's name says of an unknown one."""
        item = self.named(name)
        if item is None:
            known = [*self.names, *(w.name for w in self.bound_windows)]
            raise InvalidArgument(f"no window named {name!r} in {printable(windows_path)}: "
                                  f"{did_you_mean(name, known)}`hermes windows list` lists them")
        return item

    def window_named(self, name: str, windows_path: Path) -> Window:
        """The `Window` called `name` (`item_named`'s refusal when there is none)."""
        item = self.item_named(name, windows_path)
        return self.window(item) if isinstance(item, int) else item

    def answers(self, t: datetime) -> bool:
        return self.lo <= micros(t) < self.hi

    def occurrence(self, row: int, index: int) -> Occurrence:
        return Occurrence(instant_of(self.starts[index]), instant_of(self.ends[index]), self.names[row], self.scopes[row],
                          timedelta(microseconds=self.leads[row]))

    def row(self, row: int) -> Row:
        """What a command prints of `row` besides its occurrences (no `Window` built)."""
        return Row(self.names[row], self.scopes[row], self.enabled[row], self.timezones[row], self.schedules[row],
                   self.durations[row], self.drains[row])

    def upcoming(self, row: int, now: datetime, count: int) -> list[Occurrence] | None:
        """`occurrences.upcoming` of `row`: its next `count` occurrences not ended at `now`;
        None when the schedule cannot tell (outside the horizon, or more asked than it keeps)."""
        if not self.answers(now):
            return None
        lo, hi = self.offsets[row], self.offsets[row + 1]
        index = bisect_right(self.ends, micros(now), lo, hi)
        found = range(index, min(index + count, hi))
        if len(found) < count and self._goes_on(row):
            return None
        return [self.occurrence(row, i) for i in found]

    def covering(self, t: datetime) -> list[Occurrence] | None:
        """The occurrences covering `t` (`[start - drain, end)`), enabled or not, by row then
        start; None when `t` is outside the horizon, or a drain lead from `t` reaches past it
        (a row keeps only its first start past the horizon: issue 45)."""
        if not self.answers(t):
            return None
        at = micros(t)
        if self.leads and at + max(self.leads) >= self.hi:
            return None  # a drain reaching back to `t` from past the horizon: a row keeps one start there
        out = []
        for row in range(len(self.names)):
            lo, hi = self.offsets[row], self.offsets[row + 1]
            for index in range(bisect_right(self.ends, at, lo, hi), bisect_right(self.starts, at + self.leads[row], lo, hi)):
                out.append(self.occurrence(row, index))
        return out

    def next_start(self, row: int, after: datetime) -> Occurrence | bool | None:
        """The first occurrence of `row` starting strictly after `after`; None when it has none;
        False when `after` is outside the horizon (ask the exact functions)."""
        if not self.answers(after):
            return False
        lo, hi = self.offsets[row], self.offsets[row + 1]
        index = bisect_right(self.starts, micros(after), lo, hi)
        if index < hi:
            return self.occurrence(row, index)
        return False if self._goes_on(row) else None

    def not_ended(self, row: int, t: datetime) -> Iterator[Occurrence]:
        """Every occurrence of `row` not ended at `t`, in order: what the exact functions give
        (`occurrences(window, t - duration)` less the ended ones), from the schedule as far as
        it keeps the row and from the exact functions past that (the row's `Window` built only
        then)."""
        if not self.answers(t):
            window = self.window(row)
            yield from (o for o in occurrences(window, t - window.duration) if not o.ended(t))
            return
        lo, hi = self.offsets[row], self.offsets[row + 1]
        first = bisect_right(self.ends, micros(t), lo, hi)
        yield from (self.occurrence(row, i) for i in range(first, hi))
        if self._goes_on(row):  # kept up to the horizon's end, or a scan of exclusions ended early
            window = self.window(row)
            if first < hi:
                yield from occurrences(window, instant_of(self.starts[hi - 1] + 1))
            else:
                yield from (o for o in occurrences(window, t - window.duration) if not o.ended(t))

    def next_arm_index(self, row: int, now: datetime) -> int | None:
        """Where in `starts` the first occurrence of `row` arming after `now` is, when the schedule
        keeps it (None: it keeps none, `unkept_arm` says from when one could arm); no
        `Occurrence` made (`status` asks this of every row)."""
        if not self.answers(now):
            return None
        at, lead, starts = micros(now), self.leads[row], self.starts
        index, hi = bisect_right(self.ends, at, self.offsets[row], self.offsets[row + 1]), self.offsets[row + 1]
        while index < hi and starts[index] - lead <= at:
            index += 1
        return index if index < hi else None

    def unkept_arm(self, row: int, now: datetime) -> datetime | None:
        """The earliest instant after `now` an occurrence of `row` that the schedule does not
        answer for can arm (each starts past the horizon, which a stopped scan brings forward:
        less the row's drain lead; `now` itself when the schedule does not answer at `now`);
        None when it answers for every one. A caller that needs no arm after this instant needs
        no `Window` built and no croniter asked."""
        if not self.answers(now):
            return now
        return instant_of(self.hi - self.leads[row]) if self._goes_on(row) else None

    def _goes_on(self, row: int) -> bool:
        """Whether `row` may have occurrences past the last it keeps: it is kept up to the
        horizon's end (its first start past it), or a run of more excluded starts than a scan
        takes ended its scan (`stopped`, `MAX_EXCLUDED_RUN`:
        nothing known past it, and the run may end before a later command asks; issue 45)."""
        lo, hi = self.offsets[row], self.offsets[row + 1]
        return (hi > lo and self.starts[hi - 1] >= self.hi) or row in self.stopped


@dataclass(frozen=True, slots=True)
class Row:
    """One window as `windows next` and `status` show it, besides its occurrences: its name,
    scope, whether it is enabled, its zone, and its schedule, duration and drain as text."""

    name: str
    scope: str
    enabled: bool
    timezone: str
    schedule: str
    duration: str
    drain: str | None

    def zone_of(self, occurrence: Occurrence) -> tzinfo:
        return validate_timezone(self.timezone)

    def describe_schedule(self) -> str:
        """`schedule` as a person reads it: a one-shot's instant local, to the second (the
        column keeps `Window.describe_schedule(for_json=True)`, exact UTC)."""
        if self.schedule.startswith("at "):
            return f"at {display_instant(parse_instant(self.schedule[3:], what='at time'))}"
        return self.schedule

    @classmethod
    def of(cls, window: Window) -> Row:
        return cls(window.name, window.scope, window.enabled, window.timezone, window.describe_schedule(for_json=True),
                   window.describe_duration(), format_duration(window.drain) if window.drain is not None else None)


def schedule_of(windows_file: WindowsFile, now: datetime) -> Schedule:
    """The schedule of `windows_file` as it is now (`load`; no file: no windows), its tables
    bound to a calendar bound to their feeds: the one value every command reads the windows
    from. Raises what `WindowsFile.parse` raises when the schedule must be built from a file
    that does not validate."""
    snapshot = windows_file.snapshot()
    raw = snapshot.raw if snapshot.identity is not None else b""
    found = load(windows_file.path, raw, partial(windows_file.parse, raw), now) if snapshot.identity else _empty(now)
    if found is None:  # a file that validates always has one: its bound tables are told by `_bound_entries`
        raise StoreError(f"{printable(windows_file.path)}: its calendar tables cannot be told from its bytes")
    return found.bind_calendars(windows_file.path) if found.bound else found


def _empty(now: datetime) -> Schedule:
    """The schedule of a file of no windows (no file, or an empty one)."""
    return Schedule(hashlib.sha256(b"").hexdigest(), kept_files.basis(()), [], *_horizon(now), [], [], [], [], [],
                    [], [], [], [], [0], [], [], Tables([]))


def kept_schedule(windows_path: Path, raw: bytes, now: datetime) -> Schedule | None:
    """The schedule kept for exactly the bytes `raw` of the windows file `windows_path`, when
    one answers at `now`; None otherwise. A read, never a build: `hermes serve`'s first pass on
    an unchanged file takes its occurrences from it instead of asking croniter for each window."""
    path = kept_files.kept_path(windows_path, ".schedule")
    found = _kept(path) if path is not None else None
    return found if found is not None and _fresh(found, hashlib.sha256(raw).hexdigest(), now, HORIZON) else None


def _fresh(found: Schedule, digest: str, now: datetime, fresh_for: timedelta) -> bool:
    return found.digest == digest and found.answers(now) and micros(now) < found.lo + fresh_for // _US


#: a line that opens a `[[windows]]` or a `[[calendars]]` table (where `_tables` cuts the file;
#: a line ends at a newline, as in TOML)
_TABLE_HEADER = re.compile(rb"^[ \t]*\[\[[ \t]*(?:windows|calendars)[ \t]*\]\][ \t]*(?:#[^\n]*)?$", re.MULTILINE)
_BOM = b"\xef\xbb\xbf"
#: the arrays of tables a windows file holds
_ARRAYS = ("windows", "calendars")


class _NotSimple(Exception):
    """The file is not `[[windows]]` and `[[calendars]]` tables only, table by table (other
    keys, a cut that does not parse): the whole validation says what it is."""


def _tables(raw: bytes) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each table of `raw` as written: its array ("windows" or "calendars"), its digest
    (`_source_digest`; "" for a calendar, which has no row), the table; in file order within each
    array (the two arrays' tables may come interleaved). `_NotSimple` when `raw` is not a file of
    these tables only.

    Parsed `_BATCH` tables at a time (the file cut before a `[[windows]]` or `[[calendars]]`
    line), so 100,000 parsed tables are never held at once. A cut inside a multi-line string
    leaves the part before it unterminated, which does not parse; what comes before the first
    table must hold no key (a `windows = []` there would make the whole file invalid TOML, each
    part of it valid); a part that opens a sub-table of an array it does not start
    (`[windows.allow]` after a `[[calendars]]`) makes that array a table there, refused. Each
    part is decoded on its own (a cut is before an ASCII line, so every part decodes exactly
    when the whole file does): the file is never held as text, nor as lines."""
    start = len(_BOM) if raw.startswith(_BOM) else 0
    cut, headers = start, 0
    for header in _TABLE_HEADER.finditer(raw, start):
        if header.start() > cut and (headers == 0 or headers >= _BATCH):
            yield from _chunk_tables(raw[cut:header.start()])
            cut, headers = header.start(), 0
        headers += 1
    if len(raw) > cut:
        yield from _chunk_tables(raw[cut:])


#: tables parsed at once (one parse per table costs a third more than one per file)
_BATCH = 200


def _chunk_tables(chunk: bytes) -> Iterator[tuple[str, str, dict[str, Any]]]:
    try:
        data = toml_loads(chunk.decode("utf-8"))
    except (UnicodeDecodeError, TOMLDecodeError):
        raise _NotSimple from None
    header = _TABLE_HEADER.match(chunk) is not None
    arrays = [data.get(name, []) for name in _ARRAYS]
    if set(data) - set(_ARRAYS) or (data and not header) or not all(
            isinstance(tables, list) and all(isinstance(t, dict) for t in tables) for tables in arrays):
        raise _NotSimple
    windows, calendars = arrays
    for table in windows:
        yield "windows", _source_digest(table), table
    for table in calendars:
        yield "calendars", "", table


def _source_digest(table: dict[str, Any]) -> str:
    """A table as written, by value and type (a TOML datetime is not the string that spells it)."""
    text = json.dumps(table, sort_keys=True, default=lambda v: [type(v).__name__, str(v)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


class _Builder:
    """The columns of a schedule, filled a row at a time (no `Window` kept once its row is in)."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self.columns: dict[str, list[Any]] = {name: [] for name in _COLUMNS if name not in ("tables", "bound")}
        self.columns["offsets"].append(0)
        self.tables: list[bytes] = []
        self.zones: set[str] = set()
        self.stopped: set[int] = set()

    def add_window(self, window: Window, source: str, table: bool = True) -> bool:
        """`window`'s row: its occurrences not ended at `lo` starting before `hi`, then its first
        starting at or after `hi`; cut at `MAX_PER_ROW` (the last start kept is then the end of
        the whole schedule's horizon). False when one of its expressions never fires (validated
        under `probe_deferred`: only a row without a start can be such a window's)."""
        starts, ends = self.columns["starts"], self.columns["ends"]
        kept = 0
        stopped: list[datetime] = []
        for occurrence in occurrences(window, instant_of(self.lo) - window.duration, stopped):
            start, end = micros(occurrence.start), micros(occurrence.end)
            if end <= self.lo:
                continue
            if kept >= MAX_PER_ROW:
                self.hi = min(self.hi, starts[-1])
                break
            starts.append(start)
            ends.append(end)
            kept += 1
            if start >= self.hi:
                break
        if stopped:  # a run of excluded starts ended the scan: nothing is known past it
            self.hi = max(self.lo + 1, min(self.hi, micros(stopped[0])))
            self.stopped.add(len(self.tables))
        if window.cron is not None:
            self.zones.add(window.timezone)
            if not (kept or stopped or fires(window.cron)):
                return False
        if window.exclude_cron is not None and not fires(window.exclude_cron):
            return False
        lead = (window.drain or timedelta(0)) // _US
        self._add(Row.of(window), _compact(window.to_json()) if table else b"", lead, source)
        return True

    def add_kept(self, previous: Schedule, row: int, source: str) -> None:
        """Row `row` of `previous` as it is (same code, zone data and horizon)."""
        lo, hi = previous.offsets[row], previous.offsets[row + 1]
        if row in previous.stopped:
            self.stopped.add(len(self.tables))
        self.columns["starts"].extend(previous.starts[lo:hi])
        self.columns["ends"].extend(previous.ends[lo:hi])
        self._add(previous.row(row), previous.tables[row], previous.leads[row], source)

    def _add(self, shown: Row, table: bytes, lead: int, source: str) -> None:
        c = self.columns
        values = (shown.name, shown.scope, shown.enabled, shown.timezone, shown.schedule, shown.duration, shown.drain)
        for name, value in zip(_PER_ROW, (*values, lead, source), strict=True):
            c[name].append(value)
        c["offsets"].append(len(c["starts"]))
        self.tables.append(table)

    def schedule(self, digest: str, bound: Sequence[Entry] | _Bound = ()) -> Schedule | None:
        """The schedule; None when two rows (or, for `_Bound`, any two tables) share a name (the
        whole validation refuses it)."""
        c = self.columns
        if isinstance(bound, _Bound):
            entries = bound.entries(c["names"])
            if entries is None:
                return None
            bound = entries
        if len(set(c["names"])) != len(c["names"]):
            return None
        return _schedule(digest, kept_files.basis(self.zones), sorted(self.zones), self.lo, self.hi, c, Tables(self.tables),
                         list(bound), self.stopped)


def _schedule(digest: str, basis: str, zones: list[str], lo: int, hi: int, columns: dict[str, Any], tables: Tables,
              bound: list[Entry], stopped: Iterable[int]) -> Schedule:
    rows: dict[str, Any] = {name: columns[name] for name in _COLUMNS[:-2]}
    return Schedule(digest, basis, zones, lo, hi, **rows, tables=tables, bound=bound, stopped=frozenset(stopped))


def _horizon(now: datetime) -> tuple[int, int]:
    lo = micros(now)
    return lo, lo + HORIZON // _US


def build(digest: str, windows: Sequence[Window], now: datetime, raw: bytes | None = None) -> Schedule | None:
    """The schedule of `windows` (the validated content of a file whose bytes, `raw`, have
    SHA-256 `digest`) over `[now, now + HORIZON)`: a row per plain window, the tables bound to
    a calendar kept as written (`_bound_entries`); None when they cannot be told from `raw`."""
    plain = [w for w in windows if w.exclude_calendar is None and w.feed is None]
    bound: list[Entry] = []
    if len(plain) != len(windows):
        entries = _bound_entries(raw, windows)
        if entries is None:
            return None
        bound, windows = entries, plain
    sources = _row_sources(raw, bound)
    builder = _Builder(*_horizon(now))
    for i, window in enumerate(windows):
        builder.add_window(window, sources[i] if sources is not None and len(sources) == len(windows) else "")
    return builder.schedule(digest, bound)


def _row_sources(raw: bytes | None, bound: Sequence[Entry]) -> list[str] | None:
    """The digest of each `[[windows]]` table of `raw` that is a row (not in `bound`), in file
    order; None when `raw` cannot be cut table by table."""
    if raw is None:
        return None
    excluding = {index for kind, index, _ in bound if kind == "windows"}
    try:
        tables = (source for kind, source, _ in _tables(raw) if kind == "windows")
        return [source for index, source in enumerate(tables) if index not in excluding]
    except _NotSimple:
        return None


def _bound_entries(raw: bytes | None, windows: Sequence[Window]) -> list[Entry] | None:
    """The tables of `raw` bound to a calendar (`Entry`), when `windows` are exactly its tables
    validated and bound (the `[[windows]]` in order, then the calendars); None otherwise (a
    table failed, or the windows are not of these bytes)."""
    try:
        data = toml_loads((raw or b"").decode("utf-8-sig"))
    except (UnicodeDecodeError, TOMLDecodeError):
        return None
    tables, calendars = data.get("windows", []), data.get("calendars", [])
    if not isinstance(tables, list) or not isinstance(calendars, list) or len(tables) + len(calendars) != len(windows):
        return None
    entries: list[Entry] = []
    for index, (table, window) in enumerate(zip(tables, windows, strict=False)):
        if window.feed is not None or not isinstance(table, dict):
            return None
        if window.exclude_calendar is not None:
            entries.append(("windows", index, tomli_w.dumps(table)))
    for index, (table, window) in enumerate(zip(calendars, windows[len(tables):], strict=True)):
        if window.feed is None or not isinstance(table, dict):
            return None
        entries.append(("calendars", index, tomli_w.dumps(table)))
    return entries


class _Bound:
    """The tables of a file bound to a calendar, kept as `_tables` meets them (`Entry`, as
    `_bound_entries` makes them from the whole file), each validated, with their names (windows
    and calendars share one name space, `calendars.bind`)."""

    def __init__(self, windows_path: Path) -> None:
        self.windows_path = windows_path
        self.windows: list[Entry] = []
        self.calendars: list[Entry] = []
        self.names: list[str] = []

    def tables(self, raw: bytes) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """Each `[[windows]]` table of `raw` with its index and digest; each `[[calendars]]`
        table validated and kept. `_NotSimple`, `InvalidWindow` as `_tables` and validation raise."""
        index = 0
        for kind, source, table in _tables(raw):
            if kind == "windows":
                yield index, source, table
                index += 1
                continue
            calendar = CalendarSource.parse(table, path=self.windows_path, index=len(self.calendars))
            self.names.append(calendar.name)
            self.calendars.append(("calendars", len(self.calendars), tomli_w.dumps(table)))

    def excluding(self, window: Window, index: int, table: dict[str, Any]) -> bool:
        """Whether `window` (the `[[windows]]` table `index`) excludes a calendar: kept then."""
        if window.exclude_calendar is None:
            return False
        self.names.append(window.name)
        self.windows.append(("windows", index, tomli_w.dumps(table)))
        return True

    def entries(self, rows: Sequence[str]) -> list[Entry] | None:
        """The bound tables in `_bound_entries`' order; None when a name repeats among them and
        the `rows` (the whole validation refuses it)."""
        names = [*rows, *self.names]
        return self.windows + self.calendars if len(set(names)) == len(names) else None


def _compiled(digest: str, raw: bytes, windows_path: Path, now: datetime,
              previous: Schedule | None = None) -> Schedule | None:
    """The schedule of the file `raw` built a table at a time (one `Window` held at once; the
    tables bound to a calendar kept as `build` keeps them: `_Bound`), an unchanged table's row
    taken from `previous` (the schedule before an edit: same code and zone data, its horizon,
    its zones). None when anything is not that simple (a table that does not validate, a
    repeated name; with `previous`, a horizon half gone): the caller builds it otherwise, or
    the whole validation refuses it."""
    if previous is not None and (not previous.answers(now) or micros(now) >= previous.lo + HORIZON // _US // 2):
        return None
    known = {source: row for row, source in enumerate(previous.sources) if source} if previous is not None else {}
    builder = _Builder(previous.lo, previous.hi) if previous is not None else _Builder(*_horizon(now))
    builder.zones.update(previous.zones if previous is not None else ())
    bound = _Bound(windows_path)
    paused = gc.isenabled()
    gc.disable()  # every row built survives: a collection would only walk them again
    try:
        with probe_deferred():
            for index, source, table in bound.tables(raw):
                if previous is not None and source in known:
                    builder.add_kept(previous, known[source], source)
                    continue
                window = Window.parse(table, path=windows_path, index=index)
                if bound.excluding(window, index, table):
                    continue
                if not builder.add_window(window, source):
                    return None
    except (_NotSimple, InvalidWindow):
        return None
    finally:
        if paused:
            gc.enable()
    return builder.schedule(digest, bound)


def dumps(schedule: Schedule, key: bytes | None = None) -> bytearray:
    """A header line, one compact JSON line per column, then one line per row's table; made a
    line at a time into one buffer, the header put before them in place (100,000 windows' tables
    are tens of MB: never held twice).
    With `key`, the header carries the seal of the whole (`kept_files.seal`), which `loads` checks."""
    header = {"format": _FORMAT, "digest": schedule.digest, "basis": schedule.basis, "zones": list(schedule.zones),
              "lo": schedule.lo, "hi": schedule.hi, "count": len(schedule)}
    if schedule.stopped:
        header["stopped"] = sorted(schedule.stopped)
    body = bytearray()
    for name in _COLUMNS[:-1]:
        body += _compact(list(getattr(schedule, name))) + b"\n"
    for table in schedule.tables.values():
        body += table + b"\n"
    del body[-1:]
    if key is not None:
        header["seal"] = kept_files.seal(key, _sealed_header(header), body)
    body[:0] = _compact(header) + b"\n"
    return body


def _sealed_header(header: dict[str, Any]) -> bytes:
    """What of a header its seal covers: every field but the seal, in one spelling."""
    return json.dumps({k: v for k, v in header.items() if k != "seal"}, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def loads(data: list[bytes], sealed: bytes | None = None, key: bytes | None = None) -> Schedule | None:
    """The schedule in `data` (the file's lines), or None when it was not computed by this code
    with today's zone data. With `key`, `sealed` is the whole file, which must carry the seal
    `dumps` gives it under `key` (else `ValueError`: built for other bytes, edited or copied
    from elsewhere). Raises `ValueError` (or `TypeError`, `KeyError`) for a damaged one."""
    header = json.loads(data[0] or b"null")
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        return None
    if key is not None:
        body = memoryview(sealed or b"")[len(data[0]) + 1:]
        if not isinstance(header.get("seal"), str) or not hmac.compare_digest(
                header["seal"], kept_files.seal(key, _sealed_header(header), body)):
            raise ValueError("its seal is not this directory's over its content (not built here for these bytes)")
    zones = header["zones"]
    if type(zones) is not list or not all(type(z) is str for z in zones):
        raise ValueError("zones is not a list of names")
    basis = kept_files.basis(zones)
    if header.get("basis") != basis or type(header.get("digest")) is not str:
        return None
    count = header["count"]
    if type(count) is not int or len(data) != len(_COLUMNS) + count:
        raise ValueError("wrong number of lines")
    columns = {name: json.loads(line or b"null") for name, line in zip(_COLUMNS[:-1], data[1:], strict=False)}
    _check_shape(columns, count, header["lo"], header["hi"])
    _check_values(columns)
    bound = _bound_of(columns["bound"], count)
    stopped = header.get("stopped", [])
    if type(stopped) is not list or not all(type(row) is int and 0 <= row < count for row in stopped):
        raise ValueError("stopped is not a list of rows")
    for name in _SHARED:
        columns[name] = [sys.intern(v) if v is not None else None for v in columns[name]]
    return _schedule(header["digest"], basis, zones, header["lo"], header["hi"], columns, Tables(data[len(_COLUMNS):]),
                     bound, stopped)


def _check_shape(columns: dict[str, Any], count: Any, lo: Any, hi: Any) -> None:
    """`ValueError` unless every column has its length and the occurrences are whole numbers,
    ascending per row, sliced by the offsets."""
    offsets, starts, ends = columns["offsets"], columns["starts"], columns["ends"]
    if type(count) is not int or not all(type(columns[name]) is list and len(columns[name]) == count
                                         for name in _PER_ROW):
        raise ValueError("columns of the wrong lengths")
    if type(offsets) is not list or type(starts) is not list or type(ends) is not list \
            or len(offsets) != count + 1 or len(ends) != len(starts) or offsets[0] != 0 or offsets[-1] != len(starts):
        raise ValueError("occurrences of the wrong lengths")
    if not all(type(v) is int for v in itertools.chain(starts, ends, offsets, (lo, hi))):
        raise ValueError("a start, an end or an offset is not an integer")
    if any(a > b for a, b in itertools.pairwise(offsets)) or any(
            starts[i] >= starts[i + 1] or ends[i] > ends[i + 1]
            for a, b in itertools.pairwise(offsets) for i in range(a, b - 1)):
        raise ValueError("starts (or ends) not ascending per row")


def _bound_of(column: Any, count: int) -> list[Entry]:
    """The `bound` column; `ValueError` unless each entry is an array's name, an index and a
    text, the `[[windows]]` indices distinct places among the rows' and the calendars' 0, 1, ..."""
    if type(column) is not list or not all(
            type(e) is list and len(e) == 3 and e[0] in ("windows", "calendars") and type(e[1]) is int
            and type(e[2]) is str for e in column):
        raise ValueError("bound is not a list of tables")
    places = [index for kind, index, _ in column if kind == "windows"]
    calendars = [index for kind, index, _ in column if kind == "calendars"]
    if places != sorted(set(places)) or not all(0 <= i < count + len(places) for i in places) \
            or calendars != list(range(len(calendars))):
        raise ValueError("bound tables out of place")
    return [(kind, index, text) for kind, index, text in column]


def _check_values(columns: dict[str, Any]) -> None:
    """`ValueError` unless each per-row value has its type, and each scope is one validation
    accepts (what a schedule holds is never taken on trust: an occurrence carries it)."""
    for name, kind in _PER_ROW.items():
        if not all(isinstance(v, kind) and (kind is not int or type(v) is int) for v in columns[name]):
            raise ValueError(f"a value of {name} of the wrong type")
    for scope in set(columns["scopes"]):
        validate_scope(scope)


def load(windows_path: Path, raw: bytes, validate: Callable[[], Sequence[Window]], now: datetime,
         fresh_for: timedelta = HORIZON, *, validated: bool = False) -> Schedule | None:
    """The schedule of the windows file `windows_path` (whose bytes are `raw`) answering at
    `now`: the one kept for these bytes (`_kept`, `_fresh`: built less than `fresh_for` ago);
    else built table by table (`_compiled`: with the kept one's unchanged rows, then without
    them unless the caller has the windows, `validated`), else from `validate()` (called only
    then: it refuses a file that does not validate); kept by whichever process builds it first.
    None when the file's bound tables cannot be told from its bytes."""
    path = kept_files.kept_path(windows_path, ".schedule")
    digest = hashlib.sha256(raw).hexdigest()
    found = _kept(path) if path is not None else None
    if found is not None and _fresh(found, digest, now, fresh_for):
        return found
    built = _compiled(digest, raw, windows_path, now, found) if found is not None and found.digest != digest else None
    del found  # its rows are taken: not held while the new one is written
    if built is None and not validated:
        built = _compiled(digest, raw, windows_path, now)
    if built is None:
        built = build(digest, validate(), now, raw)
    if built is not None and path is not None:
        key = kept_files.seal_key(path.parent, create=True)
        if key is not None:  # an unsealed schedule would never be read: not written
            kept_files.write_trusted(path, dumps(built, key), private=kept_files.in_cache(path, windows_path))
    return built


def _kept(path: Path) -> Schedule | None:
    """The schedule written at `path`, when it is sealed with its directory's key over exactly
    its content (one line when it is damaged or its seal does not hold)."""
    data = kept_files.trusted_bytes(path)
    key = kept_files.seal_key(path.parent, create=False) if data else None
    if key is None:
        return None
    try:
        return loads(data.split(b"\n"), data, key)
    except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
        log.warning("windows schedule %s ignored and built again: %s", printable(path), printable(str(exc)))
        return None


#: the rows' `Window`s a timeline keeps built at most (the oldest built dropped first)
WINDOWS_KEPT = 1024
#: an occurrence holding longer than this (a day, in microseconds), drain lead included, puts its
#: row among those `ScheduleTimeline.covering_now` looks up one by one, not off the arm order
_LONG = 86_400_000_000


class ScheduleTimeline:
    """The scheduler's `occurrences.Timeline` read off `schedule` (the schedule of the very bytes
    the asked windows were validated from: `Schedules` sees to that) by bisection, `EXACT` where
    it does not answer (an instant outside its horizon, a window that is not one of its rows):
    the same answers without the cron arithmetic, so a held chain is walked afresh every pass."""

    def __init__(self, schedule: Schedule, given: Sequence[Window] | None = None) -> None:
        self.schedule = schedule
        #: window name -> its row (`Schedule.row_of` searches the names)
        self._rows = {name: row for row, name in enumerate(schedule.names)}
        #: the validated windows the rows were compiled from (`Schedules.of_windows`: a row
        #: answers for that very object only), or None (rows of a file's bytes, by name)
        self.given = given
        #: every occurrence of the schedule (its index in `starts`) in arm order, and its arm
        #: instant in epoch microseconds (`armed_after`): two flat arrays, 16 bytes an occurrence
        offsets, leads = schedule.offsets, schedule.leads
        arm = array("q", (start - leads[row] for row in range(len(schedule.names))
                          for start in schedule.starts[offsets[row]:offsets[row + 1]]))
        self._armed = array("q", sorted(range(len(arm)), key=arm.__getitem__))
        self._arms = array("q", (arm[i] for i in self._armed))
        #: arms before this instant are all in `_arms`: their starts lie before the horizon's end
        self._whole_until = schedule.hi - max(schedule.leads, default=0)
        #: the rows whose occurrences may hold longer than `_LONG` (looked up one by one by
        #: `covering_now`), and the longest any other holds, drain lead included: what covers an
        #: instant of theirs was armed less than this before it
        spans = [max(map(int.__sub__, schedule.ends[offsets[row]:offsets[row + 1]],
                         schedule.starts[offsets[row]:offsets[row + 1]]), default=0) + leads[row]
                 for row in range(len(schedule.names))]
        self._long = {row for row, span in enumerate(spans) if span > _LONG}
        self._span = max((span for span in spans if span <= _LONG), default=0)
        #: every row, as windows (`windows`), one list for the life of the timeline
        self._windows: Windows | None = None
        #: the rows' `Window`s built so far (`window`), and the lock of that cache (the window
        #: tasks' thread shares the scheduler's schedule: `TaskService.schedules`)
        self._built: dict[int, Window] = {}
        self._building = threading.Lock()

    def windows(self) -> Windows:
        """Every window of the schedule, in file order, as its rows."""
        if self._windows is None:
            self._windows = Windows(timeline=self)
        return self._windows

    # -- the rows as `occurrences.Rows` (what `Windows` reads of them) ---------------------------

    def __len__(self) -> int:
        return len(self.schedule)

    def name(self, row: int) -> str:
        return self.schedule.names[row]

    def enabled(self, row: int) -> bool:
        return self.schedule.enabled[row]

    def scope(self, row: int) -> str:
        return self.schedule.scopes[row]

    def table(self, row: int) -> bytes:
        return self.schedule.tables[row]

    def window(self, row: int) -> Window:
        """The `Window` of `row` (`Schedule.window`), kept built: a running daemon asks for the
        same rows pass after pass (at most `WINDOWS_KEPT`, the oldest built dropped first)."""
        if self.given is not None:
            return self.given[row]
        window = self._built.get(row)
        if window is None:
            window = self.schedule.window(row)
            with self._building:
                if len(self._built) >= WINDOWS_KEPT:
                    del self._built[next(iter(self._built))]
                window = self._built.setdefault(row, window)
        return window

    def selector(self, row: int) -> Selector | None:
        """The row's selector from its table (`only`, `jobs`: `Window.to_json` leaves them out
        when empty), without a `Window` built."""
        table = self.schedule.tables[row]
        if b'"only":' not in table and b'"jobs":' not in table:
            return None
        shown = self.schedule.tables.shown(row)
        return Selector.of(shown.get("only", ()), shown.get("jobs", ()))

    def _row(self, window: Window) -> int | None:
        """`window`'s row; None for a window that is not in the schedule."""
        row = self._rows.get(window.name)
        return None if row is None or (self.given is not None and self.given[row] is not window) else row

    def whole(self, at: int) -> bool:
        """Whether the schedule holds every occurrence armed by `at` (epoch microseconds) and
        every row's first arm after it."""
        return self.schedule.lo <= at < self._whole_until

    def around(self, window: Window, now: datetime) -> Around:
        row = self._row(window)
        found = self._covering(row, now) if row is not None else None
        if found is None:
            return EXACT.around(window, now)
        return found, self.first_armed(window, now)

    def _covering(self, row: int, now: datetime) -> tuple[Occurrence, ...] | None:
        """The occurrences of `row` covering `now` (not ended at `now`, armed by it); None
        unless the row holds every one of them (`now`, and `now` plus the lead, in the horizon)."""
        schedule = self.schedule
        at = micros(now)
        armed_by = at + schedule.leads[row]
        if not (schedule.answers(now) and armed_by < schedule.hi):
            return None
        lo, hi = schedule.offsets[row], schedule.offsets[row + 1]
        first = bisect_right(schedule.ends, at, lo, hi)
        return tuple(schedule.occurrence(row, i) for i in range(first, bisect_right(schedule.starts, armed_by, lo, hi)))

    def armed_after(self, windows: Sequence[Window], now: datetime) -> Iterator[Occurrence]:
        """Read off the occurrences in arm order (a chain of 256 among 10,000 windows costs its
        256 occurrences, not a question to each window); past the part of the horizon where
        that list is whole, the walk goes on from there as `merge_armed`. The windows that are
        not rows of the schedule (a calendar's): theirs as `merge_armed` (by `first_armed` and
        `after`), merged in, at one instant in the order of `windows`."""
        if not self.schedule.answers(now):
            return merge_armed(windows, now, self.first_armed, self.after)
        lane = self._lane(windows)
        if lane is not None:
            return self._walk(windows, lane, now)
        rows = self._rows
        places = {window.name: order for order, window in enumerate(windows)}
        mine = [w for w in windows if w.name in rows]
        others = [w for w in windows if w.name not in rows]
        if not mine:
            return merge_armed(windows, now, self.first_armed, self.after)
        walk = self._walk(mine, {rows[w.name]: order for order, w in enumerate(mine)}, now)
        return heapq.merge(walk, merge_armed(others, now, self.first_armed, self.after),
                           key=lambda o: (o.arm_at, places[o.window]))

    def _lane(self, windows: Sequence[Window]) -> dict[int, int] | None:
        """Each row of `windows` -> its place among them; None when one is not a row."""
        lane, others = self._parts(Windows.of(windows))
        return None if others else lane

    def _parts(self, windows: Windows) -> tuple[dict[int, int], list[int]]:
        """Each row of `windows` -> its place among them, and the places of the windows that
        are not rows (a calendar's, another version's)."""
        known = windows.lane_of(self)
        if known is not None:
            return known, []
        lane: dict[int, int] = {}
        others: list[int] = []
        rows, given = self._rows, self.given
        for order, name in enumerate(windows.names()):  # `_row`, inlined: a lane may have 10,000 windows
            row = rows.get(name)
            if row is None or (given is not None and given[row] is not windows[order]):
                others.append(order)
            else:
                lane[row] = order
        return lane, others

    def covering_now(self, windows: Windows, now: datetime) -> dict[str, list[Occurrence]]:
        """The occurrences covering `now` of each enabled window of `windows` (only the windows
        with some), in start order: the rows' read off the arm order (those armed within the
        longest hold before `now`: what covers now, not a question to each row), the others'
        asked (`around`: a calendar's, or everything outside the part of the horizon the
        schedule holds whole). What a pass acts on (issue 24: never a question to every window)."""
        lane, others = self._parts(windows)
        at = micros(now)
        if lane and not self.whole(at):
            lane, others = {}, list(range(len(windows)))
        out: dict[str, list[Occurrence]] = {}
        schedule, armed, offsets, ends, long = self.schedule, self._armed, self.schedule.offsets, self.schedule.ends, self._long
        for k in range(bisect_right(self._arms, at - self._span), bisect_right(self._arms, at)) if lane else ():
            index = armed[k]
            if ends[index] > at:
                row = bisect_right(offsets, index) - 1
                if row in lane and row not in long and schedule.enabled[row]:
                    out.setdefault(schedule.names[row], []).append(schedule.occurrence(row, index))
        for row in long:
            if row in lane and schedule.enabled[row]:
                found = self._covering(row, now)
                if found:
                    out[schedule.names[row]] = list(found)
        for order in others:
            if windows.enabled(order):
                found = self.around(windows[order], now)[0]
                if found:
                    out[windows.name(order)] = list(found)
        return out

    def next_arms(self, windows: Windows, now: datetime, skip: Container[str],
                  count: int) -> list[tuple[str, Occurrence]]:
        """The first occurrence armed after `now` of each enabled window of `windows` not named
        in `skip`, soonest first (at one instant, in the order of `windows`): the first `count`
        and every other armed at the same instant as the last (all when fewer). The rows' read
        off the arm order, the first of each row met (every row's first arm after an instant the
        schedule holds whole is in it); the others' asked (`first_armed`)."""
        lane, others = self._parts(windows)
        at = micros(now)
        if lane and not self.whole(at):
            lane, others = {}, list(range(len(windows)))
        found: list[tuple[datetime, int, str, Occurrence]] = []
        for order in others:
            name = windows.name(order)
            if windows.enabled(order) and name not in skip:
                upcoming = self.first_armed(windows[order], now)
                if upcoming is not None:
                    found.append((upcoming.arm_at, order, name, upcoming))
        schedule, arms, armed, offsets = self.schedule, self._arms, self._armed, self.schedule.offsets
        seen: set[int] = set()
        taken, last = 0, -1
        for k in range(bisect_right(arms, at), len(arms)) if lane else ():
            if taken >= count and arms[k] != last:
                break
            index = armed[k]
            row = bisect_right(offsets, index) - 1
            if row in seen:
                continue
            seen.add(row)
            place = lane.get(row)
            name = schedule.names[row]
            if place is None or not schedule.enabled[row] or name in skip:
                continue
            found.append((instant_of(arms[k]), place, name, schedule.occurrence(row, index)))
            taken, last = taken + 1, arms[k]
        found.sort(key=lambda item: (item[0], item[1]))
        if len(found) > count:
            cut = found[count - 1][0] if count > 0 else None
            found = [item for n, item in enumerate(found) if n < count or item[0] == cut]
        return [(name, occurrence) for _, _, name, occurrence in found]

    def _walk(self, windows: Sequence[Window], lane: dict[int, int], now: datetime) -> Iterator[Occurrence]:
        schedule, arms, armed, offsets = self.schedule, self._arms, self._armed, self.schedule.offsets
        index = bisect_right(arms, micros(now))
        ties: list[tuple[int, int, int]] = []  # (order, row, index) of the occurrences armed at one instant
        while index < len(arms) and arms[index] < self._whole_until:
            at = armed[index]
            row = bisect_right(offsets, at) - 1
            order = lane.get(row)
            if order is not None:
                ties.append((order, row, at))
            index += 1
            if ties and (index == len(arms) or arms[index] != arms[index - 1]):
                ties.sort()  # at one instant, in the order of `windows` (as `merge_armed`)
                yield from (schedule.occurrence(row, at) for _, row, at in ties)
                ties = []
        # every arm instant is a whole microsecond: "after the microsecond before `_whole_until`"
        yield from merge_armed(windows, max(now, instant_of(self._whole_until - 1)),
                               self.first_armed, self.after)

    def first_armed(self, window: Window, now: datetime) -> Occurrence | None:
        row = self._row(window)
        if row is None:
            return EXACT.first_armed(window, now)
        found = self.schedule.next_start(row, now + timedelta(microseconds=self.schedule.leads[row]))
        return EXACT.first_armed(window, now) if isinstance(found, bool) else found

    def after(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        row = self._row(window)
        if row is None:
            return EXACT.after(window, occurrence)
        found = self.schedule.next_start(row, occurrence.start)
        return EXACT.after(window, occurrence) if isinstance(found, bool) else found


class Schedules:
    """The compiled schedules one `hermes serve` holds: the one holder of them, shared by the
    scheduler's passes and its window tasks (`TaskService`), keyed by the file bytes they are of
    (the digest of the schedule), the newest `KEPT` at most. Nothing builds in the background:
    a pass asks `rows` (the kept schedule of its bytes, else compiled table by table) and, once
    it acted, `keep` (the file's schedule written for the operators' commands), so every
    command after a pass reads it warm. A schedule carrying tables bound to a calendar is
    written for the commands but never held (its rows are not all the windows: the pass
    validates such a file)."""

    #: schedules held at most (the file's and the one before an edit: the guard's put-back rows)
    KEPT = 2
    #: how far off the next wake-up must be for a pass to refresh a schedule (`keep`)
    QUIET = timedelta(minutes=1)

    def __init__(self, windows_path: Path) -> None:
        self.windows_path = windows_path
        self._held: dict[bytes, ScheduleTimeline] = {}
        #: the last bytes that do not compile table by table (the pass validates them)
        self._refused: bytes | None = None
        #: the digest of the last bytes `keep` could not build a schedule of (not tried again)
        self._failed: str | None = None
        #: the schedule compiled in memory of the last windows a pass acted on that are not one
        #: version of the file's own (`of_windows`), with their identities and the windows
        self._memory: tuple[tuple[int, ...], ScheduleTimeline, Sequence[Window]] | None = None

    def held(self, raw: bytes | None) -> ScheduleTimeline | None:
        """The timeline of the schedule held for exactly the bytes `raw`; None when none is."""
        return self._held.get(raw) if raw is not None else None

    def rows(self, raw: bytes, now: datetime) -> Windows | None:
        """The windows of `raw` as the rows of its schedule: held, read from beside the file,
        or compiled table by table (`load`: an unchanged table's row taken from the schedule kept
        before the edit); never by validating the file whole: a file that is not that simple
        (a table that fails, a name repeated, calendars) is left to the pass, which validates it
        and says what is wrong. None then."""
        found = self._held.get(raw)
        if found is not None:
            return found.windows()
        if raw == self._refused:
            return None
        try:
            built = load(self.windows_path, raw, _validated_whole, now)
        except _NotCompiled:
            built = None
        except Exception as exc:  # noqa: BLE001 -- the pass validates the file instead
            log.warning("windows schedule of %s not built: %s", printable(self.windows_path), printable(str(exc)))
            built = None
        if built is None or built.bound:
            self._refused = raw
            return None
        return self._hold(raw, built).windows()

    def keep(self, raw: bytes, windows: Sequence[Window], now: datetime, next_wake: datetime | None = None) -> None:
        """Leave the schedule of `raw` (a file that validates whole, as `windows`) written and
        held, built again once it is `REFRESH` old (at once when it no longer answers now whole:
        the clock went back), in the pass: the next command reads it warm.
        A refresh waits for a pass with no wake-up due within `QUIET` of it (`next_wake`: a
        window arming meanwhile would wait for the build), at most until half the horizon is
        gone. The schedule it replaces is let go before the build (never three held at once: a
        peak the allocator keeps). A failure is logged, never raised (the pass acted already)."""
        held = self._held.get(raw)
        if held is not None and held.whole(micros(now)) and not self._due(held, now, next_wake):
            return  # else (the clock went back, say) built now
        digest = hashlib.sha256(raw).hexdigest()
        if held is None and digest == self._failed:
            return
        listed = Windows.of(windows)
        rows = listed.timeline is not None
        self._held.pop(raw, None)
        if not rows:
            self._held.clear()
        del held
        try:
            built = load(self.windows_path, raw, lambda: listed, now, REFRESH, validated=not rows)
        except Exception as exc:  # noqa: BLE001 -- an accelerator never fails its caller
            log.warning("windows schedule of %s not built: %s", printable(self.windows_path), printable(str(exc)))
            built = None
        if built is not None and not built.bound and built.digest == digest:
            self._hold(raw, built)
        else:
            self._failed = digest

    def of_windows(self, windows: Windows, now: datetime) -> ScheduleTimeline:
        """The timeline of a schedule compiled in memory of exactly these validated windows
        (the pass's when they are not one version of the file's own: a table that fails, a
        policy, calendars, the guard putting back a version it acted on), never written: a
        pass always plans from a schedule. A window already compiled for the last such list
        (the very object, or one equal field for field: the file read again) keeps its row (a
        list put together anew each pass costs no cron arithmetic); without such a list, a
        window whose table is a row of a schedule held for the file (the guard putting back
        the version it acted on beside an edit) takes that row (equal tables, equal windows);
        while half the horizon is left (a window excluding a calendar's days: equal with the same
        feed, never by its table). A calendar's window is not a row (asked as it is: its events
        carry their ids). Compiled again when the list holds other objects, or (`refresh`, once a
        pass acted) when it is due."""
        listed = windows.validated()
        key = tuple(map(id, listed))
        memo = self._memory
        at = micros(now)
        if memo is not None and memo[0] == key and memo[1].whole(at):
            return memo[1]  # refreshed after a pass acts (`refresh`)
        previous = memo[1] if memo is not None and _answers_for_long(memo[1], at) else None
        self._memory = None
        return self._compile(listed, key, now, previous)

    def _compile(self, listed: Sequence[Window], key: tuple[int, ...], now: datetime,
                 previous: ScheduleTimeline | None, *, seeded: bool = True) -> ScheduleTimeline:
        """`of_windows`' compile, taking rows from `previous` (the last list's) or else (`seeded`)
        from a schedule held for the file; from `now`, whole, when neither."""
        at = micros(now)
        held = (t for t in reversed(self._held.values()) if seeded and _answers_for_long(t, at))
        base = previous or next(held, None)
        before = previous.given or () if previous is not None else ()
        rows_of = {id(w): row for row, w in enumerate(before)}
        named = {w.name: row for row, w in enumerate(before)}
        builder = _Builder(base.schedule.lo, base.schedule.hi) if base is not None else _Builder(*_horizon(now))
        given: list[Window] = []
        names: set[str] = set()
        for window in listed:
            if window.feed is not None or window.name in names:
                continue  # a calendar's (its events carry their ids), or a name met already: asked as it is
            names.add(window.name)
            # a window excluding a calendar's days is bound to one version of the feed
            # (`calendars.bind`): equal only with that feed (`==` compares it), and its table
            # does not say which
            plain = window.exclude_calendar is None
            row = rows_of.get(id(window))
            if row is None and window.name in named and before[named[window.name]] == window:
                row = named[window.name]  # read again, equal field for field: the same occurrences
            if base is not None and previous is None:
                row = base.schedule.row_of(window.name) if plain else None
                row = row if row is not None and base.schedule.tables[row] == table_of(window) else None
            if base is not None and row is not None:
                builder.add_kept(base.schedule, row, "")
            else:
                builder.add_window(window, "", table=False)
            given.append(window)
        c = builder.columns
        schedule = Schedule("", "", [], builder.lo, builder.hi, c["names"], c["scopes"], c["enabled"], c["timezones"],
                            c["schedules"], c["durations"], c["drains"], c["leads"], c["sources"], c["offsets"],
                            c["starts"], c["ends"], Tables(builder.tables), stopped=frozenset(builder.stopped))
        timeline = ScheduleTimeline(schedule, given)
        self._memory = (key, timeline, listed)
        return timeline

    def _due(self, timeline: ScheduleTimeline, now: datetime, next_wake: datetime | None) -> bool:
        """Whether a pass at `now` builds `timeline`'s schedule again: it is `REFRESH` old and no
        wake-up is due within `QUIET` of `now`, or half its horizon is gone."""
        age = micros(now) - timeline.schedule.lo
        return age >= REFRESH // _US and (next_wake is None or next_wake - now >= self.QUIET
                                         or age >= HORIZON // _US // 2)

    def refresh(self, now: datetime, next_wake: datetime | None = None) -> None:
        """Once a pass acted: the schedule compiled in memory (`of_windows`) compiled again from
        `now` when it is due (`_due`, as `keep` refreshes the file's), so a pass never compiles
        a whole list before it acts because of its age."""
        memo = self._memory
        if memo is not None and self._due(memo[1], now, next_wake):
            self._memory = None
            self._compile(memo[2], memo[0], now, None, seeded=False)

    def _hold(self, raw: bytes, schedule: Schedule) -> ScheduleTimeline:
        found = self._held[raw] = ScheduleTimeline(schedule)
        while len(self._held) > self.KEPT:
            del self._held[next(iter(self._held))]
        return found


def _answers_for_long(timeline: ScheduleTimeline, at: int) -> bool:
    """Whether `timeline` answers `at` whole with more than half its horizon left (what a
    schedule compiled in memory may take rows from)."""
    return timeline.whole(at) and at < timeline.schedule.lo + HORIZON // _US // 2


class _NotCompiled(Exception):
    """The file is not compiled table by table: the pass validates it whole."""


def _validated_whole() -> Sequence[Window]:
    """`Schedules.rows`' `validate`: never the whole file (the pass does that)."""
    raise _NotCompiled
