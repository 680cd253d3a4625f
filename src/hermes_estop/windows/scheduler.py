"""The window scheduler: a pass (`tick`; `plan` writes nothing) plans each scope with something
to decide off the file's compiled `Schedule` and the ledger, and `Actions` carries it out.
APScheduler 3 date jobs wake it (never its `CronTrigger`, which reads day-of-week 0 as Monday);
`run` also passes every `poll_interval` seconds, which picks up edits and makes a missed wake-up
harmless. Passes hold a lock (across processes: the store's fences and the ledger's lock); only
the leader (`is_leader`) writes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import EstopError, HoldConflict, StoreError
from hermes_estop.model.hold import EngageRequest, Fence, HoldState, Reading, clean_reason
from hermes_estop.model.homes import FLEET
from hermes_estop.model.policy import Actor, PolicyRefused
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, next_deadline
from hermes_estop.system.fsread import read_snapshot
from hermes_estop.windows.ical import CalendarError
from hermes_estop.windows.ledger import (
    ARMED,
    INTENT,
    RELEASED,
    RETENTION,
    SKIPPED,
    WITHDRAWN,
    LedgerEntry,
    OccurrenceLedger,
    entry_for,
    intent_detail,
    open_ledger,
    recall,
)
from hermes_estop.windows.model import InvalidWindow, Occurrence, Window, reason_of, validate_scope
from hermes_estop.windows.occurrences import covering as covering_of, refusal
from hermes_estop.windows.plan import Arm, FileGuard, GuardVerdict, Retire, ScopePlan, Skip, idle, plan_scope, terms
from hermes_estop.windows.schedule import Part, Schedules, ScheduleTimeline, Windows
from hermes_estop.windows.windows_file import MAX_WINDOWS_BYTES, Parsed, WindowsFile, against_policy

__all__ = ["EDIT", "JOB_PREFIX", "LATER", "MAX_JOBS", "POLL_INTERVAL", "WEAKEN_AFTER", "Actions", "PassState", "ProblemLog",
           "Scheduler", "TickEvent", "TickReport", "WindowService", "action_event", "due_wakeups"]

logger = logging.getLogger("hermes_estop.windows")

POLL_INTERVAL = 5.0
#: the shortest time a weakening read must stay the same file before it is acted on (an editor's
#: save in place can stall for seconds; a hold lifting a few seconds late is the safe side)
WEAKEN_AFTER = 5.0
#: a pass with nothing else to commit prunes the ledger only once its oldest entry is this far
#: past the retention (a commit rewrites the whole file ledger, issue 24)
PRUNE_SLACK = timedelta(hours=1)
#: how many of the newest audit events `recall` reads (an arm it misses is armed again: held)
RECALL_DEPTH = 5000
_MAX_ROUNDS = 3
#: one lane of a scope: its selector (None: the full hold), its windows, their occurrences covering now
Lane = tuple[Any, Windows, list[Occurrence]]


@dataclass(frozen=True)
class TickEvent:
    kind: str  # arm | rearm | retire | skip | released | adopted
    scope: str
    windows: tuple[str, ...] = ()
    occurrences: tuple[str, ...] = ()
    generation: str | None = None
    deadline: datetime | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "windows": list(self.windows), "occurrences": list(self.occurrences),
                "deadline": format_instant(self.deadline)}

    def describe(self) -> str:
        names = "+".join(self.windows) or "-"
        until = f" until {display_instant(self.deadline)}" if self.deadline else ""
        gen = f" (generation {self.generation})" if self.generation else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"window {names}: {self.kind} {self.scope}{until}{gen}{detail}"


@dataclass
class TickReport:
    now: datetime
    leader: bool = True
    dry_run: bool = False
    windows: int = 0
    active: list[str] = field(default_factory=list)
    events: list[TickEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: why this pass did not act on all of the read (an unconfirmed weakening)
    pending: str | None = None
    #: one line per window whose table does not validate (held as it was; the others proceed)
    failed: list[str] = field(default_factory=list)
    #: calendar name -> why it runs on its last good copy (cannot be fetched, read or parsed)
    stale: dict[str, str] = field(default_factory=dict)
    wakeups: dict[str, datetime] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """The fields in their order (`hermes serve --once --json` prints it)."""
        return {**asdict(self), "now": format_instant(self.now), "events": [event.to_json() for event in self.events],
                "wakeups": {key: format_instant(when) for key, when in sorted(self.wakeups.items(), key=lambda kv: kv[1])}}


def action_event(action: Arm | Retire | Skip, generation: str | None = None) -> TickEvent:
    """The event an action is reported as; `generation` is what an arm minted (None: planned)."""
    if isinstance(action, Arm):
        detail = f"replaces our generation {action.replaces}" if action.replaces else None
        return TickEvent("rearm" if action.replaces else "arm", action.scope,
                         tuple(dict.fromkeys(o.window for o in action.members)),
                         tuple(o.ident for o in action.members), generation, action.desired.deadline, detail)
    if isinstance(action, Retire):
        return TickEvent("retire", action.scope, tuple(sorted({e.window for e in action.entries})),
                         tuple(e.occurrence for e in action.entries), action.generation)
    occurrence = action.occurrence
    return TickEvent("skip", action.scope, (occurrence.window,), (occurrence.ident,), action.standing_generation,
                     occurrence.end, f"held by {action.standing}, which the window did not arm")


#: who a retire the windows file asks for is judged as: nobody a policy's roles can name
EDIT = Actor(name="windows-file-edit")
_REFUSED_KEPT = 1024


@dataclass
class PassState:
    report: TickReport
    entries: dict[str, LedgerEntry]
    changes: dict[str, LedgerEntry] = field(default_factory=dict)
    #: the audit trail's newest events by scope, read at most once a pass
    trail: dict[str, list[AuditEvent]] | None = None
    #: `entries` by scope: filtering the whole ledger for each of a thousand profiles cost more
    #: than the planning (issue 24)
    _by_scope: dict[str, dict[str, LedgerEntry]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for key, entry in self.entries.items():
            self._by_scope.setdefault(entry.scope, {})[key] = entry

    def remember(self, entry: LedgerEntry) -> None:
        self.entries[entry.key] = entry
        self.changes[entry.key] = entry
        self._by_scope.setdefault(entry.scope, {})[entry.key] = entry

    def of(self, scope: str) -> Mapping[str, LedgerEntry]:  # the live index: read, never changed
        return self._by_scope.get(scope, {})

    def event(self, event: TickEvent) -> None:
        self.report.events.append(event)
        if not self.report.dry_run:
            logger.info("%s", event.describe())

    def error(self, message: str) -> None:
        self.report.errors.append(message)
        logger.error("windows: %s", printable(message))


class Actions:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        #: generations whose retire the policy refused (left to their deadman)
        self._refused: set[str] = set()

    def arm(self, action: Arm, state: PassState) -> bool:
        """After its intent in the audit trail (`ledger.recall`; failing to write that never
        stops the arm); False when the hold changed in between (plan again)."""
        desired = action.desired
        try:
            self.fleet.record(INTENT, self.fleet.location(action.scope), reason=desired.reason,
                              deadline=desired.deadline, detail=intent_detail(o.key for o in action.members))
        except (EstopError, OSError) as exc:
            logger.warning("windows: cannot record the arm in the audit trail (%s); arming anyway", exc)
        now = self.fleet.clock()
        if desired.deadline is not None and desired.deadline <= now:
            return False  # the deadline passed while deciding: plan again
        request = EngageRequest(reason=clean_reason(desired.reason), allow=desired.allow, expires_at=desired.deadline,
                                replace=True, armed_by=desired.armed_by, window=dict(desired.window),
                                only_if=action.only_if, selector=action.selector)
        try:
            hold = self.fleet.engage(self.fleet.location(action.scope), request, now)
        except HoldConflict:
            return False  # someone wrote in between: plan again from what stands now
        for occurrence in action.members:
            state.remember(entry_for(occurrence, ARMED, state.report.now, hold.generation))
        state.event(action_event(action, hold.generation))
        return True

    def retire(self, action: Retire, state: PassState) -> None:
        """Before its deadline an edit asks for it, which is not an operator's act: judged as
        `EDIT`, so under `lift_windows` it stays until its deadman (refused once, not asked again)."""
        if action.generation in self._refused:
            return
        location = self.fleet.location(action.scope)
        now = self.fleet.clock()
        (reading,) = self.fleet.read((location,), now).readings
        deadline = next((r.hold.expires_at for r in (reading, *reading.scoped)
                         if r.hold is not None and r.hold.generation == action.generation), None)
        early = deadline is None or now < deadline
        why = "; ".join(dict.fromkeys(e.detail for e in action.entries if e.detail)) or "the windows no longer hold it"
        try:
            writer = self.fleet.acting_as(EDIT) if early else self.fleet
            removed = writer.retire(location, Fence(action.generation), now=now,
                                    detail=f"windows file: {why}" if early else None)
        except PolicyRefused as exc:
            if len(self._refused) > _REFUSED_KEPT:
                self._refused.clear()
            self._refused.add(action.generation)
            logger.warning("windows: the hold at %s (generation %s) stays until its deadman: %s", action.scope,
                           action.generation, one_line(exc))
            return
        for entry in action.entries:
            state.remember(entry)
        if removed:
            state.event(action_event(action))

    def skip(self, action: Skip, state: PassState, windows: Windows) -> None:
        occurrence = action.occurrence
        detail = (f"window {occurrence.window} occurrence {occurrence.ident} skipped: {action.scope} is held by "
                  f"{action.standing}, which the window did not arm")
        reason = reason_of(occurrence.window, terms(windows, occurrence.window)[0], occurrence.reason)
        self.fleet.record("skip", self.fleet.location(action.scope), generation=action.standing_generation,
                          reason=reason, deadline=occurrence.end, detail=detail)
        state.remember(entry_for(occurrence, SKIPPED, state.report.now, None, f"held by {action.standing}"))
        state.event(action_event(action))


class ProblemLog:
    """Each problem (kind -> message) logged once when it starts and once when it clears, not once
    per pass (issue 20 item 3, issue 32 item 6)."""

    def __init__(self, *, quiet: bool = False) -> None:
        self._standing: dict[str, str] = {}
        #: `quiet`: at DEBUG (another service beside this one logs the same problem)
        self._started, self._ended = (logging.DEBUG, logging.DEBUG) if quiet else (logging.ERROR, logging.INFO)

    def start(self, kind: str, message: str) -> None:
        """A changed wording while it lasts (torn saves fail at a new position each time): DEBUG."""
        before = self._standing.get(kind)
        self._standing[kind] = message
        if message != before:
            logger.log(self._started if before is None else logging.DEBUG, "%s", printable(message))

    def clear(self, kind: str, message: str) -> None:
        if self._standing.pop(kind, None) is not None:
            logger.log(self._ended, "%s", printable(message))

    def only(self, prefix: str, lines: Mapping[str, str], cleared: str) -> None:
        """Start `prefix` + name with its line for each of `lines`; clear the others of `prefix`."""
        for name, line in lines.items():
            self.start(prefix + name, line)
        for kind in [k for k in self._standing if k.startswith(prefix) and k[len(prefix):] not in lines]:
            self.clear(kind, cleared.format(kind[len(prefix):]))


class WindowService:
    """Time comes from the fleet's clock (the database's on PostgreSQL); `monotonic` paces the loop."""

    name = "windows"

    def __init__(self, fleet: Fleet, *, windows_file: WindowsFile | None = None, ledger: OccurrenceLedger | None = None,
                 is_leader: Callable[[], bool] | None = None, scheduler: Scheduler | None = None,
                 poll_interval: float = POLL_INTERVAL, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.fleet = fleet
        self.monotonic = monotonic
        self.windows_file = windows_file or WindowsFile(fleet.root)
        self.ledger = ledger or open_ledger(fleet)
        self.is_leader = is_leader or (lambda: True)
        self.scheduler = scheduler
        self.poll_interval = float(poll_interval)
        #: the compiled schedules of the file (the one holder: the window tasks share it)
        self.schedules = Schedules(self.windows_file.path)
        self.guard = FileGuard(timedelta(seconds=max(self.poll_interval, WEAKEN_AFTER)), self.schedules)
        self.actions = Actions(fleet)
        self._lock = threading.RLock()
        #: the last unconfirmed read's reason and the last content loaded, each logged once
        self._pending: str | None = None
        self._loaded: int | None = None
        self._problems = ProblemLog()
        self._owns_scheduler = False
        #: set by `shutdown`, under its lock: no pass sets wake-ups, no wake-up runs a pass after it
        self._stopping = False
        self._stopping_lock = threading.Lock()

    def check_file(self) -> None:
        """Raise `InvalidWindow` when the file does not read as a whole (`hermes serve --once`)."""
        raw = self.windows_file.read()
        if self.schedules.rows(raw, self.fleet.clock()) is None:
            self.windows_file.parse_each(raw)

    def _planned(self, report: TickReport) -> tuple[TickReport, list[ScopePlan]]:
        """Nothing planned (the reason in `report`) for a file that does not read, or a read that
        takes away what cannot be kept (`FileGuard`). The windows are composed of those that validate
        when a table fails or the fleet's policy refuses a window (checked when the policy has rules)."""
        try:
            snapshot = read_snapshot(self.windows_file.path, MAX_WINDOWS_BYTES)
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
            return report, []
        self._problems.clear("error", f"windows: {self.windows_file.path} reads and parses again")
        own = not parsed.failures  # calendars too: planned off the schedule held for these bytes and feeds
        # the schedule kept is the file's as it is, never the version last confirmed (issue 45)
        whole = (snapshot.raw, None if rows is not None else parsed.windows) if own else None
        if rows is None and own and snapshot.identity is not None and (
                held := self.schedules.timeline(snapshot.raw, report.now)) is not None:  # its feeds asked again: read since
            # the windows reading a feed as validated now, bound to it (the rows' feeds read the same)
            held.seed({row: w for w in parsed.windows if (w.feed is not None or w.exclude_calendar is not None)
                       and (row := held.schedule.row_of(w.name)) is not None})
            rows = held.windows
        windows = rows if rows is not None else self.schedules.compose(list(map(Part.of, parsed.windows)), report.now)
        report.windows = len(windows)
        report.failed = [str(failure) for failure in parsed.failures]
        self._problems.only("failed:", {str(f.window): f"windows: {f} (this window holds as it was; the others proceed)"
                                        for f in parsed.failures}, "windows: window {} validates again (or was removed)")
        report.stale = dict(parsed.stale)
        self._problems.only("stale:", {name: f"windows: {line} (its occurrences hold as that copy says)"
                                       for name, line in parsed.stale.items()}, "windows: calendar {} reads again")
        verdict = self.guard.judge(snapshot.identity, windows, entries, report.now, parsed.failing_names(),
                                   parsed.digests)
        if not verdict.trusted:
            report.pending = verdict.reason
            if verdict.reason != self._pending:
                self._pending = verdict.reason
                logger.warning("%s", f"windows: {verdict.reason}")
        elif (loaded := hash((snapshot.raw, parsed.digests))) != self._loaded:
            self._loaded = loaded
            self._pending = None  # new content: the next unconfirmed read is news again
            logger.log(logging.INFO if windows else logging.DEBUG, "%s",
                       f"windows: {len(windows)} loaded from {self.windows_file.path}")
        # None: unconfirmed only (a trusted verdict carries what it trusts, `FileGuard.judge`)
        plans = [] if verdict.windows is None else self._act(report, verdict.windows, verdict, entries)
        if whole is not None and not report.dry_run:  # the next operator command reads the schedule warm
            self.schedules.keep(*whole, report.now, min(report.wakeups.values(), default=None))
        return report, plans

    def _recalled(self, scope: str, covered: list[Occurrence], entries: dict[str, LedgerEntry],
                  state: PassState) -> dict[str, str]:
        """For the covering occurrences the ledger does not know (usually none: the trail unread)."""
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

    def plan(self, now: datetime | None = None) -> tuple[TickReport, list[ScopePlan]]:
        return self._pass(now, dry_run=True)

    def tick(self, now: datetime | None = None) -> TickReport:
        return self._pass(now, dry_run=False)[0]

    def settle(self) -> TickReport:
        """For `hermes serve --once`: an unconfirmed read is read again once confirmable, since no
        later pass will."""
        report = self.tick()
        if report.pending is not None and not report.errors:
            time.sleep(self.guard.confirm_after.total_seconds())
            report = self.tick()
        return report

    def _pass(self, now: datetime | None, *, dry_run: bool) -> tuple[TickReport, list[ScopePlan]]:
        """A feed refused mid-pass (`CalendarError`: by another thread's expansion, or over the
        pass's budget) stops the pass with one line; no hold is lifted for it: the next read names
        its window failing and holds its scope as it was (`_held_as_was`)."""
        with self._lock:
            report = TickReport(now=now or self.fleet.clock(), dry_run=dry_run)
            try:
                return self._planned(report)
            except CalendarError as exc:
                line = f"{one_line(exc)} (refused during this pass, which stops here; its holds stay as they were)"
                report.errors.append(line)
                logger.error("windows: %s", line)  # noqa: TRY400 - one line: a refused feed is no bug to trace
                return report, []

    def _act(self, report: TickReport, listed: Windows, verdict: GuardVerdict, entries: dict[str, LedgerEntry],
             ) -> list[ScopePlan]:
        plans: list[ScopePlan] = []
        report.leader = report.dry_run or self._may_write()
        listed, moving, held = self._held_as_was(listed, verdict.moving, entries, report, verdict.unread)
        state = PassState(report, entries)
        covering = listed.timeline.covering_now(listed, report.now)
        # the versions an unconfirmed edit moves to other scopes are held there too
        found = [*(o for occurrences in covering.values() for o in occurrences),
                 *(o for w in moving for o in covering_of(w, report.now))]
        if report.leader:
            lanes = Lanes(listed, moving, found, lambda parts: self.schedules.compose(parts, report.now, kept=False))
            scopes = set(lanes.covered)  # the others are `idle`: 1,000 profiles cost nothing while nothing covers them (issue 24)
            for entry in entries.values():
                if entry.state == ARMED:
                    with contextlib.suppress(ValueError):  # a ledger entry is read, not trusted
                        scopes.add(validate_scope(entry.scope))
            for scope in sorted(scopes - held.keys(), key=lambda s: (s != FLEET, s)):
                try:
                    plans.extend(self._reconcile_scope(scope, state, lanes))
                except (EstopError, OSError) as exc:
                    state.error(f"scope {scope}: {exc}")
            if not report.dry_run:
                self._commit(state)
        report.active = sorted(o.key for o in found)
        report.wakeups = due_wakeups(listed.timeline, listed, covering, report.now)
        report.wakeups.update((f"{JOB_PREFIX}end:{name}", until) for name, until in held.values())
        if not report.dry_run:
            # APScheduler's shutdown holds its job store's lock while it waits for a running
            # wake-up: a pass setting its jobs then would wait forever (serve never stopped)
            with self._stopping_lock:
                if self.scheduler is not None and not self._stopping:
                    self._set_jobs(self.scheduler, report.wakeups)
            self.schedules.refresh(report.now, min(report.wakeups.values(), default=None))
        return plans

    def _held_as_was(self, windows: Windows, moving: Sequence[Window], entries: dict[str, LedgerEntry], report: TickReport,
                     unread: frozenset[str]) -> tuple[Windows, Sequence[Window], dict[str, tuple[str, datetime]]]:
        """The windows and moving versions less those whose feed was refused (`refusal`), and the
        scopes where one of them, or a failing window this process never read (`unread`), holds
        an occurrence not ended -> (that window, the earliest such end). Such a scope holds as it
        was until those end: planned without the window, its hold would be retired (a refusal is
        not an edit), and the other scopes would wait on it."""
        built = windows.timeline.built  # a row reading a feed is built (validated with it, `_planned`) or not asked yet
        found = (built(row) for row in windows.rows)
        refused = {w.name: why for w in (*(w for w in found if w is not None), *moving) if (why := refusal(w)) is not None}
        refused.update((name, "it holds per the ledger but does not validate, and this process never read a valid "
                              "version of it") for name in unread)
        held: dict[str, tuple[str, datetime]] = {}
        for entry in entries.values():
            if entry.state == ARMED and entry.window in refused and entry.end > report.now and (
                    entry.scope not in held or entry.end < held[entry.scope][1]):
                held[entry.scope] = (entry.window, entry.end)
        lines = {scope: f"scope {scope}: held as it was until {display_instant(until)} at least, neither armed nor "
                        f"retired: window {name}: {refused[name]}" for scope, (name, until) in sorted(held.items())}
        report.errors.extend(lines.values())
        self._problems.only("refused:", {scope: f"windows: {line}" for scope, line in lines.items()},
                            "windows: scope {} is planned again")
        if not refused:
            return windows, moving, held
        kept = [windows.part(i) for i in range(len(windows)) if windows.name(i) not in refused]
        return (self.schedules.compose(kept, report.now), [w for w in moving if w.name not in refused], held)

    def reconcile(self) -> TickReport:
        """Never raises; logs its duration at DEBUG (for choosing `--interval`)."""
        try:
            started = time.perf_counter()
            report = self.tick()
            logger.debug("windows: pass at %s took %.1f ms: %d window(s), %d active, %d event(s)",
                         report.now.isoformat(), (time.perf_counter() - started) * 1e3, report.windows,
                         len(report.active), len(report.events))
            return report
        except Exception as exc:  # a wake-up must never take the scheduler down
            logger.exception("windows: reconciliation failed")
            return TickReport(now=self.fleet.clock(), errors=[f"{type(exc).__name__}: {exc}"])

    def _may_write(self) -> bool:
        try:
            return bool(self.is_leader())
        except Exception as exc:  # noqa: BLE001 (any failure: standby, never a writer by accident)
            logger.warning("windows: leadership check failed (%s): acting as standby", exc)
            return False

    def _reconcile_scope(self, scope: str, state: PassState, lanes: Lanes) -> list[ScopePlan]:
        """The full hold's lane and one per selector (`only`/`jobs`, issue 26), each planned alone."""
        at_scope, scoped = lanes.at(scope)
        fresh: list[Reading] = []
        moved = self._moved(scope, state, lanes.windows, scoped, fresh)
        plans = []
        for lane in at_scope:
            plans += self._reconcile_lane(scope, lane, scoped, state, fresh)
        if moved and not state.report.dry_run:  # once every moved occurrence covering now is armed (or skipped) anew
            entries = state.of(scope)
            live = {o.key for o in lanes.covered.get(scope, ())}
            for generation, keys in moved.items():
                if any(e.state == ARMED and e.generation == generation for e in entries.values()):
                    continue  # it still holds other windows' occurrences: its lane composes it anew
                if any(entries[key].state == WITHDRAWN and key in live for key in keys):
                    continue  # not armed in its new lane yet: the old hold stays until it is
                self.actions.retire(Retire(scope, generation, ()), state)
        return plans

    def _reading(self, scope: str, now: datetime, fresh: list[Reading]) -> Reading:
        """Read again after a write (which empties `fresh`)."""
        if not fresh:
            fresh.append(self.fleet.read((self.fleet.location(scope),), now).readings[0])
        return fresh[0]

    def _moved(self, scope: str, state: PassState, windows: Windows, scoped: dict[str, Any],
               fresh: list[Reading]) -> dict[str, list[str]]:
        """generation -> keys of the holds at `scope` whose occurrences now belong to another lane.
        Withdrawn, so the new lane arms them like a window coming back; the old hold is retired only
        after (`_reconcile_scope`): never free in between, never taken for a release (issue 32 item 9)."""
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
            lane = scoped.get(entry.window)
            if lane_of_hold[generation] == lane:
                continue
            if entry.state == ARMED:
                at = windows.position(entry.window)  # the file's window, not a version moving here
                detail = ("its window was removed, disabled or moved" if at is None or not windows.enabled(at)
                          or windows.scope(at) != scope else
                          f"its window now holds {'everything' if lane is None else lane.describe()}: moved to that hold")
                state.remember(entry.moved(WITHDRAWN, now, detail=detail))
            moved.setdefault(generation, []).append(entry.key)
        return moved

    def _reconcile_lane(self, scope: str, lane: Lane, scoped: dict[str, Any], state: PassState,
                        fresh: list[Reading]) -> list[ScopePlan]:
        """The full lane (selector None) also has the entries of windows no scoped lane has."""
        selector, on_scope, covered = lane
        report = state.report
        for _ in range(_MAX_ROUNDS):
            of_scope = {k: e for k, e in state.of(scope).items() if scoped.get(e.window) == selector}
            if idle(covered, of_scope):
                return [ScopePlan(scope, ())]  # the plan whatever the sentinel holds: not read
            reading = self._reading(scope, report.now, fresh)
            if selector is not None:
                reading = next((r for r in reading.scoped if r.hold is not None and r.hold.selector == selector),
                               Reading(reading.location, HoldState.ABSENT))
            plan = plan_scope(scope, report.now, on_scope, of_scope, reading, recalled=self._recalled(scope, covered, of_scope,
                              state), covered=covered, selector=selector)
            for note in plan.notes:  # remembered in a dry run too: only this lane reads them, nothing commits
                state.remember(note)
                if note.state == RELEASED:  # an early release or an adopted hold is worth reporting
                    state.event(TickEvent("released", scope, (note.window,), (note.occurrence,), note.generation, None,
                                          f"{note.detail}; not re-armed" if note.detail else "not re-armed"))
                elif note.state == ARMED and note.detail:
                    state.event(TickEvent("adopted", scope, (note.window,), (note.occurrence,), note.generation, None, note.detail))
            if report.dry_run:
                report.events.extend(map(action_event, plan.actions))
                return [plan]
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
                    self.actions.skip(action, state, on_scope)
            if not conflict:
                return [plan]
        state.error(f"scope {scope}: the hold kept changing under the scheduler; will retry")
        return []

    def _commit(self, state: PassState) -> None:
        cutoff = state.report.now - RETENTION
        oldest = min((entry.end for entry in state.entries.values()), default=cutoff)
        if not state.changes and not oldest < cutoff - PRUNE_SLACK:
            return
        if not self._may_write():
            state.report.leader = False
            return
        try:
            self.ledger.commit(state.changes.values(), prune_before=cutoff if oldest < cutoff else None)
        except StoreError as exc:
            state.error(f"{exc} (a hold armed now is recognised again by its body)")

    def _wake(self, job_id: str) -> None:
        if not self._stopping:  # wake-ups queued behind a stop do not each run a pass
            logger.debug("windows: woke for %s", job_id)
            self.reconcile()

    def _set_jobs(self, scheduler: Scheduler, desired: dict[str, datetime]) -> None:
        from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]
        from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]

        existing = {job.id: job for job in scheduler.get_jobs() if job.id.startswith(JOB_PREFIX)}
        for job_id in existing.keys() - desired.keys():
            with contextlib.suppress(JobLookupError):
                scheduler.remove_job(job_id)
        for job_id, when in desired.items():
            if getattr(existing.get(job_id), "next_run_time", None) != when:
                scheduler.add_job(self._wake, trigger=DateTrigger(run_date=when, timezone=UTC), args=(job_id,),
                                  id=job_id, name=job_id, replace_existing=True, misfire_grace_time=None,
                                  coalesce=True, max_instances=1)

    def start(self) -> TickReport:
        self._stopping = False
        if self.scheduler is None:
            from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]
            from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

            # one worker thread: wake-ups never run concurrently
            self.scheduler = BackgroundScheduler(
                timezone=UTC,
                executors={"default": ThreadPoolExecutor(max_workers=1)},
            )
        if not self.scheduler.running:
            self.scheduler.start()
            self._owns_scheduler = True
        return self.reconcile()

    def shutdown(self) -> None:
        """Waits for a running wake-up; stops APScheduler only if this service started it."""
        with self._stopping_lock:
            self._stopping = True
        scheduler = self.scheduler
        if scheduler is not None and scheduler.running:
            # APScheduler's shutdown marks it stopped before it takes the job store's lock: its
            # loop, removing a date job it just fired, would then not find it and die
            self._set_jobs(scheduler, {})
        if scheduler is not None and self._owns_scheduler and scheduler.running:
            scheduler.shutdown(wait=True)

    def run(self, stop: threading.Event) -> None:
        """Missed polls are skipped, never run in a burst."""
        self.start()
        logger.info("windows: scheduling %s (ledger %s, poll every %gs)", self.windows_file.path,
                    self.ledger.records.describe(), self.poll_interval)
        try:
            interval = max(self.poll_interval, 0.05)
            due = self.monotonic() + interval
            while not stop.wait(max(0.0, due - self.monotonic())):
                self.reconcile()
                due, _ = next_deadline(due, interval, self.monotonic())
        finally:
            self.shutdown()


JOB_PREFIX = "windows:"
#: wake-up jobs kept at most (the earliest); `LATER` stands for the rest
MAX_JOBS = 256
LATER = f"{JOB_PREFIX}later"


class Scheduler(Protocol):
    """What is used of APScheduler 3's `BaseScheduler` (a host process can pass its own)."""

    @property
    def running(self) -> bool: ...

    def start(self, paused: bool = False) -> None: ...

    def shutdown(self, wait: bool = True) -> None: ...

    def get_jobs(self) -> list[Any]: ...

    def add_job(self, func: Callable[..., Any], trigger: Any = None, args: Any = None, **kwargs: Any) -> Any: ...

    def remove_job(self, job_id: str, jobstore: str | None = None) -> None: ...


def due_wakeups(timeline: ScheduleTimeline, windows: Windows, covering: Mapping[str, Sequence[Occurrence]],
                now: datetime, limit: int = MAX_JOBS) -> dict[str, datetime]:
    """The instants after `now` at which the plan can change, the `limit` earliest (`add_job`
    costs about 0.1 ms), off the pass's `timeline`'s arm order: asking each of 10,000 windows
    every pass was a third of a quiet pass (issue 24). The `limit + 1` soonest arms suffice."""
    out: dict[str, datetime] = {}
    arms = dict(timeline.next_arms(windows, now, limit + 1))
    for name in dict.fromkeys([*covering, *arms]):
        _jobs(out, name, arms.get(name), covering.get(name, ()), now)
    return _earliest(out, limit)


def _jobs(out: dict[str, datetime], name: str, upcoming: Occurrence | None, covered: Sequence[Occurrence],
          now: datetime) -> None:
    """Its next arm, and of those `covered` the earliest end and a draining one's start (its
    reason changes)."""
    if upcoming is not None:
        kind = "drain" if upcoming.lead else "start"
        out[f"{JOB_PREFIX}{kind}:{name}"] = upcoming.arm_at
    if covered:
        out[f"{JOB_PREFIX}end:{name}"] = min(o.end for o in covered)
        starts = [o.start for o in covered if o.start > now]
        if starts:
            out[f"{JOB_PREFIX}start:{name}"] = min(starts)


def _earliest(out: dict[str, datetime], limit: int) -> dict[str, datetime]:
    """With `windows:later` at the earliest one left out."""
    if len(out) <= limit:
        return out
    ordered = sorted(out.items(), key=lambda kv: (kv[1], kv[0]))
    kept = dict(ordered[:limit])
    kept[LATER] = ordered[limit][1]
    return kept


class Lanes:
    """Each scope grouped when first visited (a pass visits a few); `moving`: the versions an
    unconfirmed edit moves to another scope (enabled)."""

    def __init__(self, windows: Windows, moving: Sequence[Window], covering: Iterable[Occurrence],
                 compose: Callable[[Sequence[Part]], Windows]) -> None:
        self.windows = windows
        self.moving = moving
        #: a lane with a moving version is the rows of a schedule composed of its windows and it
        self.compose = compose
        self._at: dict[str, list[int]] | None = None
        #: scope -> the occurrences covering now held there (a moving version's: at its new scope)
        self.covered: dict[str, list[Occurrence]] = {}
        for occurrence in covering:
            self.covered.setdefault(occurrence.scope, []).append(occurrence)

    def at(self, scope: str) -> tuple[list[Lane], dict[str, Any]]:
        """The full lane first, and each window's selector (None: the full lane's)."""
        if self._at is None:
            self._at = {}
            for i in range(len(self.windows)):
                if self.windows.enabled(i):
                    self._at.setdefault(self.windows.scope(i), []).append(i)
        groups: dict[Any, list[int]] = {None: []}
        for i in self._at.get(scope, ()):
            groups.setdefault(self.windows.selector(i), []).append(i)
        scoped = {self.windows.name(i): selector for selector, group in groups.items() for i in group}
        lanes = {selector: self.windows.subset(group) for selector, group in groups.items()}
        for window in (w for w in self.moving if w.scope == scope):
            own = lanes.get(window.selector)
            parts = [own.part(i) for i in range(len(own))] if own is not None else []
            lanes[window.selector] = self.compose([*parts, Part.of(window)])
            scoped[window.name] = window.selector
        covered = self.covered.get(scope, [])
        return [(selector, own, [o for o in covered if scoped.get(o.window) == selector])
                for selector, own in lanes.items()], scoped
