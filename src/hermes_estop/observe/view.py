"""What the observability endpoints show, built ONCE per request: `Observer.view()` takes the
status document (`status.fleet_status`: this process's holds and every other scope's, one read
through the fleet), the windows and the ledger, and returns a `FleetView` that /metrics,
/api/status, the status page and the terminal timeline all render. Nothing here writes.

Why the caches: occurrences are pure functions of a window and an instant (croniter under the
DST rule), but a week of them for 1,000 windows costs far more than a scrape may.
- Each window's occurrences are taken over a horizon a day longer than asked (from the file's
  compiled schedule, `windows.schedule`, as far as it answers; croniter past it) and reused
  until `now` leaves it or `windows.toml` changes (its identity: inode, size, mtime).
- Each window's part of the timeline (a `Slice`: its bars, and the SVG the page draws for them)
  is reused while nothing it shows changed: the same timeline origin (`now` to the minute), the
  same first and last occurrence in range, the same one covering now, the same ledger states.
- The ledger is parsed again only when its `version()` changed (the file ledger: when
  `windows-state.json` did).
So a request costs a bisection per window, not a croniter run or a re-render. The values a view
is made of are `fleetview`'s; this module is the one job of building them, caches included.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import Reading
from hermes_estop.model.homes import FLEET
from hermes_estop.model.text import one_line
from hermes_estop.observe.fleetview import Bar, FleetView, ScopeLane, Slice, WindowState
from hermes_estop.observe.status import FleetStatus, fleet_status
from hermes_estop.process.estop import Estop
from hermes_estop.windows.ledger import RELEASED, SKIPPED, open_ledger
from hermes_estop.windows.occurrences import occurrences
from hermes_estop.windows.schedule import Schedule, load as load_schedule
from hermes_estop.windows.windows_file import WindowsFile

if TYPE_CHECKING:
    from hermes_estop.windows.ledger import LedgerEntry
    from hermes_estop.windows.model import Occurrence, Window

# the parts of a view are re-exported: renderers have always imported them from here
__all__ = ["DEFAULT_DAYS", "MAX_DAYS", "Bar", "FleetView", "Observer", "ScopeLane", "Slice", "WindowState"]

DEFAULT_DAYS = 7
MAX_DAYS = 31
#: how much longer than asked the cached occurrences reach (how long they stay reusable)
_SLACK = timedelta(days=1)
_US = timedelta(microseconds=1)
#: "no change ahead", in microseconds since the epoch
_NEVER = 2**63
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: the timeline's origin is `now` to this step, so a window's drawing is reusable within it
ORIGIN_STEP = timedelta(minutes=1)


@dataclass
class _Cached:
    """One window's occurrences starting in `[since, until)`, `since` at least one duration
    before the `now` they were computed for (so the ones covering it are there)."""

    since: int  # microseconds since the epoch (exact: the half-open tests stay exact)
    until: int
    duration: int
    lead: int  # the drain lead: an occurrence covers now from `start - lead`
    occurrences: list[Occurrence]
    starts: list[int]
    keys: list[str]
    after: datetime | None  # the first start at or after `until` (None: none)
    #: per `bars`: (key, valid from, valid until, range end limit, state, slice): the window's
    #: figures, reused while `now` stays in [from, until) and the range's end at most the limit
    figures: dict[bool, tuple[Any, ...]] = field(default_factory=dict)


class Observer:
    """Builds `FleetView`s for one fleet; safe to call from several request threads."""

    def __init__(self, estop: Estop, *, is_leader: Callable[[], bool] | None = None) -> None:
        self.estop = estop
        self.fleet = estop.fleet
        self.is_leader = is_leader
        self.windows_file = WindowsFile(self.fleet.root)
        self._ledger = open_ledger(self.fleet)
        self._lock = threading.Lock()
        self._identity: tuple[int, ...] | bool | None = False  # False: never loaded
        self._windows: list[Window] = []
        #: the compiled schedule of the file `_windows` were read from (None: none, calendars)
        self._schedule: Schedule | None = None
        self._load_problem: str | None = None
        #: the windows whose table does not validate (label -> one line), from the last load
        self.failed_windows: dict[str, str] = {}
        #: calendar name -> why it runs on its last good copy (`Parsed.stale`)
        self.stale_calendars: dict[str, str] = {}
        self._cache: dict[str, _Cached] = {}
        self._slices: dict[str, Slice] = {}
        self._ledger_cache: tuple[Any, dict[str, LedgerEntry], dict[str, str]] | None = None
        #: the windows' figures of the last view, reused while nothing they show changed
        self._windows_view: dict[bool, tuple[Any, ...]] = {}
        #: the scopes the windows target, for the windows they were collected from
        self._targeted: tuple[list[Window], frozenset[str]] | None = None
        #: the SVG of each lane's bars with the slices it was drawn from (svg.py reuses it)
        self.fragments: dict[str, tuple[tuple[int, ...], tuple[Slice, ...], str]] = {}
        #: skipped occurrence keys seen so far, and the count per window (a counter: it only grows)
        #: of the skips recorded since this observer started (the README: "since this process started")
        self.started = estop.clock()
        self._skipped_seen: set[str] = set()
        self.skipped_total: dict[str, int] = {}
        #: bumped whenever `skipped_total` changes (a cache key for the metrics)
        self.skipped_version = 0

    # -- inputs ------------------------------------------------------------------------------

    def load_windows(self) -> tuple[list[Window], str | None, Any]:
        """The windows of `windows.toml`, parsed again only when the file changed; on a file
        that does not validate, the last good windows and the one-line problem; and the
        identity of the file they came from."""
        try:
            identity = self.windows_file.identity()
        except (EstopError, OSError) as exc:
            return self._windows, one_line(exc), None
        with self._lock:
            if identity == self._identity:
                return self._windows, self._load_problem, identity
        compiled = None
        try:
            raw = self.windows_file.read()
            parsed = self.windows_file.parse_each(raw)
            windows, problem = parsed.windows, None
            failed = {f.window or "?": one_line(f) for f in parsed.failures}
            stale = {name: one_line(line) for name, line in parsed.stale.items()}
            if not failed and not parsed.sources:
                compiled = self._compiled(raw, windows)
        except (EstopError, OSError, ValueError) as exc:
            windows, problem, failed, stale = self._windows, one_line(exc), {}, self.stale_calendars
        if failed and self._identity is not False:
            windows = self._windows  # shown as they last validated (the banner says so)
        with self._lock:
            self.failed_windows = failed
            self.stale_calendars = stale
            if problem is None and (not failed or self._identity is False):
                self._windows = windows
                self._schedule = compiled
                self._cache = {}
                self._slices = {}
            self._identity = identity
            self._load_problem = problem
        return windows, problem, identity

    def _compiled(self, raw: bytes, windows: list[Window]) -> Schedule | None:
        """The compiled schedule of the windows file read (`windows` validated from `raw`), or
        None: an accelerator, never a reason a view fails."""
        try:
            return load_schedule(self.windows_file.path, raw, windows, self.estop.clock())
        except (EstopError, OSError, ValueError):
            return None

    def _ledger_entries(self) -> tuple[dict[str, LedgerEntry], dict[str, str], str | None]:
        """The ledger's entries and, among them, the skipped and released ones (key -> state);
        the file ledger is parsed again only when its file changed."""
        try:
            identity = self._ledger.records.version()
        except OSError as exc:
            return {}, {}, f"windows ledger: {one_line(exc)}"
        if identity is not None:
            cached = self._ledger_cache
            if cached is not None and cached[0] == identity:
                return cached[1], cached[2], None
        try:
            entries = self._ledger.load()
        except Exception as exc:  # noqa: BLE001 - a status page shows a broken ledger, never dies of it
            return {}, {}, f"windows ledger: {one_line(exc)}"
        special = {key: e.state for key, e in entries.items() if e.state in (SKIPPED, RELEASED)}
        if identity is not None:
            self._ledger_cache = (identity, entries, special)
        return entries, special, None

    def _occurrences(self, window: Window, now: int, until: int) -> _Cached:
        """The window's occurrences around `[now, until)` (microseconds since the epoch)."""
        cached = self._cache.get(window.name)
        if cached is not None and cached.since <= now - cached.duration and until <= cached.until:
            return cached

        duration = window.duration // _US
        since = now - duration
        horizon = until + _SLACK // _US
        found: list[Occurrence] = []
        after = None
        for occurrence in self._following(window, _EPOCH + timedelta(microseconds=now)):
            if _micros(occurrence.start) >= horizon:
                after = occurrence.start
                break
            found.append(occurrence)
        lead = (window.drain or timedelta(0)) // _US
        cached = _Cached(since, horizon, duration, lead, found, [_micros(o.start) for o in found],
                         [o.key for o in found], after)
        with self._lock:
            self._cache[window.name] = cached
        return cached

    def _following(self, window: Window, now: datetime) -> Iterator[Occurrence]:
        """The window's occurrences from one duration before `now` (those that have not ended at
        `now` at least, in order): from the compiled schedule when it answers `now`."""
        schedule = self._schedule
        row = schedule.row_of(window.name) if schedule is not None and schedule.answers(now) else None
        if schedule is None or row is None:
            return occurrences(window, now - window.duration)
        return schedule.not_ended(row, now)

    def _scopes(self, windows: list[Window], status: FleetStatus) -> list[str]:
        """The lanes: this process's locations, every scope of the fleet (`Fleet.scopes`) and
        every scope a window targets (fleet first, then by name)."""
        scopes = {loc.scope for loc in status.mine_locations}
        scopes.update(loc.scope for loc in status.scopes)
        targeted = self._targeted
        if targeted is None or targeted[0] is not windows:
            targeted = self._targeted = (windows, frozenset(w.scope for w in windows))
        scopes.update(targeted[1])
        return sorted(scopes, key=lambda s: (s != FLEET, s.startswith("home:"), s))

    # -- the view ----------------------------------------------------------------------------

    def view(self, days: int = DEFAULT_DAYS, *, bars: bool = True, sections: bool = False,
             text: bool = False) -> FleetView:
        """Everything at one `now` (the clock, read once): the status document (with its windows
        and in-flight sections when `sections`: /api/status; with their text lines too when `text`:
        /api/v1/status), the timeline of `[now, now + days)`
        (without its bars when `bars` is False: /metrics needs none) and each window's state."""
        days = max(1, min(int(days), MAX_DAYS))
        status = fleet_status(self.estop, sections=sections, as_json=True if sections and not text else None)
        snapshot = status.mine
        now = status.now
        origin = now - (now - now.replace(second=0, microsecond=0)) % ORIGIN_STEP
        end = origin + timedelta(days=days)
        windows, load_problem, identity = self.load_windows()
        entries, special, ledger_problem = self._ledger_entries()
        failed = self.failed_windows
        problems = self._problems(load_problem, ledger_problem)

        now_us, end_us = _micros(now), _micros(end)
        key = (identity, id(windows), origin, days, frozenset(special.items()))
        reuse = self._windows_view.get(bars)
        if reuse is not None and reuse[0] == key and reuse[1] <= now_us and (reuse[2] is None or now_us < reuse[2]):
            states, by_scope, soonest = reuse[3], reuse[4], reuse[2]
        else:
            states, slices, soonest = self._window_figures(windows, now_us, end_us, origin, days, bars, special)
            by_scope = {scope: (tuple(pieces), sum(len(piece.bars) for piece in pieces))
                        for scope, pieces in slices.items()}
            # reusable until the next start or end: nothing the windows show changes before it
            self._windows_view[bars] = (key, now_us, soonest, states, by_scope, windows, special)
        stable_until = _EPOCH + timedelta(microseconds=soonest) if soonest is not None else None
        self._count_skipped(special, entries)
        scopes = self._scopes(windows, status)
        # the location's own reading (its full hold, with its scoped holds in `scoped`), one per scope
        readings: dict[str, Reading] = {r.location.scope: r for r in (*status.mine.readings, *status.others)
                                        if r.present or r.scoped}
        lanes = []
        for scope in scopes:
            reading = readings.get(scope)
            lane_slices, count = by_scope.get(scope, ((), 0))
            lanes.append(ScopeLane(scope, reading, lane_slices, count))
        return FleetView(now=now, start=origin, end=end, snapshot=snapshot, lanes=tuple(lanes),
                         windows=tuple(states), problems=problems, leader=self._leader(),
                         store_reachable=self.fleet.reachable(), stable_until=stable_until, status=status,
                         extra={"store": self.fleet.store_name, "windows_identity": identity,
                                "fragments": self.fragments, "windows_valid": load_problem is None and not failed,
                                "windows_failed": dict(failed), "windows_last_good": bool(load_problem or failed),
                                "calendars_stale": dict(self.stale_calendars)})

    def _problems(self, load_problem: str | None, ledger_problem: str | None) -> tuple[str, ...]:
        """What the page lists as wrong: windows.toml, the windows that failed, stale calendars, the ledger."""
        return tuple(p for p in (load_problem and f"windows.toml: {load_problem}",
                                 *(f"windows.toml: {line}" for line in self.failed_windows.values()),
                                 *(f"{line} (its occurrences hold as that copy says)"
                                   for line in self.stale_calendars.values()), ledger_problem) if p)

    def _leader(self) -> bool | None:
        """Whether this process's scheduler is the elected one; None without a scheduler."""
        if self.is_leader is None:
            return None
        try:
            return bool(self.is_leader())
        except Exception:  # noqa: BLE001 - a metric never raises
            return False

    def _figure(self, window: Window, cached: _Cached, now_us: int, end_us: int, anchor: datetime, days: int,
                bars: bool, special: dict[str, str], fig_key: Any) -> tuple[Any, ...]:
        """One window's state at `now_us` and its slice (when `bars`), with how long they
        hold: until the next start or the end of the occurrence covering now, and while the
        range's end has not reached the next start beyond it."""
        starts = cached.starts
        lead = cached.lead
        first = bisect_right(starts, now_us - cached.duration)  # the first that has not ended
        upto = bisect_right(starts, now_us + lead, lo=first)  # [first, upto) cover now, drain lead included
        following = cached.occurrences[upto].start if upto < len(starts) else cached.after
        changes = starts[upto] - lead if upto < len(starts) else (_micros(cached.after) - lead if cached.after else _NEVER)
        if first < upto:
            changes = min(changes, starts[first] + cached.duration)
        enabled = window.enabled
        state = WindowState(window, first < upto and enabled, following if enabled else None)
        if not bars:
            return (fig_key, now_us, changes, _NEVER, state, None)
        last = bisect_left(starts, end_us, lo=upto)
        limit = starts[last] if last < len(starts) else (_micros(cached.after) if cached.after else _NEVER)
        piece = self._slice(window, cached, first, upto, last, anchor, days, special)
        return (fig_key, now_us, changes, limit, state, piece)

    def _window_figures(self, windows: list[Window], now_us: int, end_us: int, origin: datetime, days: int,
                        bars: bool, special: dict[str, str]
                        ) -> tuple[list[WindowState], dict[str, list[Slice]], int | None]:
        """Each window's state at `now_us`, its slice of the timeline (when `bars`), and the
        soonest instant (microseconds) at which any of that changes."""
        slices: dict[str, list[Slice]] = {}
        states = []
        soonest: int | None = None
        anchor = origin.replace(hour=0, minute=0, second=0, microsecond=0)
        special_key = frozenset(special.items())
        fig_key = (anchor, days, special_key)
        for window in windows:
            cached = self._occurrences(window, now_us, end_us)
            fig = cached.figures.get(bars)
            if fig is None or fig[0] != fig_key or not fig[1] <= now_us < fig[2] or end_us > fig[3]:
                fig = self._figure(window, cached, now_us, end_us, anchor, days, bars, special, fig_key)
                cached.figures[bars] = fig
            if fig[2] != _NEVER and (soonest is None or fig[2] < soonest):
                soonest = fig[2]
            states.append(fig[4])
            if bars:
                slices.setdefault(window.scope, []).append(fig[5])
        return states, slices, soonest

    def _slice(self, window: Window, cached: _Cached, first: int, upto: int, last: int, anchor: datetime,
               days: int, special: dict[str, str]) -> Slice:
        """The window's bars in `[first, last)`, reused from the previous request when nothing
        they show changed."""
        marks = tuple(special.get(k) for k in cached.keys[first:last]) if special else ()
        # `anchor`: the drawing is in minutes since the UTC midnight before the origin
        # (svg.anchor_of), so it depends on the day, not on the minute
        signature = (anchor, days, cached.starts[first] if first < last else None, last - first, upto - first,
                     window.enabled, marks)
        previous = self._slices.get(window.name)
        if previous is not None and previous.signature == signature and previous.window is window:
            return previous
        made = []
        for index in range(first, last):
            occurrence = cached.occurrences[index]
            mark = special.get(cached.keys[index]) if special else None
            if not window.enabled:
                state = "disabled"
            elif mark is not None:
                state = mark
            else:
                state = "active" if index < upto else "upcoming"
            made.append(Bar(window.name, window.scope, occurrence.start, occurrence.end, state, cached.keys[index],
                            occurrence.arm_at if occurrence.lead else None))
        made_slice = Slice(window, tuple(made), signature)
        with self._lock:
            self._slices[window.name] = made_slice
        return made_slice

    def _count_skipped(self, special: dict[str, str], entries: dict[str, LedgerEntry]) -> None:
        skipped = {key for key, state in special.items() if state == SKIPPED}
        with self._lock:
            new = skipped - self._skipped_seen
            for key in new:
                recorded = entries[key].updated_at
                if recorded is not None and recorded < self.started:
                    continue  # skipped before this process started (an older ledger's: no time)
                window = entries[key].window
                self.skipped_total[window] = self.skipped_total.get(window, 0) + 1
            if new:
                self.skipped_version += 1
            self._skipped_seen = skipped


def _micros(when: datetime) -> int:
    """`when` (aware) as whole microseconds since the epoch: exact, unlike a float timestamp."""
    return (when - _EPOCH) // _US
