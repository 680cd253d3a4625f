"""One immutable compiled schedule per windows file (issue 35).

Why: every windows command and `status` needs the same two things from `windows.toml`: each
window's validated fields and its occurrences near the present. Validating 100,000 tables
(pydantic) and asking croniter for their starts is seconds of work; this module does it once per
version of the file, for every process of the fleet, and keeps the outcome as plain columns:

- **key**: the SHA-256 of the file's bytes, the stamp of the code that read them
  (`compiled._code_stamp`: our modules, pydantic, croniter, tomli, Python) and the SHA-256 of
  the TZif data of every zone a window uses. Any difference and the schedule is built again.
- **rows**: one per window, in file order: `names`, `scopes`, `enabled`, the window's table as
  written to the file (`tables`, a `Window` built from it only for a row a command prints),
  and its drain lead in seconds.
- **occurrences**: over the stated horizon `[lo, hi)` (epoch seconds, `HORIZON` from the build),
  each row's occurrences that have not ended at `lo` and start before `hi`, and then its first
  occurrence starting at or after `hi` (so "next start after T" is known for every T in the
  horizon); start and end seconds, flat, the rows' slices given by `offsets`. A row with more
  than `MAX_PER_ROW` occurrences in the horizon is cut, and the horizon of the whole schedule
  shrinks to the last start kept (`hi`), so an answer is never a guess.
- **queries** by bisection: `covering(t)`, `next_start(row, t)`, `starting_in(a, b)`; each
  returns None for an instant outside the horizon, and the caller uses the exact functions of
  `occurrences` (which remain the definition: the property tests compare the two).

Croniter stays the only cron arithmetic: the occurrences are `occurrences.occurrences`'s.
A window bound to a calendar (`exclude_calendar`) or a file with `[[calendars]]` has no
schedule (its feed changes without the file changing).

The schedule is written beside the windows file (`.<name>.schedule`, so every operator who can
read the fleet root finds the one the daemon or another command built), atomically, by whoever
builds it first. It is read only under `compiled`'s StrictModes rule (the file and its directory
owned by the running user or root and writable by nobody else); anything doubtful (damaged, of
another key, wrongly owned) is ignored with one line and the schedule built again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import Any

from tomli import TOMLDecodeError, loads as toml_loads

from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import StoreError
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, parse_instant
from hermes_estop.system.fsutil import atomic_write
from hermes_estop.windows import compiled
from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.occurrences import Occurrence, occurrences
from hermes_estop.windows.windows_file import WindowsFile
import itertools

__all__ = ["HORIZON", "MAX_PER_ROW", "REFRESH", "Row", "Schedule", "Tables", "build", "load", "schedule_of", "schedule_path", "warm"]

log = logging.getLogger(__name__)

_FORMAT = 2
#: how far past its build a schedule answers (a week: the daemon's and the operators' questions
#: are about now and the next few days; a later instant is asked of the exact functions)
HORIZON = timedelta(days=7)
#: how often `hermes serve` builds the schedule of an unchanged file again (so that the horizon
#: an operator's command finds is always at least half of `HORIZON` ahead)
REFRESH = HORIZON / 4
#: occurrences kept per row in the horizon (a minutely window's week is 10,080)
MAX_PER_ROW = 12_000
#: the columns, one line each, in this order (`tables` last: decoded only when a `Window` is built)
_COLUMNS = ("names", "scopes", "enabled", "timezones", "schedules", "durations", "drains", "leads", "sources",
            "offsets", "starts", "ends", "tables")
#: the columns with one value per row
_PER_ROW = ("names", "scopes", "enabled", "timezones", "schedules", "durations", "drains", "leads", "sources")


class Tables:
    """The `tables` column: each row's table as compact JSON text, the column decoded the first
    time a row's table is asked for (100,000 tables are tens of MB a command that builds no
    `Window` never needs; text, not dicts, is what an edit carries over)."""

    __slots__ = ("_count", "_line", "_values")

    def __init__(self, values: list[str] | None = None, line: bytes | None = None, count: int = 0) -> None:
        self._values, self._line, self._count = values, line, count

    def values(self) -> list[str]:
        if self._values is None:
            try:
                values = json.loads(self._line or b"null")
            except ValueError:
                values = None
            if not isinstance(values, list) or len(values) != self._count or not all(type(v) is str for v in values):
                raise StoreError("the windows schedule's tables are damaged (delete the .schedule file beside "
                                 "windows.toml: the next command builds it again)")
            self._values, self._line = values, None
        return self._values

    def __getitem__(self, row: int) -> str:
        return self.values()[row]



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

    def __len__(self) -> int:
        return len(self.names)

    def row_of(self, name: str) -> int | None:
        try:
            return self.names.index(name)
        except ValueError:
            return None

    def window(self, row: int) -> Window:
        """The `Window` of `row`, validated from its table (only rows a command prints)."""
        try:
            table = json.loads(self.tables[row])
        except ValueError:
            raise StoreError("the windows schedule's tables are damaged (delete the .schedule file beside "
                             "windows.toml: the next command builds it again)") from None
        return Window.parse(table)

    def answers(self, t: datetime) -> bool:
        return self.lo <= t.timestamp() < self.hi

    def occurrence(self, row: int, index: int) -> Occurrence:
        start = datetime.fromtimestamp(self.starts[index], UTC)
        return Occurrence(start, datetime.fromtimestamp(self.ends[index], UTC), self.names[row], self.scopes[row],
                          timedelta(seconds=self.leads[row]))

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
        index = bisect_right(self.ends, now.timestamp(), lo, hi)
        found = range(index, min(index + count, hi))
        if len(found) < count and hi > lo and self.starts[hi - 1] >= self.hi:
            return None
        return [self.occurrence(row, i) for i in found]

    def covering(self, t: datetime) -> list[Occurrence] | None:
        """The occurrences covering `t` (`[start - drain, end)`), enabled or not, by row then
        start; None when `t` is outside the horizon."""
        if not self.answers(t):
            return None
        at = t.timestamp()
        out = []
        for row in range(len(self.names)):
            lo, hi = self.offsets[row], self.offsets[row + 1]
            lead = self.leads[row]
            for index in range(lo, bisect_right(self.starts, at + lead, lo, hi)):
                if at < self.ends[index]:
                    out.append(self.occurrence(row, index))
        return out

    def next_start(self, row: int, after: datetime) -> Occurrence | bool | None:
        """The first occurrence of `row` starting strictly after `after`; None when it has none;
        False when `after` is outside the horizon (ask the exact functions)."""
        if not self.answers(after):
            return False
        lo, hi = self.offsets[row], self.offsets[row + 1]
        index = bisect_right(self.starts, after.timestamp(), lo, hi)
        return self.occurrence(row, index) if index < hi else None

    def starting_in(self, first: datetime, last: datetime) -> list[Occurrence] | None:
        """Every occurrence starting in `[first, last)`, by start then row; None unless the
        whole range lies in the horizon."""
        if not (self.answers(first) and last.timestamp() <= self.hi):
            return None
        a, b = first.timestamp(), last.timestamp()
        found = []
        for row in range(len(self.names)):
            lo, hi = self.offsets[row], self.offsets[row + 1]
            for index in range(bisect_left(self.starts, a, lo, hi), bisect_left(self.starts, b, lo, hi)):
                found.append((self.starts[index], row, index))
        found.sort()
        return [self.occurrence(row, index) for _, row, index in found]


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
                   format_duration(window.duration), format_duration(window.drain) if window.drain is not None else None)


def schedule_of(windows_file: WindowsFile, now: datetime) -> Schedule | None:
    """The schedule of `windows_file` as it is now (`load`); None when it has none (no file,
    calendars). Raises what `WindowsFile.parse` raises when the schedule must be built from a
    file that does not validate."""
    snapshot = windows_file.snapshot()
    if snapshot.identity is None:
        return None
    raw = snapshot.raw
    return load(windows_file.path, raw, partial(windows_file.parse, raw), now)


def warm(windows_path: Path, raw: bytes, windows: Sequence[Window], now: datetime) -> threading.Thread:
    """Build and write the schedule of the windows file `windows_path` (bytes `raw`, validated
    as `windows`) in a thread of its own, so `hermes serve` makes the next operator command warm
    without delaying a reconciliation pass. Not a daemon thread: `serve --once` writes it
    before it exits. A failure is logged, never raised (the schedule is an accelerator)."""
    kept = list(windows)

    def build_and_write() -> None:
        try:
            load(windows_path, raw, lambda: kept, now, REFRESH)
        except Exception as exc:  # noqa: BLE001 -- an accelerator never fails its caller
            log.warning("windows schedule of %s not built: %s", windows_path, exc)

    thread = threading.Thread(target=build_and_write, name="windows-schedule")
    thread.start()
    return thread


def schedule_path(windows_path: Path) -> Path:
    return windows_path.with_name(f".{windows_path.name}.schedule")


def _basis(zones: dict[str, str | None]) -> str:
    """What a schedule was computed with besides the file: the code, each zone's TZif data."""
    parts = [compiled._code_stamp(), *(f"{z}={zones[z]}" for z in sorted(zones))]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _zones(names: Any) -> dict[str, str | None]:
    return {name: compiled._zone_digest(name) for name in names}


#: a line that opens a `[[windows]]` table (where `_sources` cuts the file)
_TABLE_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*windows[ \t]*\]\][ \t]*(#.*)?$")


def _sources(raw: bytes, kept: Callable[[str], bool]) -> list[tuple[str, dict[str, Any] | None]] | None:
    """Each `[[windows]]` table of `raw` as written: its digest (`_source_digest`) and the table
    itself where `kept(digest)`, else None; or None when `raw` is not a file of windows only
    (calendars, other keys, not TOML: the full validation says what is wrong).

    Parsed a table at a time (the file cut before each `[[windows]]` line), so 100,000 parsed
    tables are never held at once. A cut inside a multi-line string leaves the part before it
    unterminated, which does not parse: then None, and the file is validated whole."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    out: list[tuple[str, dict[str, Any] | None]] = []
    chunk: list[str] = []
    for line in (*text.splitlines(keepends=True), "[[windows]]"):
        if _TABLE_HEADER.match(line) and chunk:
            try:
                data = toml_loads("".join(chunk))
            except TOMLDecodeError:
                return None
            tables = data.get("windows", [])
            if set(data) - {"windows"} or not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
                return None
            for table in tables:
                digest = _source_digest(table)
                out.append((digest, table if kept(digest) else None))
            chunk = []
        chunk.append(line)
    return out


def _source_digest(table: dict[str, Any]) -> str:
    """A table as written, by value and type (a TOML datetime is not the string that spells it)."""
    text = json.dumps(table, sort_keys=True, default=lambda v: [type(v).__name__, str(v)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


#: one window compiled: (what is shown of it, its table, lead, source, starts, ends, cut at)
_Row = tuple[Row, str, int, str, list[int], list[int], int | None]


def _row(window: Window, source: str, lo: int, hi: int) -> _Row:
    """`window`'s row: its occurrences not ended at `lo` starting before `hi`, then its first
    starting at or after `hi`; cut at `MAX_PER_ROW` (the last start kept is then the row's end)."""
    starts, ends = list[int](), list[int]()
    cut = None
    for occurrence in occurrences(window, datetime.fromtimestamp(lo, UTC) - window.duration):
        start, end = int(occurrence.start.timestamp()), int(occurrence.end.timestamp())
        if end <= lo:
            continue
        if len(starts) >= MAX_PER_ROW:
            cut = starts[-1]
            break
        starts.append(start)
        ends.append(end)
        if start >= hi:
            break
    lead = int((window.drain or timedelta(0)).total_seconds())
    return (Row.of(window), _table(window), lead, source, starts, ends, cut)


def _assembled(digest: str, basis: str, zones: list[str], lo: int, hi: int, rows: Sequence[_Row]) -> Schedule:
    offsets, starts, ends = [0], list[int](), list[int]()
    for row in rows:
        starts.extend(row[4])
        ends.extend(row[5])
        offsets.append(len(starts))
        if row[6] is not None:
            hi = min(hi, row[6])
    shown = [r[0] for r in rows]
    return Schedule(digest, basis, zones, lo, hi, [r.name for r in shown], [r.scope for r in shown],
                    [r.enabled for r in shown], [r.timezone for r in shown], [r.schedule for r in shown],
                    [r.duration for r in shown], [r.drain for r in shown], [r[2] for r in rows], [r[3] for r in rows],
                    offsets, starts, ends, Tables([r[1] for r in rows]))


def build(digest: str, windows: Sequence[Window], now: datetime, raw: bytes | None = None) -> Schedule | None:
    """The schedule of `windows` (the validated content of a file whose bytes, `raw`, have
    SHA-256 `digest`) over `[now, now + HORIZON)`; None when a window is bound to a calendar."""
    if any(w.exclude_calendar is not None or w.feed is not None for w in windows):
        return None
    lo = int(now.timestamp())
    hi = lo + int(HORIZON.total_seconds())
    found = _sources(raw, lambda digest: False) if raw is not None else None
    sources = [digest for digest, _ in found] if found is not None and len(found) == len(windows) else None
    rows = [_row(w, sources[i] if sources else "", lo, hi) for i, w in enumerate(windows)]
    zones = _zones({w.timezone for w in windows if w.cron is not None})
    return _assembled(digest, _basis(zones), sorted(zones), lo, hi, rows)


def _rebuilt(previous: Schedule, digest: str, raw: bytes, windows_path: Path, now: datetime) -> Schedule | None:
    """The schedule of the edited file `raw`: the rows of the tables `previous` compiled, as
    they are (same code, same zone data, same horizon), taken from it; only an edited or added
    table validated and asked for its occurrences. None when anything is not that simple (a
    table that does not validate, a repeated name, a calendar, a new zone, a horizon half
    gone): the schedule is then built whole."""
    if not previous.answers(now) or now.timestamp() >= previous.lo + HORIZON.total_seconds() / 2:
        return None
    known = {source: row for row, source in enumerate(previous.sources) if source}
    found = _sources(raw, lambda digest: digest not in known)  # only the edited tables kept
    if found is None:
        return None
    rows: list[_Row] = []
    for index, (source, table) in enumerate(found):
        if table is None:
            row = known[source]
            lo, hi = previous.offsets[row], previous.offsets[row + 1]
            rows.append((previous.row(row), previous.tables[row], previous.leads[row], source,
                         list(previous.starts[lo:hi]), list(previous.ends[lo:hi]), None))
            continue
        try:
            window = Window.parse(table, path=windows_path, index=index)
        except InvalidWindow:
            return None
        if window.exclude_calendar is not None or (window.cron is not None and window.timezone not in previous.zones):
            return None
        rows.append(_row(window, source, previous.lo, previous.hi))
    if len({row[0].name for row in rows}) != len(rows):
        return None
    return _assembled(digest, previous.basis, list(previous.zones), previous.lo, previous.hi, rows)


def _table(window: Window) -> str:
    """The window's table as `windows.toml` would hold it, as compact JSON (instants and dates
    as ISO-8601 text, which validation reads back as the same values)."""
    table = {key: (value.isoformat() if isinstance(value, datetime) else
                   [day.isoformat() for day in value] if key == "exclude" else value)
             for key, value in window.to_toml().items()}
    return json.dumps(table, separators=(",", ":"))


def dumps(schedule: Schedule) -> bytes:
    """A header line, then one compact JSON line per column."""
    header = {"format": _FORMAT, "digest": schedule.digest, "basis": schedule.basis, "zones": list(schedule.zones),
              "lo": schedule.lo, "hi": schedule.hi, "count": len(schedule)}
    lines = [header, *(list(getattr(schedule, name)) for name in _COLUMNS[:-1]), schedule.tables.values()]
    return b"\n".join(json.dumps(line, separators=(",", ":")).encode("utf-8") for line in lines)


def loads(data: list[bytes | None]) -> Schedule | None:
    """The schedule in `data` (the file's lines), or None when it was not computed by this code
    with today's zone data (its `digest` says which bytes of the windows file it is of).
    Raises `ValueError` (or `TypeError`, `KeyError`) for a damaged one."""
    header = json.loads(data[0] or b"null")
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        return None
    zones = header["zones"]
    if type(zones) is not list or not all(type(z) is str for z in zones):
        raise ValueError("zones is not a list of names")
    basis = _basis(_zones(zones))
    if header.get("basis") != basis or type(header.get("digest")) is not str:
        return None
    if len(data) != 1 + len(_COLUMNS):
        raise ValueError("wrong number of columns")
    columns = {name: json.loads(line or b"null") for name, line in zip(_COLUMNS[:-1], data[1:], strict=False)}
    count, total = header["count"], len(columns["starts"])
    offsets, starts, ends = columns["offsets"], columns["starts"], columns["ends"]
    if type(count) is not int or any(len(columns[name]) != count for name in _PER_ROW) or len(offsets) != count + 1 \
            or len(ends) != total or offsets[0] != 0 or offsets[-1] != total:
        raise ValueError("columns of the wrong lengths")
    if not all(type(v) is int for v in (*starts, *ends, *offsets, *columns["leads"], header["lo"], header["hi"])):
        raise ValueError("a start, an end or an offset is not an integer")
    if any(a > b for a, b in itertools.pairwise(offsets)) or any(
            starts[i] >= starts[i + 1] or ends[i] > ends[i + 1]
            for lo, hi in itertools.pairwise(offsets) for i in range(lo, hi - 1)):
        raise ValueError("starts (or ends) not ascending per row")
    texts = ("names", "scopes", "timezones", "schedules", "durations", "sources")
    if not all(type(v) is str for name in texts for v in columns[name]) \
            or not all(type(v) is str or v is None for v in columns["drains"]) \
            or not all(type(v) is bool for v in columns["enabled"]):
        raise ValueError("a row of the wrong type")
    for name in ("timezones", "durations", "drains"):
        columns[name] = [sys.intern(v) if v is not None else None for v in columns[name]]
    c = columns
    return Schedule(header["digest"], basis, zones, header["lo"], header["hi"], c["names"], c["scopes"], c["enabled"],
                    c["timezones"], c["schedules"], c["durations"], c["drains"], c["leads"], c["sources"],
                    offsets, starts, ends, Tables(line=data[-1], count=count))


def load(windows_path: Path, raw: bytes, validate: Callable[[], Sequence[Window]], now: datetime,
         fresh_for: timedelta = HORIZON) -> Schedule | None:
    """The schedule of the windows file `windows_path` (whose bytes are `raw`) answering at
    `now`: read from beside the file when it is there, of these bytes, covers `now` and passes
    the ownership rule; else the one there with its unchanged rows reused (`_rebuilt`), else
    built from `validate()` (the file's windows; only called then); written there by whichever
    process builds it first. One built more than `fresh_for` ago is built again (the daemon
    does so at `REFRESH`, before an operator's command finds the horizon gone). None when the
    file has no schedule (calendars)."""
    path = schedule_path(windows_path)
    digest = hashlib.sha256(raw).hexdigest()
    lines = compiled._lines(path)
    found = None
    if lines:
        try:
            found = loads(lines)
        except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
            log.warning("windows schedule %s ignored and built again: %s", printable(path), printable(str(exc)))
        if found is not None and found.digest == digest and found.answers(now) \
                and now.timestamp() < found.lo + fresh_for.total_seconds():
            return found
    built = _rebuilt(found, digest, raw, windows_path, now) if found is not None and found.digest != digest else None
    if built is None:
        built = build(digest, validate(), now, raw)
    if built is not None:
        try:
            if compiled._directory_problem(path.parent) is None:
                atomic_write(path, dumps(built), durable=False)
        except (OSError, StoreError) as exc:
            log.debug("windows schedule %s not written: %s", path, exc)
    return built
