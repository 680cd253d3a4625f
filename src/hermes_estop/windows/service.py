"""The window scheduler: `tick(now) -> TickReport` carries out the plan of `reconcile.plan_scope`
at every scope, and APScheduler 3 date jobs wake it at the instants the occurrences say (each
window's next start; the end of what covers now: the expiry job). A thin loop around it
(`run(stop)`) also reconciles every `poll_interval` seconds, which is how edits of
`windows.toml` are picked up without a restart, and what makes a missed wake-up harmless.

APScheduler only ever sees `DateTrigger`s at instants computed by `occurrences`; it never reads a
cron expression. Jobs run on a one-thread executor and every tick holds the service's lock, so
decisions never interleave within a process; across processes the store's fenced writes and the
ledger's lock do.

High availability plugs in through `is_leader`: it is asked before every write (hold or ledger);
a scheduler that is not the leader plans, schedules its wake-ups and writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from ..errors import EstopError, HoldConflict, InvalidInstant, StoreError
from ..estop import Estop
from ..hold import Reading
from ..homes import FLEET, validate_profile_name
from ..timeutil import format_instant
from .ledger import ARMED, RELEASED, RETENTION, SKIPPED, LedgerEntry, OccurrenceLedger, open_ledger
from .model import InvalidWindow, Window, WindowsFile
from .occurrences import covering, next_start
from .reconcile import Arm, Retire, ScopePlan, Skip, entry_for, plan_scope

__all__ = ["JOB_PREFIX", "POLL_INTERVAL", "Event", "TickReport", "WindowService"]

logger = logging.getLogger("hermes_estop.windows")

JOB_PREFIX = "windows:"
POLL_INTERVAL = 5.0
_MAX_ROUNDS = 3


@dataclass(frozen=True)
class Event:
    """One thing a tick did (or, in a dry run, would do)."""

    kind: str  # arm | rearm | retire | skip | released | adopted | error
    scope: str
    windows: tuple[str, ...] = ()
    occurrences: tuple[str, ...] = ()
    generation: str | None = None
    deadline: datetime | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "scope": self.scope, "windows": list(self.windows),
                "occurrences": list(self.occurrences), "generation": self.generation,
                "deadline": format_instant(self.deadline), "detail": self.detail}

    def describe(self) -> str:
        names = "+".join(self.windows) or "-"
        until = f" until {format_instant(self.deadline)}" if self.deadline else ""
        gen = f" (generation {self.generation})" if self.generation else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"window {names}: {self.kind} {self.scope}{until}{gen}{detail}"


@dataclass
class TickReport:
    """What one reconciliation saw and did."""

    now: datetime
    leader: bool = True
    dry_run: bool = False
    windows: int = 0
    events: list[Event] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wakeups: dict[str, datetime] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "now": format_instant(self.now),
            "leader": self.leader,
            "dry_run": self.dry_run,
            "windows": self.windows,
            "active": list(self.active),
            "events": [event.to_json() for event in self.events],
            "errors": list(self.errors),
            "wakeups": {key: format_instant(when) for key, when in sorted(self.wakeups.items(), key=lambda kv: kv[1])},
        }


def _always() -> bool:
    return True


class WindowService:
    """Arms and retires the holds of the maintenance windows of one fleet."""

    name = "windows"

    def __init__(
        self,
        estop: Estop,
        *,
        windows_file: WindowsFile | None = None,
        ledger: OccurrenceLedger | None = None,
        is_leader: Callable[[], bool] | None = None,
        scheduler: Any = None,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        self.estop = estop
        self.clock = estop.clock
        self.windows_file = windows_file or WindowsFile(estop.layout.root)
        self.ledger = ledger or open_ledger(estop.layout.root, estop.store)
        self.is_leader = is_leader or _always
        self.scheduler = scheduler
        self.poll_interval = float(poll_interval)
        self._lock = threading.RLock()
        self._loaded: tuple[tuple[int, ...] | None, list[Window]] | None = None
        self._load_error: tuple[tuple[int, ...] | None, str] | None = None
        self._owns_scheduler = False

    def __repr__(self) -> str:
        return f"WindowService({self.windows_file.path})"

    # -- inputs ------------------------------------------------------------------------------

    def load_windows(self) -> list[Window]:
        """The windows of the file, re-read only when the file changed. Raises `InvalidWindow`
        or `StoreError` (logged once per version of the file)."""
        identity = self.windows_file.identity()
        if self._loaded is not None and self._loaded[0] == identity:
            return self._loaded[1]
        try:
            windows = self.windows_file.load()
        except (InvalidWindow, StoreError) as exc:
            if self._load_error is None or self._load_error[0] != identity:
                logger.error("%s (no window is armed or retired until it validates)", exc)
            self._load_error = (identity, str(exc))
            raise
        if self._loaded is not None or windows:
            logger.info("windows: %d loaded from %s", len(windows), self.windows_file.path)
        self._loaded = (identity, windows)
        self._load_error = None
        return windows

    def _reading(self, scope: str, now: datetime) -> Reading:
        return self.estop.store.read((self.estop.layout.location(scope),), now)[0]

    # -- deciding and acting -----------------------------------------------------------------

    def plan(self, now: datetime | None = None) -> tuple[TickReport, list[ScopePlan]]:
        """A dry run: what a tick at `now` would do, without writing anything."""
        with self._lock:
            report = TickReport(now=now or self.clock(), dry_run=True)
            plans: list[ScopePlan] = []
            inputs = self._inputs(report)
            if inputs is None:
                return report, plans
            windows, entries = inputs
            for scope in self._scopes(windows, entries):
                plan = plan_scope(scope, report.now, self._on(scope, windows), self._of(scope, entries),
                                  self._reading(scope, report.now))
                plans.append(plan)
                report.events.extend(_planned_events(plan))
            self._note_active(report, windows)
            report.wakeups = self.wakeups_for(windows, report.now)
            return report, plans

    def tick(self, now: datetime | None = None) -> TickReport:
        """One reconciliation at `now` (default: the clock, read once): every scope's plan is
        carried out, the ledger committed, the wake-ups rescheduled."""
        with self._lock:
            report = TickReport(now=now or self.clock())
            inputs = self._inputs(report)
            if inputs is None:
                return report
            windows, entries = inputs
            report.leader = self._may_write()
            changes: dict[str, LedgerEntry] = {}
            if report.leader:
                for scope in self._scopes(windows, entries):
                    try:
                        self._reconcile_scope(scope, report, windows, entries, changes)
                    except (EstopError, OSError) as exc:
                        self._error(report, f"scope {scope}: {exc}")
                self._commit(report, entries, changes)
            self._note_active(report, windows)
            report.wakeups = self.wakeups_for(windows, report.now)
            self._schedule(report)
            return report

    def reconcile(self) -> TickReport:
        """`tick()` that never raises: what wake-up jobs and the poll loop call."""
        try:
            return self.tick()
        except Exception as exc:  # a wake-up must never take the scheduler down
            logger.exception("windows: reconciliation failed")
            report = TickReport(now=self.clock())
            report.errors.append(f"{type(exc).__name__}: {exc}")
            return report

    def _inputs(self, report: TickReport) -> tuple[list[Window], dict[str, LedgerEntry]] | None:
        try:
            windows = self.load_windows()
            entries = self.ledger.load()
        except (InvalidWindow, StoreError) as exc:
            report.errors.append(str(exc))
            return None
        report.windows = len(windows)
        return windows, entries

    def _may_write(self) -> bool:
        try:
            return bool(self.is_leader())
        except Exception as exc:
            logger.warning("windows: leadership check failed (%s): acting as standby", exc)
            return False

    @staticmethod
    def _on(scope: str, windows: Iterable[Window]) -> list[Window]:
        return [w for w in windows if w.enabled and w.scope == scope]

    @staticmethod
    def _of(scope: str, entries: dict[str, LedgerEntry]) -> dict[str, LedgerEntry]:
        return {k: e for k, e in entries.items() if e.scope == scope}

    @staticmethod
    def _scopes(windows: Iterable[Window], entries: dict[str, LedgerEntry]) -> list[str]:
        scopes = {w.scope for w in windows}
        for entry in entries.values():
            if entry.state == ARMED and _valid_scope(entry.scope):
                scopes.add(entry.scope)
        return sorted(scopes, key=lambda s: (s != FLEET, s))

    def _reconcile_scope(self, scope: str, report: TickReport, windows: list[Window],
                         entries: dict[str, LedgerEntry], changes: dict[str, LedgerEntry]) -> None:
        on_scope = self._on(scope, windows)
        by_name = {w.name: w for w in windows}
        for _ in range(_MAX_ROUNDS):
            now = report.now
            plan = plan_scope(scope, now, on_scope, self._of(scope, entries), self._reading(scope, now))
            for note in plan.notes:
                self._remember(note, entries, changes)
                event = _note_event(scope, note)
                if event is not None:
                    self._event(report, event)
            conflict = False
            for action in plan.actions:
                if not self._may_write():
                    report.leader = False
                    return
                if isinstance(action, Arm):
                    conflict |= not self._arm(action, report, entries, changes)
                elif isinstance(action, Retire):
                    self._retire(action, report, entries, changes)
                elif isinstance(action, Skip):
                    self._skip(action, report, by_name, entries, changes)
            if not conflict:
                return
        self._error(report, f"scope {scope}: the hold kept changing under the scheduler; will retry")

    def _arm(self, action: Arm, report: TickReport, entries: dict[str, LedgerEntry],
             changes: dict[str, LedgerEntry]) -> bool:
        desired = action.desired
        try:
            hold = self.estop.engage(
                reason=desired.reason, allow=desired.allow, expires_at=desired.deadline, replace=True,
                scope=action.scope, armed_by=desired.armed_by, window=dict(desired.window),
                only_if=action.only_if,
            )
        except HoldConflict:
            return False  # someone wrote in between: plan again from what stands now
        except InvalidInstant:
            return False  # the deadline passed while deciding: plan again
        for occurrence in action.members:
            self._remember(entry_for(occurrence, ARMED, report.now, hold.generation), entries, changes)
        self._event(report, _action_event(action, hold.generation))
        return True

    def _retire(self, action: Retire, report: TickReport, entries: dict[str, LedgerEntry],
                changes: dict[str, LedgerEntry]) -> None:
        removed = self.estop.retire(action.generation, scope=action.scope)
        for entry in action.entries:
            self._remember(entry, entries, changes)
        if removed:
            self._event(report, _action_event(action))

    def _skip(self, action: Skip, report: TickReport, by_name: dict[str, Window],
              entries: dict[str, LedgerEntry], changes: dict[str, LedgerEntry]) -> None:
        occurrence = action.occurrence
        detail = (f"window {occurrence.window} occurrence {occurrence.ident} skipped: {action.scope} is held by "
                  f"{action.standing}, which the window did not arm")
        location = self.estop.layout.location(action.scope)
        window = by_name.get(occurrence.window)
        self.estop.record("skip", location, generation=action.standing_generation,
                          reason=window.hold_reason if window else None, deadline=occurrence.end, detail=detail)
        self._remember(entry_for(occurrence, SKIPPED, report.now, None, f"held by {action.standing}"), entries, changes)
        self._event(report, _action_event(action))

    @staticmethod
    def _remember(entry: LedgerEntry, entries: dict[str, LedgerEntry], changes: dict[str, LedgerEntry]) -> None:
        entries[entry.key] = entry
        changes[entry.key] = entry

    def _commit(self, report: TickReport, entries: dict[str, LedgerEntry], changes: dict[str, LedgerEntry]) -> None:
        cutoff = report.now - RETENTION
        prune = any(entry.end < cutoff for entry in entries.values())
        if not changes and not prune:
            return
        if not self._may_write():
            report.leader = False
            return
        try:
            self.ledger.commit(changes.values(), prune_before=cutoff if prune else None)
        except StoreError as exc:
            self._error(report, f"{exc} (a hold armed now is recognised again by its body)")

    def _event(self, report: TickReport, event: Event) -> None:
        report.events.append(event)
        if not report.dry_run:
            logger.info("%s", event.describe())

    @staticmethod
    def _error(report: TickReport, message: str) -> None:
        report.errors.append(message)
        logger.error("windows: %s", message)

    @staticmethod
    def _note_active(report: TickReport, windows: list[Window]) -> None:
        report.active = sorted(o.key for w in windows if w.enabled for o in covering(w, report.now))

    # -- waking up ---------------------------------------------------------------------------

    @staticmethod
    def wakeups_for(windows: Iterable[Window], now: datetime) -> dict[str, datetime]:
        """The instants after `now` at which the plan can change: each enabled window's next
        start (`windows:start:<name>`) and the earliest end among its occurrences covering `now`
        (`windows:end:<name>`, the expiry job). Every wake-up re-plans and reschedules."""
        out: dict[str, datetime] = {}
        for window in windows:
            if not window.enabled:
                continue
            upcoming = next_start(window, now)
            if upcoming is not None:
                out[f"{JOB_PREFIX}start:{window.name}"] = upcoming.start
            ends = [o.end for o in covering(window, now)]
            if ends:
                out[f"{JOB_PREFIX}end:{window.name}"] = min(ends)
        return out

    def _schedule(self, report: TickReport) -> None:
        scheduler = self.scheduler
        if scheduler is None:
            return
        from apscheduler.jobstores.base import JobLookupError
        from apscheduler.triggers.date import DateTrigger

        desired = report.wakeups
        existing = {job.id: job for job in scheduler.get_jobs() if job.id.startswith(JOB_PREFIX)}
        for job_id in existing.keys() - desired.keys():
            try:
                scheduler.remove_job(job_id)
            except JobLookupError:
                pass
        for job_id, when in desired.items():
            job = existing.get(job_id)
            if job is not None and getattr(job, "next_run_time", None) == when:
                continue
            scheduler.add_job(self._wake, trigger=DateTrigger(run_date=when, timezone=timezone.utc), id=job_id,
                              name=job_id, args=(job_id,), replace_existing=True, misfire_grace_time=None,
                              coalesce=True, max_instances=1)

    def _wake(self, job_id: str) -> None:
        logger.debug("windows: woke for %s", job_id)
        self.reconcile()

    def jobs(self) -> dict[str, datetime]:
        """The wake-ups currently scheduled with APScheduler."""
        if self.scheduler is None:
            return {}
        return {job.id: job.next_run_time for job in self.scheduler.get_jobs() if job.id.startswith(JOB_PREFIX)}

    # -- running -----------------------------------------------------------------------------

    def start(self) -> TickReport:
        """Start APScheduler (a BackgroundScheduler unless one was given) and reconcile once."""
        if self.scheduler is None:
            self.scheduler = _make_scheduler()
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
        seconds, paced on `time.monotonic` (missed polls are skipped, never run in a burst)."""
        self.start()
        logger.info("windows: scheduling %s (ledger %s, poll every %gs)", self.windows_file.path,
                    self.ledger.describe(), self.poll_interval)
        try:
            interval = max(self.poll_interval, 0.05)
            due = time.monotonic() + interval
            while not stop.wait(max(0.0, due - time.monotonic())):
                self.reconcile()
                due += interval
                now = time.monotonic()
                if due <= now:
                    due = now + interval
        finally:
            self.shutdown()


def _make_scheduler() -> Any:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(
        timezone=timezone.utc,
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )


def _valid_scope(scope: str) -> bool:
    if scope == FLEET:
        return True
    try:
        validate_profile_name(scope)
    except EstopError:
        return False
    return True


def _names(occurrences: Iterable[Any]) -> tuple[str, ...]:
    out: list[str] = []
    for occurrence in occurrences:
        if occurrence.window not in out:
            out.append(occurrence.window)
    return tuple(out)


def _note_event(scope: str, note: LedgerEntry) -> Event | None:
    """The event a ledger note is worth reporting as: an early release, or an adopted hold."""
    if note.state == RELEASED:
        return Event("released", scope, (note.window,), (note.occurrence,), note.generation, None,
                     f"{note.detail}; not re-armed" if note.detail else "not re-armed")
    if note.state == ARMED and note.detail:
        return Event("adopted", scope, (note.window,), (note.occurrence,), note.generation, None, note.detail)
    return None


def _action_event(action: Arm | Retire | Skip, generation: str | None = None) -> Event:
    """The event an action is reported as; `generation` is what an arm minted (None: planned)."""
    if isinstance(action, Arm):
        detail = f"replaces our generation {action.replaces}" if action.replaces else None
        return Event("rearm" if action.replaces else "arm", action.scope, _names(action.members),
                     tuple(o.ident for o in action.members), generation, action.desired.deadline, detail)
    if isinstance(action, Retire):
        return Event("retire", action.scope, tuple(sorted({e.window for e in action.entries})),
                     tuple(e.occurrence for e in action.entries), action.generation)
    occurrence = action.occurrence
    return Event("skip", action.scope, (occurrence.window,), (occurrence.ident,), action.standing_generation,
                 occurrence.end, f"held by {action.standing}, which the window did not arm")


def _planned_events(plan: ScopePlan) -> list[Event]:
    events = [event for event in (_note_event(plan.scope, note) for note in plan.notes) if event is not None]
    events.extend(_action_event(action) for action in plan.actions)
    return events
