"""The one shared predicate (docs/design.md §4), as pure functions over one `Snapshot`.

Every decision comes from a single snapshot of all candidate locations, so "is it engaged" and
"who is admitted" can never come from two different reads.
"""

from __future__ import annotations

from hermes_estop.model.hold import Cause, HoldState, Reading, Snapshot, admits, engaged, holding
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

__all__ = [
    "HAND_MADE",
    "Snapshot",
    "Verdict",
    "admits",
    "auto_resume_at",
    "decide",
    "engaged",
    "holding",
    "pause_notice",
    "unreadable_cause",
]


def auto_resume_at(snapshot: Snapshot, holds: tuple[Reading, ...] | None = None) -> datetime | None:
    """When every active hold (of `holds`, default the full ones) has a deadman, the instant the
    last of them lifts; else None."""
    deadlines = []
    for reading in snapshot.active if holds is None else holds:
        if reading.hold is None or reading.hold.expires_at is None:
            return None
        deadlines.append(reading.hold.expires_at)
    return max(deadlines) if deadlines else None


#: what an empty body is (`touch ESTOP`): a valid emergency stop, never called broken
HAND_MADE = "a hand-made stop with no details (no reason, no deadman, admits nobody)"


def unreadable_cause(reading: Reading) -> str:
    """One printable clause naming why an unreadable hold holds and what will actually lift it
    (the fix, not just `hermes resume`, which cannot remove a directory or reach a store that is
    down), chosen by the reading's `Cause` as the reader found it."""
    shown = printable(reading.problem or "unknown problem")
    location = reading.location
    cause = reading.cause
    if cause is Cause.REFUSED_HOME:
        return f"{shown}: held until HERMES_HOME names a valid profile home"
    if cause is Cause.STORE_DOWN:
        return f"the fleet store is unreachable; held until it is back ({shown})"
    if cause is Cause.EMPTY:
        return f"{HAND_MADE} at {printable(location.describe())}; `hermes resume` lifts it"
    sentinel = printable(location.sentinel)
    if cause is Cause.NOT_A_FILE:
        return f"ESTOP at {sentinel} is {shown}: remove it by hand"
    if cause is Cause.CANNOT_READ:
        return f"ESTOP at {sentinel} cannot be read ({shown}): fix its permissions or remove it by hand"
    return (f"the hold at {location.describe()} is unreadable ({shown}); `hermes resume` removes it, "
            "or rewrite it with `hermes pause`")


def pause_notice(snapshot: Snapshot, holds: tuple[Reading, ...] | None = None) -> str | None:
    """The user-facing line for refused work: the reason(s), the cause of any unreadable hold
    with what will lift it, and the auto-resume time when there is one. None when nothing
    holds. One line, escaped with `text.printable` (a reason is whatever a body says). `holds`:
    the holds that refused the work (default: the full holds of the snapshot)."""
    active = snapshot.active if holds is None else holds
    if not active:
        return None
    reasons, causes = _reasons_and_causes(active)
    tag = f" ({'; '.join(reasons)})" if reasons else ""
    if causes:
        return f"Hermes is paused{tag}: {'; '.join(causes)}. New work is on hold."
    resume = auto_resume_at(snapshot, active)
    until = f" Auto-resumes at {display_instant(resume)}." if resume is not None else ""
    return f"Hermes is paused{tag}. New work is on hold; run {_resume_how(active)} to pick things back up.{until}"


def _reasons_and_causes(active: tuple[Reading, ...]) -> tuple[list[str], list[str]]:
    """The distinct reasons of the readable holds (a scoped one labelled with what it covers) and
    the distinct causes of the unreadable ones, in order."""
    reasons: list[str] = []
    causes: list[str] = []
    for reading in active:
        if reading.state is HoldState.UNREADABLE:
            cause = unreadable_cause(reading)
            if cause not in causes:
                causes.append(cause)
            continue
        hold = reading.hold
        reason = hold.reason if hold is not None else None
        label = f"{hold.selector.describe()}: " if hold is not None and hold.selector is not None else ""
        if reason and label + printable(reason) not in reasons:
            reasons.append(label + printable(reason))
        elif not reason and label and label[:-2] not in reasons:
            reasons.append(label[:-2])
    return reasons, causes


def _resume_how(active: tuple[Reading, ...]) -> str:
    """The command(s) that lift these holds: a scoped hold is lifted by its id."""
    scoped = [r.hold.hold_id for r in active if r.hold is not None and r.hold.selector is not None]
    if not scoped:
        return "`hermes resume`"
    return " / ".join([*(["`hermes resume`"] if len(scoped) < len(active) else []),
                       *(f"`hermes resume --hold {printable(hold_id)}`" for hold_id in scoped)])


class Verdict(Record):
    """The answer to `gate()`: truthy when work may proceed. Carries the snapshot it was taken
    from, the holds that cover the work asked about, and, when held, the notice to show."""

    __slots__ = ("proceed", "engaged", "admitted", "snapshot", "holds")  # noqa: RUF023 (constructor order)
    proceed: bool
    engaged: bool
    admitted: bool
    snapshot: Snapshot
    holds: tuple[Reading, ...]

    def __init__(self, proceed: bool, engaged: bool, admitted: bool, snapshot: Snapshot,
                 holds: tuple[Reading, ...] | None = None) -> None:
        set_field(self, "proceed", proceed)
        set_field(self, "engaged", engaged)
        set_field(self, "admitted", admitted)
        set_field(self, "snapshot", snapshot)
        set_field(self, "holds", snapshot.active if holds is None else holds)

    def __bool__(self) -> bool:
        return self.proceed

    @property
    def notice(self) -> str | None:
        return None if self.proceed else pause_notice(self.snapshot, self.holds)

    @property
    def reason(self) -> str | None:
        """The reason of the first hold covering the work that gives one."""
        for reading in self.holds:
            if reading.hold is not None and reading.hold.reason:
                return reading.hold.reason
        return None

    @property
    def resume_at(self) -> datetime | None:
        """When the hold lifts by itself (every covering hold has a deadman), else None."""
        return auto_resume_at(self.snapshot, self.holds)

    def to_json(self, scoped: bool = False) -> dict[str, Any]:
        """What `hermes check --json` prints (and `/api/v1/check` answers); `scoped`: the work
        was named (`--component` / `--job`), so the covering holds are listed."""
        from hermes_estop.model.timeutil import format_instant

        return {"proceed": self.proceed, "engaged": self.engaged, "admitted": self.admitted,
                "notice": self.notice, "reason": self.reason, "resume_at": format_instant(self.resume_at),
                **({"holds": [r.hold.scope_label if r.hold else "everything" for r in self.holds]} if scoped else {})}

    @property
    def line(self) -> str:
        """The line `hermes check` prints."""
        if not self.proceed:
            return f"held: {self.who_holds}"
        if self.engaged:
            return "proceed: admitted through the hold"
        scoped = len(self.snapshot.scoped_active)
        return "proceed: no active hold" if not scoped else \
            f"proceed: no active hold covers this work ({scoped} scoped hold(s) stand)"

    @property
    def who_holds(self) -> str:
        """Who holds this work and until when, hold by hold (what an operator asking `hermes
        check` needs; the consumers' `notice` keeps upstream's words), escaped."""
        parts = []
        for reading in self.holds:
            where, hold = reading.location.describe(), reading.hold
            if reading.state is HoldState.UNREADABLE or hold is None:
                parts.append(f"{where}: {unreadable_cause(reading)}")
                continue
            what = [hold.selector.describe()] if hold.selector is not None else []
            what += [hold.reason] if hold.reason else []
            why = f" ({': '.join(what)})" if what else ""
            who = f" by {hold.armed_by}" if hold.armed_by else ""
            until = f" until {display_instant(hold.expires_at)}" if hold.expires_at is not None \
                else " with no deadline (until someone lifts it)"
            parts.append(f"{where} is held{why}{who}{until}")
        return printable("; ".join(parts))

    @property
    def held_by(self) -> str:
        """The scopes of the holds that cover the work, as `hermes gate` names them."""
        return ", ".join(printable(r.location.describe()) for r in self.holds)


def decide(snapshot: Snapshot, user_id: Any = None, profile: Any = None, component: str | None = None,
           job: Any = None) -> Verdict:
    """gate(principal, profile, component, job) = proceed when no active hold covers the work, or
    when every one that does admits the principal (deny wins)."""
    holds = holding(snapshot, component, job)
    if not holds:
        return Verdict(True, False, False, snapshot, holds)
    is_admitted = True
    for reading in holds:
        if not reading.admits(user_id, profile):
            is_admitted = False
            break
    return Verdict(is_admitted, True, is_admitted, snapshot, holds)
