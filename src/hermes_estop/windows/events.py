"""What a reconciliation reports: `Event`s (one per arm, re-arm, retire, skip, early release,
adoption) and the `TickReport` of one pass, with the translation of a plan into events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.windows.ledger import ARMED, RELEASED, LedgerEntry
from hermes_estop.windows.reconcile import Arm, Retire, ScopePlan, Skip

__all__ = ["TickEvent", "TickReport", "action_event", "note_event", "planned_events"]


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


def _names(occurrences: Iterable[Any]) -> tuple[str, ...]:
    out: list[str] = []
    for occurrence in occurrences:
        if occurrence.window not in out:
            out.append(occurrence.window)
    return tuple(out)


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
        return TickEvent("rearm" if action.replaces else "arm", action.scope, _names(action.members),
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
