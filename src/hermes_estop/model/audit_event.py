"""The audit trail's records: one event of the trail (`AuditEvent`: a line of the file trail, a row
of the PostgreSQL one, an item of `hermes history --json`), one entry read from a cursor
(`AuditEntry`), and the renewals `hermes history` folds (`coalesce_renewals`). Plain values with
their JSON form, like the sentinel's body in `hold`: every level reads them (the stores write them,
the fleet and the CLI show them, notify delivers them), so they live in the model, which every
level may import (docs/design.md, the map of the levels).
"""

from __future__ import annotations

from hermes_estop.model.record import Record, set_field
from hermes_estop.model.timeutil import format_instant, parse_stamp

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes history` imports this module
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

__all__ = ["EVENTS", "AuditEntry", "AuditEvent", "coalesce_renewals"]

#: `void`: the engage / re-arm line before it names a generation whose write then failed;
#: `task-start` / `task-end`: a maintenance job run under a hold (`hermes run`, a window's task)
EVENTS = ("engage", "rearm", "release", "retire", "expire", "skip", "void", "task-start", "task-end")


class AuditEvent(Record):
    """One line of the audit trail (a `Record`, not a dataclass: the check path imports this)."""

    __slots__ = ("time", "event", "location", "generation", "actor", "reason", "deadline", "detail")  # noqa: RUF023
    time: datetime
    event: str
    location: str
    generation: str | None
    actor: str | None
    reason: str | None
    deadline: datetime | None
    detail: str | None

    def __init__(self, time: datetime, event: str, location: str, generation: str | None = None,
                 actor: str | None = None, reason: str | None = None, deadline: datetime | None = None,
                 detail: str | None = None) -> None:
        set_field(self, "time", time)
        set_field(self, "event", event)
        set_field(self, "location", location)
        set_field(self, "generation", generation)
        set_field(self, "actor", actor)
        set_field(self, "reason", reason)
        set_field(self, "deadline", deadline)
        set_field(self, "detail", detail)

    def to_json(self) -> dict[str, Any]:
        return {"time": format_instant(self.time), "event": self.event, "location": self.location,
                "generation": self.generation, "actor": self.actor, "reason": self.reason,
                "deadline": format_instant(self.deadline), "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditEvent | None:
        time = parse_stamp(data.get("time"))
        if time is None or not isinstance(data.get("event"), str):
            return None

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(
            time=time,
            event=data["event"],
            location=text("location") or "?",
            generation=text("generation"),
            actor=text("actor"),
            reason=text("reason"),
            deadline=parse_stamp(data.get("deadline")),
            detail=text("detail"),
        )


class AuditEntry(Record):
    """One entry of the trail read from a cursor: `event` None for a corrupt line (skipped,
    never delivered); `end` the position just past it (a cursor only grows along the trail:
    a byte offset in the file trail, a row id in a database); `id` stable across re-reads, so
    a receiver can de-duplicate on it."""

    __slots__ = ("end", "id", "event")  # noqa: RUF023 (constructor order)
    end: int
    id: str
    event: AuditEvent | None

    def __init__(self, end: int, id: str, event: AuditEvent | None) -> None:
        set_field(self, "end", end)
        set_field(self, "id", id)
        set_field(self, "event", event)


def coalesce_renewals(events: list[AuditEvent]) -> list[tuple[AuditEvent, int]]:
    """`events` with each run of consecutive renewals folded into its last one: a `rearm` at the
    same scope, by the same actor, with the same reason as the `engage`/`rearm` just before it
    (a lease renewed every ttl/3 writes one per renewal). Each item is (the event shown, how many
    renewals it stands for: 1 for an event that folds nothing)."""
    out: list[tuple[AuditEvent, int]] = []
    for event in events:
        if out and event.event == "rearm":
            last, count = out[-1]
            if (last.event in ("engage", "rearm") and last.location == event.location and last.actor == event.actor
                    and last.reason == event.reason) and last.event == "rearm":
                out[-1] = (event, count + 1)
                continue
        out.append((event, 1))
    return out
