"""Carrying out a scope's plan (the writes of an `Arm`, a `Retire` and a `Skip`) and what a
pass reports (`TickEvent`s, the `TickReport`); `PassState` is what one pass accumulates. The
scheduler decides when to call these; nothing here decides anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import EstopError, HoldConflict
from hermes_estop.model.hold import EngageRequest, Fence, clean_reason
from hermes_estop.model.policy import Actor, PolicyRefused
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.windows.ledger import ARMED, INTENT, RELEASED, SKIPPED, LedgerEntry, entry_for, intent_detail
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import EXACT, Timeline
from hermes_estop.windows.plan import Arm, Retire, ScopePlan, Skip

__all__ = ["EDIT", "Actions", "PassState", "TickEvent", "TickReport", "action_event", "note_event", "planned_events"]

@dataclass(frozen=True)
class TickEvent:
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
        until = f" until {display_instant(self.deadline)}" if self.deadline else ""
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
    events: list[TickEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wakeups: dict[str, datetime] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)
    #: why this pass did not act on all of the read (an unconfirmed weakening)
    pending: str | None = None
    #: one line per window whose table does not validate (held as it was; the others proceed)
    failed: list[str] = field(default_factory=list)
    #: calendar name -> why it runs on its last good copy (cannot be fetched, read or parsed)
    stale: dict[str, str] = field(default_factory=dict)

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
            "pending": self.pending,
            "failed": list(self.failed),
            "stale": dict(self.stale),
            "wakeups": {key: format_instant(when) for key, when in sorted(self.wakeups.items(), key=lambda kv: kv[1])},
        }


def note_event(scope: str, note: LedgerEntry) -> TickEvent | None:
    """The event a ledger note is worth reporting as: an early release, or an adopted hold."""
    if note.state == RELEASED:
        return TickEvent("released", scope, (note.window,), (note.occurrence,), note.generation, None,
                     f"{note.detail}; not re-armed" if note.detail else "not re-armed")
    if note.state == ARMED and note.detail:
        return TickEvent("adopted", scope, (note.window,), (note.occurrence,), note.generation, None, note.detail)
    return None


def action_event(action: Arm | Retire | Skip, generation: str | None = None) -> TickEvent:
    """The event an action is reported as; `generation` is what an arm minted (None: planned)."""
    if isinstance(action, Arm):
        detail = f"replaces our generation {action.replaces}" if action.replaces else None
        return TickEvent("rearm" if action.replaces else "arm", action.scope, tuple(dict.fromkeys(o.window for o in action.members)),
                     tuple(o.ident for o in action.members), generation, action.desired.deadline, detail)
    if isinstance(action, Retire):
        return TickEvent("retire", action.scope, tuple(sorted({e.window for e in action.entries})),
                     tuple(e.occurrence for e in action.entries), action.generation)
    occurrence = action.occurrence
    return TickEvent("skip", action.scope, (occurrence.window,), (occurrence.ident,), action.standing_generation,
                 occurrence.end, f"held by {action.standing}, which the window did not arm")


def planned_events(plan: ScopePlan) -> list[TickEvent]:
    events = [event for event in (note_event(plan.scope, note) for note in plan.notes) if event is not None]
    events.extend(action_event(action) for action in plan.actions)
    return events


logger = logging.getLogger("hermes_estop.windows")
#: who a retire the windows file asks for is judged as: nobody a policy's roles can name
EDIT = Actor(name="windows-file-edit")
_REFUSED_KEPT = 1024


@dataclass
class PassState:
    """One pass: its report, the ledger entries as they now stand, and the changes to commit."""

    report: TickReport
    entries: dict[str, LedgerEntry]
    changes: dict[str, LedgerEntry] = field(default_factory=dict)
    #: where the pass looks occurrences up (the pass's compiled schedule)
    timeline: Timeline = EXACT
    #: the audit trail's newest events by scope, read at most once a pass (`WindowService._recalled`)
    trail: dict[str, list[AuditEvent]] | None = None
    #: `entries` by scope, built at the first `of` and kept up to date by `remember`
    _by_scope: dict[str, dict[str, LedgerEntry]] | None = field(default=None, repr=False)

    def remember(self, entry: LedgerEntry) -> None:
        self.entries[entry.key] = entry
        self.changes[entry.key] = entry
        if self._by_scope is not None:
            self._by_scope.setdefault(entry.scope, {})[entry.key] = entry

    def of(self, scope: str) -> dict[str, LedgerEntry]:
        """The entries of `scope` as they now stand (a copy; indexed: filtering the whole ledger
        for each of a thousand profiles cost more than the planning, issue 24)."""
        if self._by_scope is None:
            self._by_scope = {}
            for key, entry in self.entries.items():
                self._by_scope.setdefault(entry.scope, {})[key] = entry
        return dict(self._by_scope.get(scope, {}))

    def event(self, event: TickEvent) -> None:
        self.report.events.append(event)
        if not self.report.dry_run:
            logger.info("%s", event.describe())

    def error(self, message: str) -> None:
        self.report.errors.append(message)
        logger.error("windows: %s", message)


class Actions:
    """The writes of the window scheduler, through the fleet (its store, clock and actor)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        #: generations whose retire the policy refused (left to their deadman)
        self._refused: set[str] = set()

    def arm(self, action: Arm, state: PassState) -> bool:
        """Write the desired hold, after its intent in the audit trail (`ledger.recall`: failing
        to write that never stops the arm); False when the hold changed in between (plan again)."""
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
        """Retire a hold the scheduler armed. Before its deadline the windows file no longer holds
        it, and an edit is not an operator's act: the retire is judged as `EDIT`, so under a
        policy limiting who lifts a window's hold (`lift_windows`) it stays until its deadman
        (the refusal on the record once, not asked again)."""
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

    def skip(self, action: Skip, state: PassState, by_name: Mapping[str, Window]) -> None:
        occurrence = action.occurrence
        detail = (f"window {occurrence.window} occurrence {occurrence.ident} skipped: {action.scope} is held by "
                  f"{action.standing}, which the window did not arm")
        window = by_name.get(occurrence.window)
        reason = window.reason_for(occurrence.reason) if window else occurrence.reason
        self.fleet.record("skip", self.fleet.location(action.scope), generation=action.standing_generation,
                          reason=reason, deadline=occurrence.end, detail=detail)
        state.remember(entry_for(occurrence, SKIPPED, state.report.now, None, f"held by {action.standing}"))
        state.event(action_event(action))
