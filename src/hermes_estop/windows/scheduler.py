"""The window scheduler: one reconciliation pass (`tick(now) -> TickReport`, or `plan(now)` for a
dry run: the same body, writing nothing) carries out `reconcile.plan_scope` at every scope, and
APScheduler 3 date jobs (`wakeups`) wake it at the instants the occurrences say. A thin loop
around it (`run(stop)`) also reconciles every `poll_interval` seconds, which is how edits of
`windows.toml` are picked up without a restart, and what makes a missed wake-up harmless.

A read of `windows.toml` that takes hold time away is acted on only once confirmed (`guard`):
until then what it takes away is kept as it was, so an editor re-saving the file in place never
frees the fleet, while a window it adds arms at once. Before every arm an intent is
appended to the audit trail (`arm_intents`), so an arm the ledger missed is remembered after a crash.

Jobs run on a one-thread executor and every pass holds the service's lock, so decisions never
interleave within a process; across processes the store's fenced writes and the ledger's lock do.
High availability plugs in through `is_leader`: it is asked before every write (hold or ledger);
a scheduler that is not the leader plans, schedules its wake-ups and writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import EstopError, StoreError
from hermes_estop.model.hold import HoldState, Reading
from hermes_estop.model.homes import FLEET, validate_profile_name
from hermes_estop.model.timeutil import next_deadline
from hermes_estop.windows.actions import Actions, PassState, TickEvent, TickReport, note_event, planned_events
from hermes_estop.windows.ledger import ARMED, RETENTION, WITHDRAWN, LedgerEntry, OccurrenceLedger, open_ledger, recall
from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.occurrences import Occurrence, Windows, covering as covering_of
from hermes_estop.windows.plan import Arm, FileGuard, Retire, ScopePlan, Skip, idle, plan_scope
from hermes_estop.windows.policy_check import against_policy
from hermes_estop.windows.schedule import Schedules
from hermes_estop.windows.wakeups import JOB_PREFIX, Scheduler, Wakeups, due_wakeups, make_scheduler, wakeups_for
from hermes_estop.windows.windows_file import FileSnapshot, Parsed, WindowsFile

__all__ = ["JOB_PREFIX", "POLL_INTERVAL", "WEAKEN_AFTER", "ProblemLog", "TickEvent", "TickReport", "WindowService"]

logger = logging.getLogger("hermes_estop.windows")

POLL_INTERVAL = 5.0
#: The shortest time a read of `windows.toml` that weakens anything (retires, shortens, withdraws)
#: must stay the same file, over at least two reads, before it is acted on, whatever the poll
#: interval and whatever the content looks like: an editor's save in place can stall for seconds
#: between its truncate and its last write, and any part of it may be valid TOML. A hold lifting
#: a few seconds late is the safe side; an operator who wants the fleet back at once resumes it.
WEAKEN_AFTER = 5.0
#: a pass with nothing else to commit prunes the ledger only once its oldest entry is this far
#: past the retention (a commit rewrites the whole file ledger: a fleet whose entries end every
#: few minutes rewrote it on every pass just to drop them, issue 24); any other commit prunes too
PRUNE_SLACK = timedelta(hours=1)
#: how many of the newest audit events `recall` reads (an arm it misses is armed again: held)
RECALL_DEPTH = 5000
_MAX_ROUNDS = 3
#: the windows to act on, the ledger, the bytes the windows are exactly the windows of (None:
#: a mix the guard put together, a table that failed, calendars: no schedule stands for them),
#: the versions of windows an unconfirmed edit moves to another scope (`GuardVerdict.moving`:
#: held there at once, beside the versions last acted on at their old scopes), and the file as
#: read when it validates whole, its bytes and windows (what the pass leaves a schedule of for
#: the operators' commands, `Schedules.keep`, confirmed or not: never another version's)
_Inputs = tuple[Sequence[Window], dict[str, LedgerEntry], bytes | None, Sequence[Window],
                tuple[bytes, Sequence[Window]] | None]
#: one read: the file's bytes, its windows (rows of its compiled schedule, or validated), the
#: validation's outcome (empty for rows: a schedule is only ever written for a file that
#: validates whole), and the ledger
_Read = tuple[FileSnapshot, Sequence[Window], Parsed, dict[str, LedgerEntry]]
#: window name -> its occurrences covering the pass's `now`
Covering = dict[str, list[Occurrence]]


def _always() -> bool:
    return True


class ProblemLog:
    """The problems standing now (kind -> message) of one service, on `logger`."""

    def __init__(self, logger: logging.Logger, *, quiet: bool = False) -> None:
        self.logger = logger
        self._standing: dict[str, str] = {}
        #: ERROR when a problem starts, INFO when it clears; `quiet`: both at DEBUG (another
        #: service beside this one logs the same problem: one problem, one line)
        self._started, self._ended = (logging.DEBUG, logging.DEBUG) if quiet else (logging.ERROR, logging.INFO)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._standing))

    def __contains__(self, kind: object) -> bool:
        return kind in self._standing

    def start(self, kind: str, message: str) -> None:
        """Log `message` as an ERROR when `kind` starts; while it lasts, a changed wording (an
        editor's torn saves fail at a new position each time) only at DEBUG."""
        if kind in self._standing:
            if self._standing[kind] != message:
                self._standing[kind] = message
                self.logger.debug("%s", message)
            return
        self._standing[kind] = message
        self.logger.log(self._started, "%s", message)

    def clear(self, kind: str, message: str) -> None:
        """Log once, as INFO, that the problem `kind` is over (nothing when there was none)."""
        if self._standing.pop(kind, None) is not None:
            self.logger.log(self._ended, "%s", message)

    def only(self, prefix: str, standing: Iterable[str], message: str) -> None:
        """Clear every problem of `prefix` whose rest is not in `standing`; `message` is
        formatted with that rest."""
        keep = set(standing)
        for kind in self:
            if kind.startswith(prefix) and kind[len(prefix):] not in keep:
                self.clear(kind, message.format(kind[len(prefix):]))


class WindowService:
    """Arms and retires the holds of the maintenance windows of one fleet. Time comes from the
    fleet's clock (the database's on PostgreSQL) and from `monotonic` (pacing the loop)."""

    name = "windows"

    def __init__(
        self,
        fleet: Fleet,
        *,
        windows_file: WindowsFile | None = None,
        ledger: OccurrenceLedger | None = None,
        is_leader: Callable[[], bool] | None = None,
        scheduler: Scheduler | None = None,
        poll_interval: float = POLL_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.fleet = fleet
        self.clock = fleet.clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.windows_file = windows_file or WindowsFile(fleet.root)
        self.ledger = ledger or open_ledger(fleet)
        self.is_leader = is_leader or _always
        self.scheduler = scheduler
        self.poll_interval = float(poll_interval)
        self.guard = FileGuard(timedelta(seconds=max(self.poll_interval, WEAKEN_AFTER)))
        #: the compiled schedules of the file (the one holder: the window tasks share it)
        self.schedules = Schedules(self.windows_file.path)
        self.actions = Actions(fleet)
        self._lock = threading.RLock()
        self._logged: dict[str, object] = {}
        #: the problems standing now (kind -> message), each logged when it starts and clears
        self._problems = ProblemLog(logger)
        self._owns_scheduler = False
        #: the windows last grouped, and their groups (`_layout`)
        self._grouped: WindowGroups | None = None
        #: whether the windows were grouped anew since the last pass that acted (`_moved` then
        #: looks at every scope it visits: a window may have changed lanes anywhere)
        self._regrouped = True
        #: scopes with an old hold left to retire, or whose last look for moves failed
        self._unsettled: set[str] = set()
        #: the audit trail's newest events by scope, read at most once a pass (`_recalled`)
        self._trail: dict[str, list[AuditEvent]] | None = None

    def __repr__(self) -> str:
        return f"WindowService({self.windows_file.path})"

    # -- inputs ------------------------------------------------------------------------------

    def load_windows(self) -> list[Window]:
        """The windows of the file (validated once per content). Raises `InvalidWindow` or
        `StoreError`."""
        return self.windows_file.load()

    def check_file(self) -> None:
        """Raise `InvalidWindow` when the file does not read as a whole (not UTF-8, not TOML):
        `hermes serve --once` says so in one line, exit 2. Bytes with a trusted compiled
        schedule validated whole when it was built: not validated again."""
        raw = self.windows_file.snapshot().raw
        if self.schedules.rows(raw, self.clock()) is None:
            self.windows_file.parse_each(raw)

    def _schedule_rows(self, snapshot: FileSnapshot, empty_policy: bool, now: datetime) -> Windows | None:
        """The file's windows as the rows of its compiled schedule (`Schedules.rows`: held,
        kept for exactly these bytes, or compiled table by table after an edit) when the
        fleet's policy refuses nothing (else each window is checked against it); None:
        validate the file."""
        if snapshot.identity is None or not empty_policy:
            return None
        return self.schedules.rows(snapshot.raw, now)

    def _inputs(self, report: TickReport) -> _Inputs | None:
        """The windows and the ledger to act on, or None (the reason in `report`): a file that
        does not read or validate, or a read that takes away what cannot be kept (`guard`)."""
        read = self._read(report)
        if read is None:
            return None
        snapshot, windows, parsed, entries = read
        report.windows = len(windows)
        self._note_tables(parsed, report)
        identity = (snapshot.identity, parsed.digests) if parsed.digests else snapshot.identity
        verdict = self.guard.judge(identity, windows, entries, report.now, parsed.failing_names())
        own = not parsed.failures and not parsed.sources
        # the schedule worth keeping is the file's as it is (what every command reads), never
        # the version last confirmed: that would be written over it (issue 45)
        whole = (snapshot.raw, windows) if own else None
        if not verdict.trusted:
            report.pending = verdict.reason
            self._log_once("pending", verdict.reason, logging.WARNING, f"windows: {verdict.reason}")
            if verdict.windows is None:
                if whole is not None and not report.dry_run:  # nothing to act on: kept now
                    self.schedules.keep(*whole, report.now)
                return None
            return verdict.windows, entries, None, verdict.moving, whole
        if self._log_once("loaded", hash((snapshot.raw, parsed.digests)), logging.INFO if windows else logging.DEBUG,
                          f"windows: {len(windows)} loaded from {self.windows_file.path}"):
            self._logged.pop("pending", None)  # new content: the next unconfirmed read is news again
        return (verdict.windows if verdict.windows is not None else windows, entries, snapshot.raw if own else None, (),
                whole)

    def _read(self, report: TickReport) -> _Read | None:
        """The file's bytes, its windows within the policy (the rows of its compiled schedule
        when `_schedule_rows` has them, else validated), and the ledger; None (the error in
        `report`) when the file does not read or parse, or the ledger does not read."""
        try:
            snapshot = self.windows_file.snapshot()
            guard = self.fleet.policy
            policy = guard.policy()[0]
            rows = self._schedule_rows(snapshot, policy.empty, report.now)
            if rows is not None:
                parsed = Parsed([], [])
            else:
                parsed = against_policy(self.windows_file.parse_each(snapshot.raw), policy, guard.identity,
                                        self.windows_file.path)
            entries = self.ledger.load()
        except (InvalidWindow, StoreError) as exc:
            self.guard.interrupted()
            self._problem("error", f"{exc} (no window is armed or retired until it reads and parses again)")
            report.errors.append(str(exc))
            return None
        self._cleared("error", f"windows: {self.windows_file.path} reads and parses again")
        return snapshot, rows if rows is not None else parsed.windows, parsed, entries

    def _note_tables(self, parsed: Parsed, report: TickReport) -> None:
        """Report the tables that fail and the calendars read from a stale copy; each logged
        when it starts and when it clears."""
        report.failed = [str(failure) for failure in parsed.failures]
        failing = {f"failed:{failure.window}": str(failure) for failure in parsed.failures}
        for kind, line in failing.items():
            self._problem(kind, f"windows: {line} (this window holds as it was; the others proceed)")
        for kind in [k for k in self._problems if k.startswith("failed:") and k not in failing]:
            self._cleared(kind, f"windows: window {kind[len('failed:'):]} validates again (or was removed)")
        report.stale = dict(parsed.stale)
        for name, line in parsed.stale.items():
            self._problem(f"stale:{name}", f"windows: {line} (its occurrences hold as that copy says)")
        for kind in [k for k in self._problems if k.startswith("stale:") and k[len("stale:"):] not in parsed.stale]:
            self._cleared(kind, f"windows: calendar {kind[len('stale:'):]} reads again")

    def _problem(self, kind: str, message: str) -> None:
        self._problems.start(kind, message)

    def _cleared(self, kind: str, message: str) -> None:
        self._problems.clear(kind, message)

    def _log_once(self, kind: str, key: object, level: int, message: str) -> bool:
        """Log `message` unless the last one of `kind` had the same `key` (an editor re-saving
        the same content, or the same unconfirmed read, is logged once); True when logged."""
        if self._logged.get(kind) == key:
            return False
        self._logged[kind] = key
        logger.log(level, "%s", message)
        return True

    def _reading(self, scope: str, now: datetime) -> Reading:
        return self.fleet.read((self.fleet.location(scope),), now).readings[0]

    def _recalled(self, scope: str, covered: list[Occurrence], entries: dict[str, LedgerEntry]) -> dict[str, str]:
        """What the audit trail says was armed for the occurrences covering `now` that the
        ledger does not know (usually none: then the audit trail is not read)."""
        unknown = {o.key for o in covered} - entries.keys()
        if not unknown:
            return {}
        if self._trail is None:
            try:
                events = self.fleet.history(RECALL_DEPTH)[0]
            except (EstopError, OSError) as exc:
                logger.warning("windows: cannot read the audit trail (%s): arming as if nothing was armed", exc)
                return {}
            self._trail = {}
            for event in events:
                self._trail.setdefault(event.location, []).append(event)
        return recall(self._trail.get(scope, ()), scope, unknown)

    # -- deciding and acting -----------------------------------------------------------------

    def plan(self, now: datetime | None = None) -> tuple[TickReport, list[ScopePlan]]:
        """A dry run: what a tick at `now` would do, without writing anything."""
        return self._pass(now, dry_run=True)

    def tick(self, now: datetime | None = None) -> TickReport:
        """One reconciliation at `now` (default: the clock, read once): every scope's plan is
        carried out, the ledger committed, the wake-ups rescheduled."""
        return self._pass(now, dry_run=False)[0]

    def settle(self) -> TickReport:
        """`tick()` for a one-shot run (`hermes serve --once`): a read that takes a window away
        is confirmed by reading again once the confirmation period has passed, since no later
        pass will."""
        report = self.tick()
        if report.pending is not None and not report.errors:
            self.sleep(self.guard.pending_wait.total_seconds())
            report = self.tick()
        return report

    def _pass(self, now: datetime | None, *, dry_run: bool) -> tuple[TickReport, list[ScopePlan]]:
        with self._lock:
            report = TickReport(now=now or self.clock(), dry_run=dry_run)
            self._trail = None
            plans: list[ScopePlan] = []
            inputs = self._inputs(report)
            if inputs is None:
                return report, plans
            windows, entries, source, moving, whole = inputs
            report.leader = dry_run or self._may_write()
            # always planned from a schedule: rows are asked of their own, validated windows of
            # the file's bytes of its schedule, any other list of one compiled in memory
            listed = Windows.of(windows)
            timeline = listed.timeline or self.schedules.held(source) or self.schedules.of_windows(listed, report.now)
            state = PassState(report, entries, timeline=timeline)
            # the enabled windows' occurrences covering now, by window (only those with some),
            # read off the schedule's arm order: no question to every window (issue 24)
            covering = timeline.covering_now(listed, report.now)
            # an unconfirmed edit moving windows to other scopes: those versions' occurrences
            # are held there beside the old ones (names repeat: asked of each, a few windows)
            elsewhere = {w.name: found for w in moving if w.enabled and (found := covering_of(w, report.now))}
            if report.leader:
                layout = self._layout(windows)
                covered = layout.covered(covering)
                if moving:
                    layout = layout.beside(WindowGroups.of(moving), covered, elsewhere)
                    self._regrouped = True  # the next pass without them looks for moves everywhere
                for scope in self._scopes([*covering.values(), *elsewhere.values()], entries):
                    try:
                        plans.extend(self._reconcile_scope(scope, state, layout, covered))
                    except (EstopError, OSError) as exc:
                        state.error(f"scope {scope}: {exc}")
                if not dry_run:
                    self._commit(state)
                    self._regrouped = False
            report.active = sorted(o.key for found in (*covering.values(), *elsewhere.values()) for o in found)
            report.wakeups = due_wakeups(timeline, listed, covering, report.now)
            if not dry_run:
                self._schedule(report)
                next_wake = min(report.wakeups.values(), default=None)
                if whole is not None:  # once acted: the next operator command reads the schedule warm
                    self.schedules.keep(*whole, report.now, next_wake)
                self.schedules.refresh(report.now, next_wake)
            return report, plans

    def reconcile(self) -> TickReport:
        """`tick()` that never raises: what wake-up jobs and the poll loop call. Each pass is
        a DEBUG line with its duration (`hermes serve -v`): what a pass costs is what an
        operator with a large fleet needs to see to choose `--interval`."""
        try:
            started = time.perf_counter()  # a duration for the log, not a deadline: not the pacing clock
            report = self.tick()
            logger.debug("windows: pass at %s took %.1f ms: %d window(s), %d active, %d event(s)",
                         report.now.isoformat(), (time.perf_counter() - started) * 1e3, report.windows,
                         len(report.active), len(report.events))
            return report
        except Exception as exc:  # a wake-up must never take the scheduler down
            logger.exception("windows: reconciliation failed")
            report = TickReport(now=self.clock())
            report.errors.append(f"{type(exc).__name__}: {exc}")
            return report

    def _may_write(self) -> bool:
        try:
            return bool(self.is_leader())
        except Exception as exc:  # noqa: BLE001 (any failure: standby, never a writer by accident)
            logger.warning("windows: leadership check failed (%s): acting as standby", exc)
            return False

    def _layout(self, windows: Sequence[Window]) -> WindowGroups:
        """`windows` grouped by scope and lane, grouped again only when the list holds other
        objects than last pass (a file re-read, a read put back by the guard): regrouping
        10,000 windows, and asking each for its selector, on every pass was a tenth of a quiet
        pass and a fifth of one with ten scopes held (issue 24)."""
        cached = self._grouped
        if cached is not None and (cached.windows is windows or cached.windows.same_list(Windows.of(windows))):
            return cached
        self._grouped = WindowGroups.of(windows)
        self._regrouped = True
        return self._grouped

    @staticmethod
    def _scopes(covering: Iterable[list[Occurrence]], entries: dict[str, LedgerEntry]) -> list[str]:
        """The scopes with something to decide: an occurrence covers now at one of their
        windows, or the ledger has an occurrence armed there. Every other scope is `idle`
        whatever its sentinel holds (nothing to arm, adopt, skip, close or retire), so it is not
        visited at all: 1,000 profiles cost nothing while no window covers them (issue 24)."""
        scopes = {o.scope for found in covering for o in found}
        for entry in entries.values():
            if entry.state == ARMED and _valid_scope(entry.scope):
                scopes.add(entry.scope)
        return sorted(scopes, key=lambda s: (s != FLEET, s))

    def _reconcile_scope(self, scope: str, state: PassState, layout: WindowGroups,
                         covered: dict[tuple[str, Any], list[Occurrence]]) -> list[ScopePlan]:
        """Every lane of `scope`: the full hold's windows, and one lane per selector of the
        windows with `only`/`jobs` (issue 26), each planned as a scope of its own. Ledger
        entries of windows no lane has any more stay with the full lane, as before. `covered`:
        the occurrences covering now of each lane's windows (`Layout.covered`). A scope with
        nothing to do (`idle`) is not read at all."""
        lanes = layout.lanes.get(scope, _FULL_LANE_ONLY)
        if idle([o for selector, _, _ in lanes for o in covered.get((scope, selector), ())], state.of(scope)):
            return [ScopePlan(scope, state.report.now, ())]
        scoped_names = layout.scoped.get(scope, set())
        # lanes change only when the windows are grouped anew: a settled scope is not read for
        # moves again until then (one read of its sentinel less per held scope and pass)
        look = self._regrouped or scope in self._unsettled
        dry_run = state.report.dry_run
        if look and not dry_run:
            self._unsettled.add(scope)  # until the look below completes
        moved = self._moved(scope, state, layout) if look else {}
        plans = []
        for selector, group, names in lanes:
            plans += self._reconcile_lane(scope, (selector, group, names), scoped_names, state, layout.by_name,
                                          covered.get((scope, selector), []))
        if moved and not dry_run:
            live = {o.key for selector, _, _ in lanes for o in covered.get((scope, selector), ())}
            moved = self._retire_moved(scope, state, moved, live)
        if look and not dry_run and not moved:
            self._unsettled.discard(scope)
        return plans

    def _moved(self, scope: str, state: PassState, layout: WindowGroups) -> dict[str, list[str]]:
        """The holds windows armed at `scope` whose occurrences now belong to another lane: the
        window's `only`/`jobs` changed (confirmed by the guard when it holds less), or it left
        the scope's lanes. Such an occurrence is neither released nor ended: its entry is
        withdrawn so that its new lane arms it like a window coming back (`_triage`: fresh),
        and the old hold is retired once that is done (`_retire_moved`), never before: the
        work both hold is never free in between, and an edit is never taken for an
        operator's early release (issue 32 item 9). Returns generation -> the keys moved."""
        now = state.report.now
        entries = [e for e in state.of(scope).values()
                   if e.state in (ARMED, WITHDRAWN) and e.generation is not None and e.end > now]
        if not entries:
            return {}
        reading = self._reading(scope, now)
        lane_of_hold = {r.hold.generation: (r.hold.selector if r is not reading else None)
                        for r in (reading, *reading.scoped)
                        if r.active and r.hold is not None and r.hold.generation is not None}
        scoped_names = layout.scoped.get(scope, set())
        moved: dict[str, list[str]] = {}
        for entry in entries:
            generation = entry.generation
            if generation not in lane_of_hold:
                continue
            where = layout.elsewhere.get((scope, entry.window)) or layout.lane_of.get(entry.window)
            lane = where[1] if where is not None and entry.window in scoped_names else None
            if lane_of_hold[generation] == lane:
                continue
            if entry.state == ARMED:
                state.remember(entry.moved(WITHDRAWN, now, detail=_moved_detail(layout, entry, lane)))
            moved.setdefault(generation, []).append(entry.key)
        return moved

    def _retire_moved(self, scope: str, state: PassState, moved: dict[str, list[str]],
                      live: set[str]) -> dict[str, list[str]]:
        """Retire each hold of `moved` that no occurrence holds by any more, once every moved
        occurrence still covering now is armed in its new lane (or skipped there). Returns
        those left standing for a later pass."""
        entries = state.of(scope)
        left: dict[str, list[str]] = {}
        for generation, keys in moved.items():
            if any(e.state == ARMED and e.generation == generation for e in entries.values()):
                continue  # it still holds other windows' occurrences: its lane composes it anew
            if any(entries[key].state == WITHDRAWN and key in live for key in keys):
                left[generation] = keys  # not armed in its new lane yet: the old hold stays until it is
                continue
            self.actions.retire(Retire(scope, generation, ()), state)
        return left

    def _lane_reading(self, scope: str, selector: Any, now: datetime) -> Reading:
        """The hold a lane plans against: the full hold, or the scoped hold with `selector`."""
        reading = self._reading(scope, now)
        if selector is None:
            return reading
        for scoped in reading.scoped:
            if scoped.hold is not None and scoped.hold.selector == selector:
                return scoped
        return Reading(reading.location, HoldState.ABSENT)

    def _reconcile_lane(self, scope: str, lane: Lane, scoped_names: set[str], state: PassState,
                        by_name: Mapping[str, Window], covered: list[Occurrence]) -> list[ScopePlan]:
        """One lane (its selector, its windows, their names), the occurrences of its windows
        covering now (`covered`, sorted), and the ledger entries of its windows (`names`; None:
        the full lane, every entry of a window no scoped lane has)."""
        selector, on_scope, names = lane
        report = state.report
        for _ in range(_MAX_ROUNDS):
            now = report.now
            of_scope = {k: e for k, e in state.of(scope).items()
                        if (e.window in names if names is not None else e.window not in scoped_names)}
            if idle(covered, of_scope):
                return [ScopePlan(scope, now, ())]  # the plan whatever the sentinel holds: not read
            plan = plan_scope(scope, now, on_scope, of_scope, self._lane_reading(scope, selector, now),
                              recalled=self._recalled(scope, covered, of_scope), covered=covered, selector=selector,
                              timeline=state.timeline)
            if report.dry_run:
                report.events.extend(planned_events(plan))
                return [plan]
            for note in plan.notes:
                state.remember(note)
                event = note_event(scope, note)
                if event is not None:
                    state.event(event)
            conflict = False
            for action in plan.actions:
                if not self._may_write():
                    report.leader = False
                    return [plan]
                if isinstance(action, Arm):
                    conflict |= not self.actions.arm(action, state)
                elif isinstance(action, Retire):
                    self.actions.retire(action, state)
                elif isinstance(action, Skip):
                    self.actions.skip(action, state, by_name)
            if not conflict:
                return [plan]
        state.error(f"scope {scope}: the hold kept changing under the scheduler; will retry")
        return []

    def _commit(self, state: PassState) -> None:
        cutoff = state.report.now - RETENTION
        oldest = min((entry.end for entry in state.entries.values()), default=None)
        prune = oldest is not None and oldest < cutoff
        if not state.changes and not (oldest is not None and oldest < cutoff - PRUNE_SLACK):
            return
        if not self._may_write():
            state.report.leader = False
            return
        try:
            self.ledger.commit(state.changes.values(), prune_before=cutoff if prune else None)
        except StoreError as exc:
            state.error(f"{exc} (a hold armed now is recognised again by its body)")

    # -- waking up ---------------------------------------------------------------------------

    wakeups_for = staticmethod(wakeups_for)

    def _schedule(self, report: TickReport) -> None:
        if self.scheduler is not None:
            Wakeups(self.scheduler, self._wake).set(report.wakeups)

    def _wake(self, job_id: str) -> None:
        logger.debug("windows: woke for %s", job_id)
        self.reconcile()

    def jobs(self) -> dict[str, datetime]:
        """The wake-ups currently scheduled with APScheduler."""
        if self.scheduler is None:
            return {}
        return Wakeups(self.scheduler, self._wake).jobs()

    # -- running -----------------------------------------------------------------------------

    def start(self) -> TickReport:
        """Start APScheduler (a BackgroundScheduler unless one was given) and reconcile once."""
        if self.scheduler is None:
            self.scheduler = make_scheduler()
            self._owns_scheduler = True
        if not self.scheduler.running:
            self.scheduler.start()
            self._owns_scheduler = True
        return self.reconcile()

    def shutdown(self) -> None:
        """Stop APScheduler (waiting for a running wake-up to finish) if this service started it."""
        scheduler = self.scheduler
        if scheduler is not None and self._owns_scheduler and scheduler.running:
            scheduler.shutdown(wait=True)

    def run(self, stop: threading.Event) -> None:
        """Serve until `stop` is set: the wake-up jobs plus a reconcile every `poll_interval`
        seconds, paced on the injected `monotonic` (missed polls are skipped, never run in a
        burst)."""
        self.start()
        logger.info("windows: scheduling %s (ledger %s, poll every %gs)", self.windows_file.path,
                    self.ledger.describe(), self.poll_interval)
        try:
            interval = max(self.poll_interval, 0.05)
            due = self.monotonic() + interval
            while not stop.wait(max(0.0, due - self.monotonic())):
                self.reconcile()
                due, _ = next_deadline(due, interval, self.monotonic())
        finally:
            self.shutdown()


#: one lane of a scope: its selector (None: the full hold), its enabled windows in file order,
#: their names (None for the full lane)
Lane = tuple[Any, Sequence[Window], frozenset[str] | None]
#: the lanes of a scope without enabled windows (armed entries only): the full lane, empty
_FULL_LANE_ONLY: list[Lane] = [(None, [], None)]


@dataclass
class WindowGroups:
    """One list of windows grouped as a pass needs it, computed once per list (`_layout`)."""

    windows: Windows
    #: every window of the list, by name
    by_name: Mapping[str, Window]
    #: scope -> its lanes: (selector, the lane's enabled windows in file order, their names;
    #: None for the full lane), the full lane first
    lanes: dict[str, list[Lane]]
    #: scope -> the names of its windows in a scoped lane
    scoped: dict[str, set[str]]
    #: enabled window name -> (its scope, its selector)
    lane_of: dict[str, tuple[str, Any]]
    #: (scope, name) -> (scope, selector) of the versions an unconfirmed edit moves to another
    #: scope (`beside`): held there beside their old versions, which `lane_of` names
    elsewhere: dict[tuple[str, str], tuple[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, given: Sequence[Window]) -> WindowGroups:
        """The groups of `given`, read off `Windows` (a lane of rows is a list of rows: no
        `Window` built)."""
        windows = Windows.of(given)
        groups: dict[str, dict[Any, list[int]]] = {}
        lane_of: dict[str, tuple[str, Any]] = {}
        keys: dict[tuple[str, Any], tuple[str, Any]] = {}  # one (scope, selector) tuple per lane, not per window
        for index in range(len(windows)):
            if not windows.enabled(index):
                continue
            scope, selector = windows.scope(index), windows.selector(index)
            groups.setdefault(scope, {None: []}).setdefault(selector, []).append(index)
            lane_of[windows.name(index)] = keys.setdefault((scope, selector), (scope, selector))
        lanes: dict[str, list[Lane]] = {}
        scoped: dict[str, set[str]] = {}
        for scope, by_selector in groups.items():
            lanes[scope] = [(selector, windows.subset(group),
                             frozenset(windows.name(i) for i in group) if selector is not None else None)
                            for selector, group in by_selector.items()]
            scoped[scope] = {windows.name(i) for selector, group in by_selector.items() if selector is not None
                             for i in group}
        return cls(windows, windows.by_name(), lanes, scoped, lane_of)

    def beside(self, moving: WindowGroups, covered: dict[tuple[str, Any], list[Occurrence]],
               covering: Covering) -> WindowGroups:
        """These groups with the lanes of `moving` (the versions an unconfirmed edit moves to
        another scope) added at their scopes; `covered` (this layout's, `covered`) extended in
        place with their occurrences covering now (`covering`)."""
        lanes = {scope: list(on_scope) for scope, on_scope in self.lanes.items()}
        scoped = {scope: set(names) for scope, names in self.scoped.items()}
        for scope, extra in moving.lanes.items():
            mine = lanes.setdefault(scope, [(None, [], None)])
            for selector, group, names in extra:
                at = next((i for i, lane in enumerate(mine) if lane[0] == selector), None)
                if at is None:
                    mine.append((selector, group, names))
                elif group:
                    _, own, own_names = mine[at]
                    mine[at] = (selector, [*own, *group], None if names is None else (own_names or frozenset()) | names)
            scoped.setdefault(scope, set()).update(moving.scoped.get(scope, ()))
        for key, found in moving.covered(covering).items():
            covered[key] = sorted([*covered.get(key, ()), *found])
        elsewhere = {(key[0], name): key for name, key in moving.lane_of.items()}
        return WindowGroups(self.windows, self.by_name, lanes, scoped, self.lane_of, elsewhere)

    def covered(self, covering: Covering) -> dict[tuple[str, Any], list[Occurrence]]:
        """The occurrences covering now of each lane `(scope, selector)`, sorted, from each
        enabled window's (`covering`): O(what covers now), not O(windows)."""
        out: dict[tuple[str, Any], list[Occurrence]] = {}
        for name, found in covering.items():
            out.setdefault(self.lane_of[name], []).extend(found)
        for occurrences in out.values():
            occurrences.sort()
        return out


def _moved_detail(layout: WindowGroups, entry: LedgerEntry, lane: Any) -> str:
    """Why an occurrence's hold is being replaced (`WindowService._moved`), for the ledger."""
    where = layout.lane_of.get(entry.window)
    if where is None or where[0] != entry.scope:
        return "its window was removed, disabled or moved"
    return f"its window now holds {'everything' if lane is None else lane.describe()}: moved to that hold"


def _valid_scope(scope: str) -> bool:
    if scope == FLEET:
        return True
    try:
        validate_profile_name(scope)
    except EstopError:
        return False
    return True
