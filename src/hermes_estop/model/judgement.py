"""A write judged by what it does, not by its verb or door (docs/design.md, "A write is judged by
what it does"; issue 43).

Every write of a hold is a transition of one location's body: from what stands there, read
under the location's lock (or inside the transaction), to the body the write leaves. `judge`
is the one pure decision every door reaches (the CLI, the API, the page, the Python API, the
drop-in, windows, leases): per hold of the location (the full hold, each scoped hold by its id)
it finds what the write **weakens**:

- `removes`: a standing hold is gone;
- `deadline`: its deadman comes earlier (or one appears where there was none);
- `cover`: a scoped hold covers less than it did;
- `allowlist`: someone is admitted who was not;
- `owner`: `armed_by` changes;

and which holds it **arms** (written anew: judged by the arming rules). A weakening needs lift
rights under the policy (`decide_lift`, judged against the hold's owner); an arm needs the
arming rules (`arm_refusals`). A hold that has expired is no longer held: removing or changing
it weakens nothing. "Expired" is judged conservatively: a hold stands while the caller's clock
OR the store's trusted clock says it does (a process decides for itself, never for the fleet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hermes_estop.model.hold import Allow, Hold, HoldState, Reading, Sentinel, owner_after
from hermes_estop.model.policy import (
    LEASE_PREFIX,
    Actor,
    HoldToArm,
    HoldToLift,
    Policy,
    Refusal,
    arm_refusals,
    decide_lift,
)
from hermes_estop.model.selector import holds_at_least

__all__ = ["FULL", "Change", "Judgement", "judge", "transition", "widens"]

#: the key of a location's full hold (scoped holds are keyed by their id)
FULL = "everything"
#: what an unreadable body is judged as: it holds everything, admits nobody, has no deadman
#: and no known owner (so any write over it that is not a plain re-pause weakens it)
_UNKNOWN = Hold(None)


@dataclass(frozen=True)
class Change:
    """One standing hold a write weakens, and how (`kinds`, in the order of the module's list)."""

    key: str
    before: Hold
    kinds: tuple[str, ...]

    def describe(self) -> str:
        what = "the hold" if self.key == FULL else f"scoped hold {self.key}"
        return f"{what} ({', '.join(self.kinds)})"


@dataclass(frozen=True)
class Judgement:
    """What `judge` found: the weakenings, the holds armed, and the rules broken (empty: the
    write may go ahead)."""

    scope: str
    weakens: tuple[Change, ...]
    arms: tuple[Hold, ...]
    refusals: tuple[Refusal, ...]

    @property
    def allowed(self) -> bool:
        return not self.refusals

    @property
    def weakening(self) -> bool:
        return bool(self.weakens)


def widens(before: Allow, after: Allow) -> bool:
    """Whether `after` admits someone `before` does not (an invalid allowlist admits nobody)."""
    if not after.valid or not after.user_ids:
        return False
    if not before.valid or not after.user_ids <= before.user_ids:
        return True
    if not before.profiles:
        return False
    return not after.profiles or not after.profiles <= before.profiles


def _standing(reading: Reading, now: datetime, trusted: datetime | None) -> dict[str, Hold]:
    """The holds of `reading` that still hold, by key."""
    def holds(hold: Hold) -> bool:
        return hold.active_at(now) or (trusted is not None and hold.active_at(trusted))

    out: dict[str, Hold] = {}
    if reading.state is HoldState.UNREADABLE:
        out[FULL] = _UNKNOWN
    elif reading.hold is not None and reading.state is not HoldState.ABSENT and holds(reading.hold):
        out[FULL] = reading.hold
    for scoped in reading.scoped:
        hold = scoped.hold
        if hold is not None and scoped.state is not HoldState.ABSENT and holds(hold):
            out[hold.hold_id or ""] = hold
    return out


def _written(after: Sentinel | None) -> dict[str, Hold]:
    if after is None:
        return {}
    out = {FULL: after.full} if after.full is not None else {}
    for hold in after.scoped:
        out[hold.hold_id or ""] = hold
    return out


def _kinds(key: str, before: Hold, after: Hold | None) -> tuple[str, ...]:
    if after is None:
        return ("removes",)
    if before.generation is not None and after.generation == before.generation:
        return ()  # not rewritten
    kinds = []
    if after.expires_at is not None and (before.expires_at is None or after.expires_at < before.expires_at):
        kinds.append("deadline")
    if key != FULL and not holds_at_least(after.selector, before.selector):
        kinds.append("cover")
    if widens(before.allow, after.allow):
        kinds.append("allowlist")
    if after.armed_by != before.armed_by and owner_after(before.armed_by, after.armed_by, True) != after.armed_by:
        kinds.append("owner")
    return tuple(kinds)


def transition(before: Reading, after: Sentinel | None, now: datetime,
               trusted: datetime | None = None) -> tuple[tuple[Change, ...], tuple[tuple[Hold, Hold | None], ...]]:
    """What writing `after` over `before` does, policy aside: the weakenings, and each hold it
    arms with the standing hold it rewrites (None: a new one)."""
    standing = _standing(before, now, trusted)
    written = _written(after)
    weakens = tuple(Change(key, hold, kinds) for key, hold in standing.items()
                    if (kinds := _kinds(key, hold, written.get(key))))
    old = {hold.generation for hold in (before.hold, *(s.hold for s in before.scoped)) if hold is not None}
    arms = tuple((hold, standing.get(key)) for key, hold in written.items()
                 if hold.generation is None or hold.generation not in old)
    return weakens, arms


def _continues_lease(hold: Hold, prior: Hold | None, actor: Actor) -> bool:
    """A renewal of `hermes run`'s own lease continues an admitted arm: the arming rules judged
    its start, and a limit lowered mid-job applies at the next start (never a lapse mid-job)."""
    lease = LEASE_PREFIX + actor.owner
    return prior is not None and prior.armed_by == lease and hold.armed_by == lease


_DRAINING = "draining for "


def _operators_reason(hold: Hold) -> str | None:
    """The reason a hold is judged by: the one a person wrote. A window's hold during its drain
    lead reads "draining for <window>[: <reason>]" (`windows.model.reason_of`), so a
    `reason_pattern` is matched against the window's own reason, as `windows validate` does."""
    if hold.window is None or hold.reason is None or _DRAINING not in hold.reason:
        return hold.reason
    parts = []
    for part in hold.reason.split("; "):
        if part.startswith(_DRAINING):
            part = part[len(_DRAINING):].partition(": ")[2]
        if part:
            parts.append(part)
    return "; ".join(parts)


def judge(before: Reading, after: Sentinel | None, actor: Actor, policy: Policy, now: datetime, *,
          trusted: datetime | None = None, policy_problem: str | None = None) -> Judgement:
    """The one decision on a write: `after` (None: nothing left) written over `before` by
    `actor` under `policy` at `now` (`trusted`: the store's clock, which a hold also stands by).
    `policy_problem`: why the policy could not be read (then arms go ahead under no policy and
    every weakening is refused: weakening needs certainty)."""
    scope = before.location.scope
    weakens, arms = transition(before, after, now, trusted)
    refusals: list[Refusal] = []
    for hold, prior in arms:
        if not _continues_lease(hold, prior, actor):
            refusals.extend(arm_refusals(policy, actor, HoldToArm(scope, hold.expires_at, _operators_reason(hold)), now))
    if weakens and policy_problem is not None:
        refusals.append(Refusal("policy", "unreadable", "refused: the fleet's policy cannot be read, so no hold is "
                                                        f"weakened or lifted before its deadman ({policy_problem})"))
    at = min(now, trusted) if trusted is not None else now
    for change in weakens:
        refusal = decide_lift(policy, actor, HoldToLift(scope, change.before.armed_by, change.before.expires_at), at)
        if refusal is not None:
            refusals.append(Refusal(refusal.rule, refusal.value, f"{refusal.message}: the write weakens {change.describe()}"))
    unique = tuple(dict.fromkeys(refusals))
    return Judgement(scope, weakens, tuple(hold for hold, _ in arms), unique)
