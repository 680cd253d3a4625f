"""One read of every candidate location at one instant: what every decision is taken from
(docs/design.md §3: "is it engaged" and "who is admitted" never come from two reads). A value of
the model: the fleet returns it (`Fleet.read`), the process's check path decides over it
(`process.check`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hermes_estop.model.hold import Fence, Reading
from hermes_estop.model.record import Record, set_field

__all__ = ["Snapshot", "admits", "engaged", "holding"]


class Snapshot(Record):
    """One read of every candidate location, taken at `now`."""

    __slots__ = ("readings", "now")  # noqa: RUF023 (constructor order)
    readings: tuple[Reading, ...]
    now: datetime

    def __init__(self, readings: tuple[Reading, ...], now: datetime) -> None:
        set_field(self, "readings", readings)
        set_field(self, "now", now)

    @property
    def active(self) -> tuple[Reading, ...]:
        """The active full holds (a hold of everything at its location)."""
        return tuple(r for r in self.readings if r.active)

    @property
    def scoped_active(self) -> tuple[Reading, ...]:
        """The active scoped holds, whatever work they cover (issue 26)."""
        return tuple(s for r in self.readings for s in r.scoped if s.active)

    @property
    def every_active(self) -> tuple[Reading, ...]:
        """Every active hold, full then scoped: what holds SOME work."""
        return self.active + self.scoped_active

    @property
    def engaged(self) -> bool:
        return engaged(self)

    @property
    def engagement(self) -> frozenset[tuple[str, Fence | None]]:
        """The identity of what holds: one value per engagement (a re-arm is a new one), so a
        consumer logs "held" once per engagement, not once per refused piece of work."""
        return frozenset((r.location.key, r.fence) for r in self.every_active)

    def admits(self, user_id: Any = None, profile: Any = None) -> bool:
        return admits(self, user_id, profile)


def holding(snapshot: Snapshot, component: str | None = None, job: Any = None) -> tuple[Reading, ...]:
    """The active holds that cover work of `component` named `job` (one name, or several): every
    full hold, and each scoped hold whose selector covers it. Work that does not say what it is
    (`component` None) is covered by every hold; an unreadable selector covers everything."""
    found: list[Reading] | None = None
    for reading in snapshot.readings:
        if reading.active:
            if found is None:
                found = []
            found.append(reading)
        scoped = reading.scoped
        if scoped:
            covering = getattr(scoped, "covering", None)  # `selector.ScopedReadings`: indexed
            matched = covering(component, job) if covering is not None else tuple(
                s for s in scoped if s.active and s.covers(component, job))
            if matched:
                if found is None:
                    found = []
                found.extend(matched)
    return () if found is None else tuple(found)


def engaged(snapshot: Snapshot) -> bool:
    """At least one active hold, full or scoped (an unreadable hold is active)."""
    for reading in snapshot.readings:
        if reading.active:
            return True
        for scoped in reading.scoped:
            if scoped.active:
                return True
    return False


def admits(snapshot: Snapshot, user_id: Any, profile: Any, component: str | None = None, job: Any = None) -> bool:
    """At least one active hold covers the work, and EVERY one that does admits (deny wins). A
    profile narrows a principal's grant and never admits on its own; an unreadable hold admits
    nobody."""
    holds = holding(snapshot, component, job)
    return bool(holds) and all(reading.admits(user_id, profile) for reading in holds)
