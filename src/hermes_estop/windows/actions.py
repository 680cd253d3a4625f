"""Carrying out a scope's plan: the writes of an `Arm`, a `Retire` and a `Skip`, and what one
reconciliation pass accumulates meanwhile (`PassState`: the report, the ledger as it stands, the
ledger changes to commit). The scheduler (`scheduler.py`) decides when to call these; nothing here
decides anything.

Before every arm an intent is appended to the audit trail (`arm_intents`), so an arm the ledger
missed (a crash in between) is remembered after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import EstopError, HoldConflict
from hermes_estop.model.hold import EngageRequest, Fence, clean_reason
from hermes_estop.model.policy import Actor, PolicyRefused
from hermes_estop.model.text import one_line
from hermes_estop.windows.arm_intents import INTENT, intent_detail
from hermes_estop.windows.events import TickEvent, TickReport, action_event
from hermes_estop.windows.ledger import ARMED, SKIPPED, LedgerEntry
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import EXACT, Timeline
from hermes_estop.windows.reconcile import Arm, Retire, Skip, entry_for

__all__ = ["EDIT", "Actions", "PassState"]

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
    #: where the pass looks occurrences up (`occurrences.EXACT`, or the compiled schedule of the
    #: bytes the pass's windows were validated from: `schedule.Schedules`)
    timeline: Timeline = EXACT
    #: `entries` by scope, built at the first `of` and kept up to date by `remember`
    _by_scope: dict[str, dict[str, LedgerEntry]] | None = field(default=None, repr=False)

    def remember(self, entry: LedgerEntry) -> None:
        self.entries[entry.key] = entry
        self.changes[entry.key] = entry
        if self._by_scope is not None:
            self._by_scope.setdefault(entry.scope, {})[entry.key] = entry

    def of(self, scope: str) -> dict[str, LedgerEntry]:
        """The entries of `scope` as they now stand (a copy). Why an index: a pass plans every
        scope, and filtering the whole ledger for each of a thousand profiles cost more than
        the planning itself (issue 24)."""
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
        """Write the desired hold; False when the hold changed in between (plan again)."""
        desired = action.desired
        self._intend(action)
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

    def _intend(self, action: Arm) -> None:
        """The audit intent `recall` pairs with the store's own audit of the write. Failing to
        write it never stops the arm: a hold matters more than the memory of it."""
        try:
            self.fleet.record(INTENT, self.fleet.location(action.scope), reason=action.desired.reason,
                              deadline=action.desired.deadline, detail=intent_detail(o.key for o in action.members))
        except (EstopError, OSError) as exc:
            logger.warning("windows: cannot record the arm in the audit trail (%s); arming anyway", exc)

    def retire(self, action: Retire, state: PassState) -> None:
        """Retire a hold the scheduler armed. At or past its deadline that is the window's end,
        written as the scheduler. Before it, the windows say it no longer holds (a window
        removed, shortened, moved): an edit of the windows file is not an operator's act, so
        the retire is judged as the file's (`EDIT`), which no role maps to, and under a policy
        that limits who lifts a window's hold (`lift_windows`) the hold stays until the deadline
        it was armed with. A refusal is on the record once; the hold is left to its deadman and
        not asked again."""
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
