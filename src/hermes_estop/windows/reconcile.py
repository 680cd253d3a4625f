"""The scheduler's decision core: what should happen at one scope at `now`, as a pure function of
the windows, the ledger and one reading of the scope's sentinel. The scheduler (`scheduler.py`) is
the I/O shell that reads those inputs, carries the plan out and reschedules its wake-ups.

Level-triggered: the plan depends only on the state at `now`, never on which wake-up fired, so a
late, missed or repeated wake-up, a restart, or an edit of `windows.toml` all converge.

The rules, per scope:

- The occurrences covering `now` that the ledger has not closed (released, skipped, ended) are
  the candidates. One the ledger says was armed as generation G, whose G no longer stands,
  was released or replaced by the operator before its end: it is closed as released and never
  re-armed.
- A hold the scheduler did not arm (a manual one, an operator's re-arm of ours, an unreadable
  sentinel) is never replaced or weakened: each new candidate is recorded as skipped.
- Otherwise the scope is held by ONE hold the scheduler owns, covering every live candidate:
  deadline = the end of the chain of occurrences on the scope (starting from the candidates,
  every occurrence that starts before or exactly when the chain would lift extends it), so
  overlapping or back-to-back windows leave no free instant; allowlist = the intersection of the
  candidates' allowlists (deny wins: a user works through only if every covering window admits
  them); reason = the candidates' reasons. A fresh arm is fenced on VACANT, a change of our own
  hold on its generation.
- A window with a drain lead is a candidate from `arm_at = start - drain` (`Occurrence.covers`):
  during the lead its part of the reason is "draining for <window>[: <reason>]"; at its start the
  desired reason becomes the window's own, so our hold is re-armed (fenced on its generation,
  deadline and allowlist unchanged) and the ledger records the new generation. An operator's
  re-arm in between is not ours: it is left alone, and the occurrence closed as released.
- No candidate left, and the standing hold is ours: retire exactly that generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from hermes_estop.model.durations import MAX_DURATION
from hermes_estop.model.hold import VACANT, Allow, Hold, HoldState, Reading
from hermes_estop.windows.ledger import ARMED, ENDED, RELEASED, SKIPPED, WITHDRAWN, LedgerEntry
from hermes_estop.windows.model import MAX_REASON, Window
from hermes_estop.windows.occurrences import EXACT, Occurrence, Timeline, Windows, occurrence_key

__all__ = [
    "ARMED_BY_PREFIX",
    "CHAIN_LIMIT",
    "Arm",
    "Desired",
    "Retire",
    "ScopePlan",
    "Skip",
    "chain_end",
    "claims",
    "compose",
    "entry_for",
    "idle",
    "intersect_allow",
    "plan_scope",
]

ARMED_BY_PREFIX = "window:"
#: at most this many future occurrences extend one deadline; the next start re-extends it
CHAIN_LIMIT = 256
_CLOSED = (RELEASED, SKIPPED, ENDED)


@dataclass(frozen=True)
class Desired:
    """The hold the scheduler wants standing at a scope."""

    deadline: datetime
    allow: Allow
    reason: str
    armed_by: str
    window: Mapping[str, Any]

    def matches(self, hold: Hold | None) -> bool:
        return (hold is not None and hold.expires_at == self.deadline and hold.allow == self.allow
                and hold.reason == self.reason)


@dataclass(frozen=True)
class Arm:
    """Write `desired` at `scope` for `members`, fenced by `only_if` (VACANT for a fresh arm,
    {G} to change our own hold G)."""

    scope: str
    members: tuple[Occurrence, ...]
    desired: Desired
    only_if: Any
    replaces: str | None = None
    #: the windows' selector: the arm writes the scoped hold with it (None: the full hold)
    selector: Any = None


@dataclass(frozen=True)
class Retire:
    """Retire generation `generation` at `scope`; then close `entries` as ended."""

    scope: str
    generation: str
    entries: tuple[LedgerEntry, ...]


@dataclass(frozen=True)
class Skip:
    """`occurrence` is due but a hold the scheduler did not arm stands: record the skip."""

    scope: str
    occurrence: Occurrence
    standing: str
    standing_generation: str | None = None


@dataclass(frozen=True)
class ScopePlan:
    """What to do at one scope. `notes` are ledger changes that hold whatever the actions do."""

    scope: str
    now: datetime
    covering: tuple[Occurrence, ...]
    actions: tuple[Arm | Retire | Skip, ...] = ()
    notes: tuple[LedgerEntry, ...] = field(default=())


def entry_for(occurrence: Occurrence, state: str, now: datetime, generation: str | None = None,
              detail: str | None = None) -> LedgerEntry:
    return LedgerEntry(key=occurrence.key, window=occurrence.window, occurrence=occurrence.ident,
                       scope=occurrence.scope, end=occurrence.end, state=state, generation=generation,
                       updated_at=now, detail=detail)


def intersect_allow(allows: Iterable[Allow]) -> Allow:
    """The allowlist admitting exactly whom every one of `allows` admits (deny wins)."""
    users: frozenset[str] | None = None
    profiles: frozenset[str] | None = None
    for allow in allows:
        if not allow.valid:
            return Allow()
        users = allow.user_ids if users is None else users & allow.user_ids
        if allow.profiles:
            profiles = allow.profiles if profiles is None else profiles & allow.profiles
            if not profiles:
                return Allow()
    if not users:
        return Allow()
    return Allow(users, profiles or frozenset())


def claims(hold: Hold | None, scope: str) -> frozenset[str]:
    """The occurrence keys a hold body at `scope` says a window scheduler armed it for (`window`
    field, `armed_by = "window:..."`). An operator's re-arm carries neither, so it never claims."""
    if hold is None or not (hold.armed_by or "").startswith(ARMED_BY_PREFIX) or not hold.window:
        return frozenset()
    items = [hold.window, *list(hold.window.get("covers") or [])]
    out = set()
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get("occurrence"), str):
            out.add(occurrence_key(scope, item["name"], item["occurrence"]))
    return frozenset(out)


def chain_end(members: Sequence[Occurrence], windows: Sequence[Window], now: datetime,
              closed: frozenset[str] = frozenset(), limit: int = CHAIN_LIMIT, timeline: Timeline = EXACT) -> datetime:
    """When the scope may lift: the latest end among `members` and every later occurrence (of
    `windows`, not closed) armed (started, or entering its drain lead) before or exactly at the
    lift instant reached so far. An arm exactly at the lift is chained because intervals are
    half-open: `[a, b)` then `[b, c)` leaves no free instant, and lifting at `b` to re-arm at `b`
    would. At most `limit` occurrences extend it, taken in the order they arm; capped at
    `now + MAX_DURATION`.

    Why a walk in arm order rather than rounds over every window: the occurrences of all the
    windows are taken once, in the order they arm (`Timeline.armed_after`: the exact one
    computes a window's next occurrence only once its previous one was taken). A scope held
    for a week by a thousand windows used to ask every window again for every step of the
    chain (issue 24: a pass took a minute with 10,000 windows). The scheduler passes the
    compiled schedule's timeline when it has it: the occurrences read off one list sorted by
    arm instant, so walking the chain again on every pass costs the chain, not the windows."""
    end = max(o.end for o in members)
    seen = {o.key for o in members} | set(closed)
    horizon = now + MAX_DURATION
    armed = timeline.armed_after(windows, now)
    chained = 0
    while chained < limit and end < horizon:
        occurrence = next(armed, None)
        if occurrence is None or occurrence.arm_at > end:
            break
        if occurrence.key not in seen:
            seen.add(occurrence.key)
            chained += 1
            end = max(end, occurrence.end)
    return min(end, horizon)


def compose(members: Sequence[Occurrence], windows: Mapping[str, Window], deadline: datetime,
            now: datetime | None = None) -> Desired:
    """The one hold covering `members`: intersection of allowlists, their reasons, the deadline.
    Named (armed_by, window) after the earliest-starting member; `covers` lists them all. A
    member still in its drain lead at `now` contributes "draining for <window>[: <reason>]"."""
    ordered = sorted(members, key=lambda o: (o.start, o.window))
    primary = ordered[0]
    reasons: list[str] = []
    for occurrence in ordered:
        window = windows[occurrence.window]
        reason = window.reason_for(occurrence.reason, draining=now is not None and occurrence.draining(now))
        if reason not in reasons:
            reasons.append(reason)
    reason = "; ".join(reasons)
    if len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 3].rstrip() + "..."
    body: dict[str, Any] = {"name": primary.window, "occurrence": primary.ident}
    if len(ordered) > 1:
        body["covers"] = [{"name": o.window, "occurrence": o.ident} for o in ordered]
    return Desired(
        deadline=deadline,
        allow=intersect_allow(windows[o.window].hold_allow for o in ordered),
        reason=reason,
        armed_by=f"{ARMED_BY_PREFIX}{primary.window}",
        window=body,
    )


def _describe_standing(reading: Reading) -> str:
    if reading.state is HoldState.UNREADABLE:
        return f"an unreadable sentinel ({reading.problem})"
    hold = reading.hold
    if hold is None or hold.generation is None:
        return "a hand-written hold"
    by = f" (armed by {hold.armed_by})" if hold.armed_by else ""
    return f"generation {hold.generation}{by}"


def _adopt(scope: str, now: datetime, reading: Reading, ours: set[str],
           candidates: Sequence[Occurrence]) -> list[LedgerEntry]:
    """Armed entries for the candidates the standing hold's body says a window armed (the
    ledger missed them: a crash between the arm and the ledger write)."""
    hold = reading.hold
    if not reading.active or hold is None or hold.generation is None or hold.generation in ours:
        return []
    adopted = claims(hold, scope)
    return [entry_for(o, ARMED, now, hold.generation, "adopted: the hold body names this occurrence")
            for o in candidates if o.key in adopted]


def _triage(candidates: Sequence[Occurrence], armed: Mapping[str, LedgerEntry], entries: Mapping[str, LedgerEntry],
            recalled: Mapping[str, str], reading: Reading, now: datetime
            ) -> tuple[list[Occurrence], list[Occurrence], list[LedgerEntry]]:
    """Split the candidates into alive (our hold for them stands), fresh (to arm) and the notes
    closing those whose hold went away before the end (released: never re-armed). An
    occurrence the ledger does not know but the audit trail says was armed as G (`recalled`)
    counts as armed as G."""
    standing = reading.hold.generation if reading.hold is not None else None
    gone = f"replaced by {_describe_standing(reading)}" if reading.active else "released"
    alive: list[Occurrence] = []
    fresh: list[Occurrence] = []
    notes: list[LedgerEntry] = []
    for o in candidates:
        entry = armed.get(o.key)
        if entry is None and o.key not in entries and o.key in recalled:
            generation = recalled[o.key]
            if reading.active and generation == standing:
                alive.append(o)
                notes.append(entry_for(o, ARMED, now, generation, "adopted: the audit trail says the window armed it"))
            else:
                notes.append(entry_for(o, RELEASED, now, generation,
                                       f"generation {generation} {gone} before the end (from the audit trail)"))
        elif entry is None:
            fresh.append(o)
        elif reading.active and entry.generation == standing:
            alive.append(o)
        else:
            notes.append(entry.moved(RELEASED, now, detail=f"generation {entry.generation} {gone} before the end"))
    return alive, fresh, notes


def _close(stale: Sequence[LedgerEntry], now: datetime) -> list[LedgerEntry]:
    """Close armed entries no longer among the candidates: ended when the occurrence is over;
    withdrawn (re-armed if the window comes back before the end) when its window went away."""
    return [entry.moved(ENDED if entry.end <= now else WITHDRAWN, now,
                        detail=None if entry.end <= now else "its window was removed, disabled or moved")
            for entry in stale]


def _arm_or_keep(scope: str, now: datetime, members: Sequence[Occurrence], fresh: Sequence[Occurrence],
                 desired: Desired, reading: Reading, selector: Any) -> tuple[tuple[Arm, ...], list[LedgerEntry]]:
    """The arm (fresh, fenced on VACANT; or a change of our own hold) that makes the scope held
    by `desired`, the one hold covering `members`, or nothing when the standing hold already is it."""
    if not reading.active:
        return (Arm(scope, tuple(members), desired, VACANT, selector=selector),), []
    standing = reading.hold.generation if reading.hold is not None else None
    assert standing is not None
    if desired.matches(reading.hold):
        return (), [entry_for(o, ARMED, now, standing) for o in fresh]
    return (Arm(scope, tuple(members), desired, frozenset({standing}), standing, selector),), []


def idle(covered: Sequence[Occurrence], entries: Mapping[str, LedgerEntry]) -> bool:
    """Whether `plan_scope` has nothing to do at a scope whatever its sentinel holds: no
    occurrence covers `now` and the ledger has nothing armed there (so nothing to arm, adopt,
    skip, close or retire). Why it exists: a fleet with 1,000 profiles has a few scopes in a
    window at any time, and reading every other scope's sentinel on every pass was most of
    a pass (issue 24); the scheduler reads a scope only when this is False."""
    return not covered and all(entry.state != ARMED for entry in entries.values())


def _armed(scope: str, now: datetime, entries: Mapping[str, LedgerEntry], reading: Reading,
           candidates: Sequence[Occurrence]) -> tuple[dict[str, LedgerEntry], set[str], list[LedgerEntry]]:
    """The armed entries of the scope (with those the standing hold's body adopts: `_adopt`),
    the generations the scheduler armed, and the adopted entries."""
    armed = {k: e for k, e in entries.items() if e.state == ARMED}
    ours = {e.generation for e in armed.values() if e.generation}
    adopted = _adopt(scope, now, reading, ours, candidates)
    armed.update((e.key, e) for e in adopted)
    ours.update(e.generation for e in adopted if e.generation)
    return armed, ours, adopted


def _lift(plan: ScopePlan, reading: Reading, ours: set[str], notes: list[LedgerEntry],
          closing: list[LedgerEntry]) -> ScopePlan:
    """`plan` with no candidate left: retire the standing hold when it is ours (its closing
    entries go with the retire), else only the notes."""
    standing = reading.hold.generation if reading.hold is not None else None
    if reading.present and standing is not None and standing in ours:
        retiring = tuple(e for e in closing if e.generation == standing)
        others = [e for e in closing if e.generation != standing]
        return replace(plan, actions=(Retire(plan.scope, standing, retiring),), notes=tuple(notes + others))
    return replace(plan, notes=tuple(notes + closing))


def _named(windows: Sequence[Window], members: Sequence[Occurrence]) -> dict[str, Window]:
    given = Windows.of(windows)
    found = {name: given.named(name) for name in {o.window for o in members}}  # a row's built only for a member
    return {name: window for name, window in found.items() if window is not None}


def plan_scope(scope: str, now: datetime, windows: Sequence[Window], entries: Mapping[str, LedgerEntry],
               reading: Reading, *, recalled: Mapping[str, str] | None = None,
               covered: Sequence[Occurrence] | None = None, selector: Any = None,
               timeline: Timeline = EXACT) -> ScopePlan:
    """The plan for `scope` at `now`. `windows`: the enabled windows of this scope; `entries`:
    the ledger entries of this scope; `reading`: the scope's sentinel as read at `now`;
    `recalled`: occurrence key -> generation, for occurrences the ledger does not know that the
    audit trail says a window scheduler armed (`recall.recall`); `covered`: the occurrences of
    `windows` covering `now`, when the caller has them already (the pass's schedule). With
    `selector`, the plan is for the scoped hold of that selector at `scope` (`windows` all carry
    it, `reading` is that scoped hold's): the same rules, one lane of the scope. `timeline`:
    where the windows' occurrences are looked up (the exact functions, or the compiled
    schedule of the file the windows were read from: the same answers)."""
    if covered is None:
        covered = [o for w in windows for o in timeline.around(w, now)[0]]
    plan = ScopePlan(scope, now, tuple(sorted(covered)))
    closed = frozenset(k for k, e in entries.items() if e.state in _CLOSED)
    candidates = [o for o in plan.covering if o.key not in closed]
    armed, ours, adopted = _armed(scope, now, entries, reading, candidates)
    alive, fresh, released = _triage(candidates, armed, entries, recalled or {}, reading, now)
    keys = {o.key for o in candidates}
    closing = _close([e for k, e in armed.items() if k not in keys], now)
    notes = adopted + released
    ours.update(e.generation for e in notes if e.state == ARMED and e.generation)
    standing = reading.hold.generation if reading.hold is not None else None
    if reading.active and standing not in ours:
        skips = tuple(Skip(scope, o, _describe_standing(reading), standing) for o in fresh)
        return replace(plan, actions=skips, notes=tuple(notes + closing))
    members = alive + fresh
    if not members:
        return _lift(plan, reading, ours, notes, closing)
    deadline = chain_end(members, windows, now, closed, timeline=timeline)
    actions, kept = _arm_or_keep(scope, now, members, fresh, compose(members, _named(windows, members), deadline, now),
                                 reading, selector)
    return replace(plan, actions=actions, notes=tuple(notes + closing + kept))
