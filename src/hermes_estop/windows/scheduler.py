"""The window scheduler: one reconciliation pass (`tick(now)`, or `plan(now)`: the same body
writing nothing) reads the file and the ledger, compiles or takes the file's `Schedule`, plans
every scope that has something to decide (`plan.plan_scope`) and carries the plans out
(`actions`). APScheduler date jobs (`wakeups`) wake it when the occurrences say; `run(stop)` also
reconciles every `poll_interval` seconds, which picks up edits and makes a missed wake-up harmless.

A read that takes hold time away is acted on only once confirmed (`plan.FileGuard`). Passes hold
the service's lock, so decisions never interleave within a process; across processes the store's
fenced writes and the ledger's lock do. `is_leader` is asked before every write: a scheduler
that is not the leader plans, schedules its wake-ups and writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.fleet.fleet import Fleet
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
from hermes_estop.windows.wakeups import JOB_PREFIX, Scheduler, Wakeups, due_wakeups, make_scheduler
from hermes_estop.windows.windows_file import Parsed, WindowsFile

__all__ = ["JOB_PREFIX", "POLL_INTERVAL", "WEAKEN_AFTER", "ProblemLog", "TickEvent", "TickReport", "WindowService"]

logger = logging.getLogger("hermes_estop.windows")

POLL_INTERVAL = 5.0
#: The shortest time a read of `windows.toml` that weakens anything must stay the same file, over
#: at least two reads, before it is acted on: an editor's save in place can stall for seconds
#: between its truncate and its last write. A hold lifting a few seconds late is the safe side.
WEAKEN_AFTER = 5.0
#: a pass with nothing else to commit prunes the ledger only once its oldest entry is this far
#: past the retention (a commit rewrites the whole file ledger, issue 24)
PRUNE_SLACK = timedelta(hours=1)
#: how many of the newest audit events `recall` reads (an arm it misses is armed again: held)
RECALL_DEPTH = 5000
_MAX_ROUNDS = 3
#: one lane of a scope: its selector (None: the full hold), its enabled windows in file order,
#: their names (None for the full lane)
Lane = tuple[Any, Sequence[Window], frozenset[str] | None]
#: what a pass acts on: the windows, the ledger, the bytes the windows are exactly the windows of
#: (None: a mix the guard put together, or not the file's own schedule), the versions an
#: unconfirmed edit moves to another scope (`GuardVerdict.moving`), and the file's bytes and
#: windows when it validates whole (the schedule the pass keeps for the commands, `Schedules.keep`)
_Inputs = tuple[Sequence[Window], dict[str, LedgerEntry], bytes | None, Sequence[Window],
                tuple[bytes, Sequence[Window]] | None]


class ProblemLog:
    """The problems standing now (kind -> message) of one service: each logged once when it starts
    and once when it clears (issue 20 item 3, issue 32 item 6), not once per pass."""

    def __init__(self, logger: logging.Logger, *, quiet: bool = False) -> None:
        self.logger = logger
        self._standing: dict[str, str] = {}
        #: `quiet`: at DEBUG (another service beside this one logs the same problem)
        self._started, self._ended = (logging.DEBUG, logging.DEBUG) if quiet else (logging.ERROR, logging.INFO)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._standing))

    def start(self, kind: str, message: str) -> None:
        """Log `message` when `kind` starts; while it lasts, a changed wording (an editor's torn
        saves fail at a new position each time) only at DEBUG."""
        if kind in self._standing:
            if self._standing[kind] != message:
                self._standing[kind] = message
                self.logger.debug("%s", message)
            return
        self._standing[kind] = message
        self.logger.log(self._started, "%s", message)

    def clear(self, kind: str, message: str) -> None:
        if self._standing.pop(kind, None) is not None:
            self.logger.log(self._ended, "%s", message)

    def only(self, prefix: str, standing: Iterable[str], message: str) -> None:
        """Clear every problem of `prefix` whose rest is not in `standing` (`message` formatted
        with that rest)."""
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
        self.is_leader = is_leader or (lambda: True)
        self.scheduler = scheduler
        self.poll_interval = float(poll_interval)
        self.guard = FileGuard(timedelta(seconds=max(self.poll_interval, WEAKEN_AFTER)))
        #: the compiled schedules of the file (the one holder: the window tasks share it)
        self.schedules = Schedules(self.windows_file.path)
        self.actions = Actions(fleet)
        self._lock = threading.RLock()
        self._logged: dict[str, object] = {}
        self._problems = ProblemLog(logger)
        self._owns_scheduler = False

    def __repr__(self) -> str:
        return f"WindowService({self.windows_file.path})"

    # -- inputs ------------------------------------------------------------------------------

    def check_file(self) -> None:
        """Raise `InvalidWindow` when the file does not read as a whole (`hermes serve --once`
        says so in one line, exit 2). Bytes with a trusted schedule validated when it was built."""
        raw = self.windows_file.snapshot().raw
        if self.schedules.rows(raw, self.clock()) is None:
            self.windows_file.parse_each(raw)

    def _inputs(self, report: TickReport) -> _Inputs | None:
        """The windows and the ledger to act on, or None (the reason in `report`): a file that does
        not read or validate, or a read that takes away what cannot be kept (`FileGuard`). The
        windows are the rows of the file's compiled schedule when the fleet's policy refuses
        nothing (else each window is validated and checked against it)."""
        try:
            snapshot = self.windows_file.snapshot()
            policy = self.fleet.policy
            rules = policy.policy()[0]
            rows = self.schedules.rows(snapshot.raw, report.now) if snapshot.identity is not None and rules.empty \
                else None
            parsed = Parsed([], []) if rows is not None else against_policy(
                self.windows_file.parse_each(snapshot.raw), rules, policy.identity, self.windows_file.path)
            entries = self.ledger.load()
        except (InvalidWindow, StoreError) as exc:
            self.guard.interrupted()
            self._problems.start("error", f"{exc} (no window is armed or retired until it reads and parses again)")
            report.errors.append(str(exc))
            return None
        self._problems.clear("error", f"windows: {self.windows_file.path} reads and parses again")
        windows = rows if rows is not None else parsed.windows
        report.windows = len(windows)
        self._note_tables(parsed, report)
        identity = (snapshot.identity, parsed.digests) if parsed.digests else snapshot.identity
        verdict = self.guard.judge(identity, windows, entries, report.now, parsed.failing_names())
        own = not parsed.failures and not parsed.sources
        # the schedule kept is the file's as it is (what every command reads), never the version
        # last confirmed: that would be written over it (issue 45)
        whole = (snapshot.raw, windows) if own else None
        if not verdict.trusted:
            report.pending = verdict.reason
            self._log_once("pending", verdict.reason, logging.WARNING, f"windows: {verdict.reason}")
            if verdict.windows is None:
                if whole is not None and not report.dry_run:
                    self.schedules.keep(*whole, report.now)
                return None
            return verdict.windows, entries, None, verdict.moving, whole
        if self._log_once("loaded", hash((snapshot.raw, parsed.digests)), logging.INFO if windows else logging.DEBUG,
                          f"windows: {len(windows)} loaded from {self.windows_file.path}"):
            self._logged.pop("pending", None)  # new content: the next unconfirmed read is news again
        return (verdict.windows if verdict.windows is not None else windows, entries, snapshot.raw if own else None, (),
                whole)

    def _note_tables(self, parsed: Parsed, report: TickReport) -> None:
        """Report the tables that fail and the calendars read from a stale copy."""
        report.failed = [str(failure) for failure in parsed.failures]
        failing = {str(failure.window): str(failure) for failure in parsed.failures}
        for name, line in failing.items():
            self._problems.start(f"failed:{name}", f"windows: {line} (this window holds as it was; the others proceed)")
        self._problems.only("failed:", failing, "windows: window {} validates again (or was removed)")
        report.stale = dict(parsed.stale)
        for name, line in parsed.stale.items():
            self._problems.start(f"stale:{name}", f"windows: {line} (its occurrences hold as that copy says)")
        self._problems.only("stale:", parsed.stale, "windows: calendar {} reads again")

    def _log_once(self, kind: str, key: object, level: int, message: str) -> bool:
        """Log `message` unless the last one of `kind` had the same `key`; True when logged."""
        if self._logged.get(kind) == key:
            return False
        self._logged[kind] = key
        logger.log(level, "%s", message)
        return True

    def _recalled(self, scope: str, covered: list[Occurrence], entries: dict[str, LedgerEntry],
                  state: PassState) -> dict[str, str]:
        """What the audit trail says was armed for the occurrences covering `now` that the ledger
        does not know (usually none: then the trail is not read; else once a pass)."""
        unknown = {o.key for o in covered} - entries.keys()
        if not unknown:
            return {}
        if state.trail is None:
            try:
                events = self.fleet.history(RECALL_DEPTH)[0]
            except (EstopError, OSError) as exc:
                logger.warning("windows: cannot read the audit trail (%s): arming as if nothing was armed", exc)
                return {}
            state.trail = {}
            for event in events:
                state.trail.setdefault(event.location, []).append(event)
        return recall(state.trail.get(scope, ()), scope, unknown)

    # -- deciding and acting -----------------------------------------------------------------

    def plan(self, now: datetime | None = None) -> tuple[TickReport, list[ScopePlan]]:
        """A dry run: what a tick at `now` would do, without writing anything."""
        return self._pass(now, dry_run=True)

    def tick(self, now: datetime | None = None) -> TickReport:
        """One reconciliation at `now` (default: the clock, read once)."""
        return self._pass(now, dry_run=False)[0]

    def settle(self) -> TickReport:
        """`tick()` for a one-shot run (`hermes serve --once`): an unconfirmed read is confirmed by
        reading again once the confirmation period has passed, since no later pass will."""
        report = self.tick()
        if report.pending is not None and not report.errors:
            self.sleep(self.guard.confirm_after.total_seconds())
            report = self.tick()
        return report

    def _pass(self, now: datetime | None, *, dry_run: bool) -> tuple[TickReport, list[ScopePlan]]:
        with self._lock:
            report = TickReport(now=now or self.clock(), dry_run=dry_run)
            plans: list[ScopePlan] = []
            inputs = self._inputs(report)
            if inputs is None:
                return report, plans
            windows, entries, source, moving, whole = inputs
            report.leader = dry_run or self._may_write()
            # rows are asked of their own schedule, validated windows of their bytes' schedule,
            # any other list of one compiled in memory
            listed = Windows.of(windows)
            timeline = listed.timeline or self.schedules.held(source) or self.schedules.of_windows(listed, report.now)
            state = PassState(report, entries, timeline=timeline)
            covering = timeline.covering_now(listed, report.now)
            # the versions an unconfirmed edit moves to other scopes are held there too
            elsewhere = {w.name: found for w in moving if w.enabled and (found := covering_of(w, report.now))}
            if report.leader:
                lanes = Lanes(listed, moving, covering, elsewhere)
                for scope in self._scopes([*covering.values(), *elsewhere.values()], entries):
                    try:
                        plans.extend(self._reconcile_scope(scope, state, lanes))
                    except (EstopError, OSError) as exc:
                        state.error(f"scope {scope}: {exc}")
                if not dry_run:
                    self._commit(state)
            report.active = sorted(o.key for found in (*covering.values(), *elsewhere.values()) for o in found)
            report.wakeups = due_wakeups(timeline, listed, covering, report.now)
            if not dry_run:
                if self.scheduler is not None:
                    Wakeups(self.scheduler, self._wake).set(report.wakeups)
                next_wake = min(report.wakeups.values(), default=None)
                if whole is not None:  # the next operator command reads the schedule warm
                    self.schedules.keep(*whole, report.now, next_wake)
                self.schedules.refresh(report.now, next_wake)
            return report, plans

    def reconcile(self) -> TickReport:
        """`tick()` that never raises (wake-up jobs and the poll loop call it); each pass a DEBUG
        line with its duration (`hermes serve -v`), which is what choosing `--interval` needs."""
        try:
            started = time.perf_counter()
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

    @staticmethod
    def _scopes(covering: Iterable[list[Occurrence]], entries: dict[str, LedgerEntry]) -> list[str]:
        """The scopes with something to decide: an occurrence covers now there, or the ledger has
        one armed there. Every other scope is `idle` whatever its sentinel holds: not visited, so
        1,000 profiles cost nothing while no window covers them (issue 24)."""
        scopes = {o.scope for found in covering for o in found}
        scopes.update(e.scope for e in entries.values() if e.state == ARMED and _valid_scope(e.scope))
        return sorted(scopes, key=lambda s: (s != FLEET, s))

    def _reconcile_scope(self, scope: str, state: PassState, lanes: Lanes) -> list[ScopePlan]:
        """Every lane of `scope` (the full hold's windows, and one per selector of the windows with
        `only`/`jobs`, issue 26), each planned as a scope of its own; ledger entries of windows no
        lane has stay with the full lane. A scope with nothing to do (`idle`) is not read at all."""
        at_scope, scoped = lanes.at(scope)
        if idle([o for selector, _, _ in at_scope for o in lanes.covered.get((scope, selector), ())], state.of(scope)):
            return [ScopePlan(scope, state.report.now, ())]
        fresh: list[Reading] = []
        moved = self._moved(scope, state, lanes, scoped, fresh)
        plans = []
        for lane in at_scope:
            plans += self._reconcile_lane(scope, lane, scoped, state, lanes, fresh)
        if moved and not state.report.dry_run:
            live = {o.key for selector, _, _ in at_scope for o in lanes.covered.get((scope, selector), ())}
            self._retire_moved(scope, state, moved, live)
        return plans

    def _reading(self, scope: str, now: datetime, fresh: list[Reading]) -> Reading:
        """The scope's sentinel: read once, and again after a write (which empties `fresh`)."""
        if not fresh:
            fresh.append(self.fleet.read((self.fleet.location(scope),), now).readings[0])
        return fresh[0]

    def _moved(self, scope: str, state: PassState, lanes: Lanes, scoped: set[str],
               fresh: list[Reading]) -> dict[str, list[str]]:
        """The holds windows armed at `scope` whose occurrences now belong to another lane (the
        window's `only`/`jobs` changed, or it left the scope's lanes). Such an occurrence's entry is
        withdrawn, so that its new lane arms it like a window coming back, and the old hold is
        retired only once that is done (`_retire_moved`): the work both hold is never free in
        between, and an edit is never taken for an operator's release (issue 32 item 9).
        Looked for at every pass: a lane is a row's scope and selector, nothing to remember.
        Returns generation -> the keys moved."""
        now = state.report.now
        entries = [e for e in state.of(scope).values()
                   if e.state in (ARMED, WITHDRAWN) and e.generation is not None and e.end > now]
        if not entries:
            return {}
        reading = self._reading(scope, now, fresh)
        lane_of_hold = {r.hold.generation: (r.hold.selector if r is not reading else None)
                        for r in (reading, *reading.scoped)
                        if r.active and r.hold is not None and r.hold.generation is not None}
        moved: dict[str, list[str]] = {}
        for entry in entries:
            generation = entry.generation
            if generation not in lane_of_hold:
                continue
            where = lanes.elsewhere.get((scope, entry.window)) or lanes.lane_of(entry.window)
            lane = where[1] if where is not None and entry.window in scoped else None
            if lane_of_hold[generation] == lane:
                continue
            if entry.state == ARMED:
                home = lanes.lane_of(entry.window)
                detail = ("its window was removed, disabled or moved" if home is None or home[0] != entry.scope else
                          f"its window now holds {'everything' if lane is None else lane.describe()}: moved to that hold")
                state.remember(entry.moved(WITHDRAWN, now, detail=detail))
            moved.setdefault(generation, []).append(entry.key)
        return moved

    def _retire_moved(self, scope: str, state: PassState, moved: dict[str, list[str]], live: set[str]) -> None:
        """Retire each hold of `moved` that no occurrence holds by any more, once every moved
        occurrence still covering now is armed (or skipped) in its new lane; the others are left
        to a later pass (their entries are withdrawn, not closed: `_moved` finds them again)."""
        entries = state.of(scope)
        for generation, keys in moved.items():
            if any(e.state == ARMED and e.generation == generation for e in entries.values()):
                continue  # it still holds other windows' occurrences: its lane composes it anew
            if any(entries[key].state == WITHDRAWN and key in live for key in keys):
                continue  # not armed in its new lane yet: the old hold stays until it is
            self.actions.retire(Retire(scope, generation, ()), state)

    def _reconcile_lane(self, scope: str, lane: Lane, scoped: set[str], state: PassState, lanes: Lanes,
                        fresh: list[Reading]) -> list[ScopePlan]:
        """One lane: its selector, windows and names (None: the full lane, every entry of a window
        no scoped lane has), planned against its hold (the full one, or the scoped hold with its
        selector) and the occurrences of its windows covering now."""
        selector, on_scope, names = lane
        covered = lanes.covered.get((scope, selector), [])
        report = state.report
        for _ in range(_MAX_ROUNDS):
            now = report.now
            of_scope = {k: e for k, e in state.of(scope).items()
                        if (e.window in names if names is not None else e.window not in scoped)}
            if idle(covered, of_scope):
                return [ScopePlan(scope, now, ())]  # the plan whatever the sentinel holds: not read
            reading = self._reading(scope, now, fresh)
            if selector is not None:
                reading = next((r for r in reading.scoped if r.hold is not None and r.hold.selector == selector),
                               Reading(reading.location, HoldState.ABSENT))
            plan = plan_scope(scope, now, on_scope, of_scope, reading, recalled=self._recalled(scope, covered, of_scope,
                              state), covered=covered, selector=selector, timeline=state.timeline)
            if report.dry_run:
                report.events.extend(planned_events(plan))
                return [plan]
            for note in plan.notes:
                state.remember(note)
                event = note_event(scope, note)
                if event is not None:
                    state.event(event)
            if plan.actions:
                fresh.clear()
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
                    self.actions.skip(action, state, lanes.by_name)
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

    # -- waking up and running ---------------------------------------------------------------

    def _wake(self, job_id: str) -> None:
        logger.debug("windows: woke for %s", job_id)
        self.reconcile()

    def jobs(self) -> dict[str, datetime]:
        """The wake-ups currently scheduled with APScheduler."""
        if self.scheduler is None:
            return {}
        return Wakeups(self.scheduler, self._wake).jobs()

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
        seconds on the injected `monotonic` (missed polls are skipped, never run in a burst)."""
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


class Lanes:
    """The pass's windows by scope and lane (selector), each scope grouped when a pass first
    visits it (a pass visits the few scopes with something to decide); with `moving`, the
    versions an unconfirmed edit moves to another scope, held there beside the old versions."""

    def __init__(self, windows: Windows, moving: Sequence[Window], covering: dict[str, list[Occurrence]],
                 elsewhere: dict[str, list[Occurrence]]) -> None:
        self.windows = windows
        self.by_name = windows.by_name()
        self.moving = [w for w in moving if w.enabled]
        #: (scope, name) -> (scope, selector) of the moving versions (`lane_of` names the others)
        self.elsewhere = {(w.scope, w.name): (w.scope, w.selector) for w in self.moving}
        self._at: dict[str, list[int]] | None = None
        self._lanes: dict[str, tuple[list[Lane], set[str]]] = {}
        #: (scope, selector) -> the occurrences covering now of the lane's windows, sorted
        self.covered: dict[tuple[str, Any], list[Occurrence]] = {}
        for name, found in covering.items():
            where = self.lane_of(name)
            assert where is not None  # noqa: S101 - `covering_now` answers for enabled windows only
            self.covered.setdefault(where, []).extend(found)
        for w in self.moving:
            self.covered.setdefault((w.scope, w.selector), []).extend(elsewhere.get(w.name, ()))
        for occurrences in self.covered.values():
            occurrences.sort()

    def lane_of(self, name: str) -> tuple[str, Any] | None:
        """The enabled window `name`'s (scope, selector)."""
        at = self.windows.position(name)
        if at is None or not self.windows.enabled(at):
            return None
        return self.windows.scope(at), self.windows.selector(at)

    def at(self, scope: str) -> tuple[list[Lane], set[str]]:
        """`scope`'s lanes, the full lane first, and the names of its windows in a scoped lane."""
        if scope in self._lanes:
            return self._lanes[scope]
        if self._at is None:
            self._at = {}
            for i in range(len(self.windows)):
                if self.windows.enabled(i):
                    self._at.setdefault(self.windows.scope(i), []).append(i)
        groups: dict[Any, list[int]] = {None: []}
        for i in self._at.get(scope, ()):
            groups.setdefault(self.windows.selector(i), []).append(i)
        lanes: list[Lane] = [(selector, self.windows.subset(group),
                              None if selector is None else frozenset(self.windows.name(i) for i in group))
                             for selector, group in groups.items()]
        for window in (w for w in self.moving if w.scope == scope):
            at = next((i for i, lane in enumerate(lanes) if lane[0] == window.selector), None)
            extra = None if window.selector is None else frozenset({window.name})
            if at is None:
                lanes.append((window.selector, [window], extra))
            else:
                selector, own, names = lanes[at]
                lanes[at] = (selector, [*own, window], None if extra is None else (names or frozenset()) | extra)
        scoped = {name for _, _, names in lanes for name in names or ()}
        self._lanes[scope] = lanes, scoped
        return lanes, scoped


def _valid_scope(scope: str) -> bool:
    if scope == FLEET:
        return True
    try:
        validate_profile_name(scope)
    except EstopError:
        return False
    return True
