"""The one shared predicate (DESIGN 4), as pure functions over one `Snapshot`.

Every decision comes from a single snapshot of all candidate locations, so "is it engaged" and
"who is admitted" can never come from two different reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .hold import Reading
from .timeutil import format_instant

__all__ = ["Snapshot", "Verdict", "engaged", "admits", "decide", "pause_notice", "auto_resume_at"]


@dataclass(frozen=True)
class Snapshot:
    """One read of every candidate location, taken at `now`."""

    readings: tuple[Reading, ...]
    now: datetime

    @property
    def active(self) -> tuple[Reading, ...]:
        return tuple(r for r in self.readings if r.active)

    @property
    def engaged(self) -> bool:
        return engaged(self)

    @property
    def engagement(self) -> frozenset:
        """The identity of what holds: one value per engagement (a re-arm is a new one), so a
        consumer logs "held" once per engagement, not once per refused piece of work."""
        return frozenset((r.location.key, r.fence) for r in self.readings if r.active)

    def admits(self, user_id: Any = None, profile: Any = None) -> bool:
        return admits(self, user_id, profile)


def engaged(snapshot: Snapshot) -> bool:
    """At least one active hold (an unreadable hold is active)."""
    for reading in snapshot.readings:
        if reading.active:
            return True
    return False


def admits(snapshot: Snapshot, user_id: Any, profile: Any) -> bool:
    """At least one active hold, and EVERY active hold admits (deny wins). A profile narrows a
    principal's grant and never admits on its own; an unreadable hold admits nobody."""
    seen = False
    for reading in snapshot.readings:
        if reading.active:
            if not reading.admits(user_id, profile):
                return False
            seen = True
    return seen


def auto_resume_at(snapshot: Snapshot) -> datetime | None:
    """When every active hold has a deadman, the instant the last of them lifts; else None."""
    deadlines = []
    for reading in snapshot.active:
        if reading.hold is None or reading.hold.expires_at is None:
            return None
        deadlines.append(reading.hold.expires_at)
    return max(deadlines) if deadlines else None


def pause_notice(snapshot: Snapshot) -> str | None:
    """The user-facing line for refused work: the reason(s), and the auto-resume time when there
    is one. None when nothing holds."""
    active = snapshot.active
    if not active:
        return None
    reasons = []
    for reading in active:
        reason = reading.hold.reason if reading.hold is not None else None
        if reason and reason not in reasons:
            reasons.append(reason)
    tag = f" ({'; '.join(reasons)})" if reasons else ""
    resume = auto_resume_at(snapshot)
    until = f" Auto-resumes at {format_instant(resume)}." if resume is not None else ""
    return f"Hermes is paused{tag}. New work is on hold; run `hermes resume` to pick things back up.{until}"


@dataclass(frozen=True)
class Verdict:
    """The answer to `gate()`: truthy when work may proceed. Carries the snapshot it was taken
    from and, when held, the notice to show."""

    proceed: bool
    engaged: bool
    admitted: bool
    snapshot: Snapshot

    def __bool__(self) -> bool:
        return self.proceed

    @property
    def notice(self) -> str | None:
        return None if self.proceed else pause_notice(self.snapshot)

    @property
    def reason(self) -> str | None:
        """The reason of the first active hold that gives one."""
        for reading in self.snapshot.active:
            if reading.hold is not None and reading.hold.reason:
                return reading.hold.reason
        return None

    @property
    def resume_at(self) -> datetime | None:
        """When the hold lifts by itself (every active hold has a deadman), else None."""
        return auto_resume_at(self.snapshot)


def decide(snapshot: Snapshot, user_id: Any = None, profile: Any = None) -> Verdict:
    """gate(principal, profile) = proceed when not engaged, or when admitted."""
    is_engaged = engaged(snapshot)
    if not is_engaged:
        return Verdict(True, False, False, snapshot)
    is_admitted = admits(snapshot, user_id, profile)
    return Verdict(is_admitted, True, is_admitted, snapshot)
