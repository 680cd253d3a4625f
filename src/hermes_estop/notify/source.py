"""Where notifications come from: the audit trail, read from a cursor onwards, in order.

Read through the fleet (`Fleet.audit_after`): a position is an integer that only grows along
the trail (the store decides what: a byte offset in `estop-audit.jsonl`, an `audit` row id), and
each event has an id a receiver can de-duplicate on, stable across retries and restarts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEntry, AuditEvent
from hermes_estop.model.selector import selector_of_detail
from hermes_estop.process.describe import event_covers

__all__ = ["AuditSource", "FleetAuditSource", "Item", "event_body"]

#: one entry of the trail (`audit.AuditEntry`: `end`, `id`, `event`)
Item = AuditEntry


class AuditSource(Protocol):
    name: str

    def read_after(self, position: int, limit: int) -> list[Item]:
        """At most `limit` entries after `position`, oldest first. Raises `OSError`/`StoreError`
        when the trail cannot be read."""

    def head(self) -> int:
        """The position just past the newest entry (where a target told to `start = "end"` begins)."""


class FleetAuditSource:
    """The fleet's audit trail (`Fleet.audit_after`). `name` is the store's: a cursor saved
    against one store's positions is never read against another's."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.name = fleet.store_name

    def head(self) -> int:
        return self.fleet.audit_head()

    def read_after(self, position: int, limit: int) -> list[Item]:
        return self.fleet.audit_after(position, limit)


def event_body(event_id: str, event: AuditEvent, fleet: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON object a target receives for one audit event."""
    body: dict[str, Any] = {"id": event_id, "event": event.event, "scope": event.location, "fleet": str(fleet)}
    data = event.to_json()
    data.pop("location", None)
    data.pop("event", None)
    body.update(data)
    scoped = selector_of_detail(event.detail)
    if scoped is not None:  # a scoped hold's line: which hold, and what it covers
        body["hold"], body["selector"] = scoped[0], scoped[1].to_body()
    covered = event_covers(event.event, event.detail)
    if covered is not None:
        body["covers"] = covered
    if extra:
        body.update(extra)
    return body
