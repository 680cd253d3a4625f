"""The scheduler's `Timeline` answered from the compiled schedule of the windows file (issue 35).

A decision (`reconcile.plan_scope`, `reconcile.chain_end`, `OccurrenceIndex.advance`) asks a
`Timeline` for occurrences; `occurrences.EXACT` computes them with croniter, a
`ScheduleTimeline` reads them off one `schedule.Schedule` by bisection and asks `EXACT` whatever
the schedule does not answer: an instant outside its horizon, a window that is not one of its
rows. The two give the same answers; the schedule only does it without the cron arithmetic, so
a held chain is walked afresh on every pass instead of remembered across passes.

`ScheduleKeeper` holds the schedule of exactly the bytes the scheduler's windows were validated
from, built (or read from beside the file) in a thread of its own so a pass never waits for it:
until it is ready, and for windows that are not the file's own (the guard putting back a version
it acted on, a table that does not validate, calendars), the pass uses `EXACT`.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import threading
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from hermes_estop.model.selector import Selector
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import EXACT, Around, Occurrence, Timeline, Windows, merge_armed
from hermes_estop.windows.schedule import REFRESH, Schedule, instant_of, kept_schedule, load, micros

__all__ = ["ScheduleKeeper", "ScheduleTimeline"]

log = logging.getLogger("hermes_estop.windows")
#: the rows' `Window`s a timeline keeps built at most (the oldest built dropped first)
WINDOWS_KEPT = 1024


class ScheduleTimeline:
    """A `Timeline` read off `schedule` (the schedule of the very bytes the asked windows were
    validated from: `ScheduleKeeper` sees to that), `EXACT` where it does not answer."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        #: window name -> its row (`Schedule.row_of` searches the names)
        self._rows = {name: row for row, name in enumerate(schedule.names)}
        #: every occurrence of the schedule (its index in `starts`) in arm order, and its arm
        #: instant in epoch microseconds (`armed_after`): two flat arrays, 16 bytes an occurrence
        offsets, leads = schedule.offsets, schedule.leads
        arm = array("q", (start - leads[row] for row in range(len(schedule.names))
                          for start in schedule.starts[offsets[row]:offsets[row + 1]]))
        self._armed = array("q", sorted(range(len(arm)), key=arm.__getitem__))
        self._arms = array("q", (arm[i] for i in self._armed))
        #: arms before this instant are all in `_arms`: their starts lie before the horizon's end
        self._whole_until = schedule.hi - max(schedule.leads, default=0)
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
        return self._rows.get(window.name)

    def around(self, window: Window, now: datetime) -> Around:
        row = self._row(window)
        found = self._covering(row, now) if row is not None else None
        if found is None:
            return EXACT.around(window, now)
        return found, self.first_armed(window, now)

    def around_row(self, row: int, now: datetime) -> Around:
        """`around` of the window of `row`, its `Window` built only when the schedule does not
        answer (an instant near or past the horizon's end)."""
        found = self._covering(row, now)
        if found is None:
            return EXACT.around(self.window(row), now)
        upcoming = self.schedule.next_start(row, now + timedelta(microseconds=self.schedule.leads[row]))
        if isinstance(upcoming, bool):
            return found, EXACT.first_armed(self.window(row), now)
        return found, upcoming

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
        given = Windows.of(windows)
        known = given.lane_of(self)
        if known is not None:
            return known
        lane: dict[int, int] = {}
        rows = self._rows
        for order, name in enumerate(given.names()):  # `_row`, inlined: a lane may have 10,000 windows
            row = rows.get(name)
            if row is None:
                return None
            lane[row] = order
        return lane

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


class ScheduleKeeper:
    """The compiled schedule of the windows file the scheduler acts on, and the timeline of it.

    `want(raw, windows, now)` builds the schedule of the bytes `raw` (validated as `windows`)
    in a thread (one at a time; again every `REFRESH` for the same bytes); `timeline(source)`
    is its `ScheduleTimeline` when `source` is exactly those bytes, else `EXACT`."""

    def __init__(self, windows_path: Path) -> None:
        self.windows_path = windows_path
        #: (the bytes, the timeline of their schedule), replaced whole by the building thread
        self._ready: tuple[bytes, ScheduleTimeline] | None = None
        #: (the bytes, when) the last build was started for
        self._asked: tuple[bytes, datetime] | None = None
        self._thread: threading.Thread | None = None
        #: the bytes `read_kept` last looked for a kept schedule of
        self._read: bytes | None = None
        #: the bytes `compile` last compiled (or found not simple enough to)
        self._compiled: bytes | None = None

    def timeline(self, source: bytes | None, otherwise: Timeline = EXACT) -> Timeline:
        """The schedule's timeline when it is of exactly the bytes `source`, else `otherwise`
        (an exact one: windows that are not one version of the file's own, a table that does
        not validate, calendars beside them, are walked off `OccurrenceIndex`'s answers)."""
        ready = self._ready
        if source is not None and ready is not None and ready[0] == source:
            return ready[1]
        return otherwise

    def read_kept(self, raw: bytes, now: datetime) -> None:
        """Take the schedule kept for exactly the bytes `raw` when one answers at `now`, once
        per version of the file (`schedule.kept_schedule`: a read, never a build), so the first
        pass of a `hermes serve` on an unchanged file asks croniter nothing. A schedule carrying
        tables bound to a calendar (`Schedule.bound`) is never taken: its rows are not all the
        windows (`_build` writes it for the operators' commands, and does not take it either)."""
        ready = self._ready
        if self._read == raw or (ready is not None and ready[0] == raw):
            return
        self._read = raw
        found = kept_schedule(self.windows_path, raw, now)
        if found is not None and self._take(raw, found) and (self._asked is None or self._asked[0] != raw):
            self._asked = (raw, instant_of(found.lo))  # built then: `want` refreshes it at `REFRESH`

    def compile(self, raw: bytes, now: datetime) -> None:
        """Compile the schedule of the bytes `raw` now, as an operator's command does
        (`schedule.load`: each table validated on its own, an unchanged table's row taken from
        the schedule kept for the file before the edit), once per version of the file; never by
        validating the file whole: a file that is not that simple (a table that fails, a name
        repeated, calendars) is left to the pass, which validates it whole and says what is
        wrong. Why: after an edit, validating 10,000 windows whole was most of the pass."""
        if self._compiled == raw:
            return
        self._compiled = raw
        try:
            found = load(self.windows_path, raw, _validated_whole, now)
        except _NotCompiled:
            return
        except Exception as exc:  # noqa: BLE001 -- an accelerator never fails its caller
            log.warning("windows schedule of %s not built: %s", self.windows_path, exc)
            return
        if found is not None and self._take(raw, found):
            self._read = raw
            self._asked = (raw, now)

    def _take(self, raw: bytes, schedule: Schedule) -> bool:
        """Serve the passes from `schedule`, of the bytes `raw`; False for one carrying tables
        bound to a calendar (`Schedule.bound`), never taken: its rows are not all the windows."""
        if schedule.bound:
            return False
        self._ready = (raw, ScheduleTimeline(schedule))
        return True

    def windows(self, raw: bytes) -> Windows | None:
        """The windows of the schedule of exactly the bytes `raw` (one list per schedule), or
        None when there is none ready."""
        ready = self._ready
        return ready[1].windows() if ready is not None and ready[0] == raw else None

    def want(self, raw: bytes, windows: Sequence[Window], now: datetime) -> None:
        """Start building the schedule of `raw` unless one is being built, or it was built for
        these bytes less than `REFRESH` ago."""
        if self._thread is not None and self._thread.is_alive():
            return
        asked = self._asked
        if asked is not None and asked[0] == raw and asked[1] <= now < asked[1] + REFRESH:
            return
        self._asked = (raw, now)
        listed = Windows.of(windows)
        if listed.timeline is None:
            # not kept while its successor is built (the passes meanwhile are exact): with it, a
            # build held three schedules at once, a peak the allocator keeps (docs/performance.md)
            self._ready = None
        self._thread = threading.Thread(target=self._build, args=(raw, listed, now), name="windows-schedule")
        self._thread.start()

    def join(self) -> None:
        """Wait for the schedule being built, if any."""
        if self._thread is not None:
            self._thread.join()

    def _build(self, raw: bytes, windows: Windows, now: datetime) -> None:
        """Not a daemon thread: `serve --once` writes the schedule before it exits. A failure is
        logged, never raised (the schedule is an accelerator). Windows given as a schedule's
        rows are not asked (each row built would stay cached in the schedule being replaced,
        a peak the allocator keeps): the bytes are compiled table by table, as `compile` does."""
        rows = windows.timeline is not None
        try:
            schedule = load(self.windows_path, raw, lambda: windows, now, REFRESH, validated=not rows)
        except Exception as exc:  # noqa: BLE001 -- an accelerator never fails its caller
            log.warning("windows schedule of %s not built: %s", self.windows_path, exc)
            return
        if schedule is not None and schedule.digest == hashlib.sha256(raw).hexdigest() \
                and (self._asked is None or self._asked[0] == raw):  # not over a later version `compile` took
            self._take(raw, schedule)


class _NotCompiled(Exception):
    """The file is not compiled table by table: the pass validates it whole."""


def _validated_whole() -> Sequence[Window]:
    """`ScheduleKeeper.compile`'s `validate`: never the whole file (the pass does that)."""
    raise _NotCompiled
