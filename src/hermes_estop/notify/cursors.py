"""Per-target delivery state: the cursor into the audit trail and what an operator should see
(last error, failures, when the next attempt is due, the stale reminders already sent).

Kept where the fleet keeps its state (`Fleet.state("notify")`): `<root>/notify-state.json` on
the file store (read-modify-write of one target's entry under a lock, so targets delivering from
several threads never lose each other's progress), the `notify_cursors` table on PostgreSQL
(written only by the elected notifier).

The cursor is advanced only after a delivery succeeded, and is written before the next event
is sent: a crash (even SIGKILL) re-delivers at most the one event that was in flight.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.tables import StateTable

__all__ = ["STATE_FILE", "CursorStore", "FleetCursorStore", "TargetState"]

#: the file store's name for it (`<root>/notify-state.json`)
STATE_FILE = "notify-state.json"


@dataclass
class TargetState:
    """One target's progress. `position` None: never started (where it starts is `start`)."""

    source: str | None = None
    position: int | None = None
    delivered: int = 0
    last_id: str | None = None
    last_success: str | None = None
    last_attempt: str | None = None
    last_error: str | None = None
    failures: int = 0
    next_attempt: str | None = None
    #: stale reminders sent: hold key ("<scope> <generation>") -> reminder number
    stale: dict[str, int] = field(default_factory=dict)
    #: when a hold with no `engaged_at` (a hand-made sentinel) was first seen standing
    stale_seen: dict[str, str] = field(default_factory=dict)
    #: `upcoming` notices sent (`before`): occurrence key -> when it arms
    upcoming: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> TargetState:
        if not isinstance(data, dict):
            return cls()
        state = cls()
        for key in ("source", "last_id", "last_success", "last_attempt", "last_error", "next_attempt"):
            value = data.get(key)
            setattr(state, key, value if isinstance(value, str) else None)
        position = data.get("position")
        state.position = position if isinstance(position, int) and not isinstance(position, bool) and position >= 0 \
            else None
        for key in ("delivered", "failures"):
            value = data.get(key)
            setattr(state, key, value if isinstance(value, int) and not isinstance(value, bool) else 0)
        stale = data.get("stale")
        state.stale = {k: v for k, v in stale.items() if isinstance(v, int)} if isinstance(stale, dict) else {}
        seen = data.get("stale_seen")
        state.stale_seen = {k: v for k, v in seen.items() if isinstance(v, str)} if isinstance(seen, dict) else {}
        sent = data.get("upcoming")
        state.upcoming = {k: v for k, v in sent.items() if isinstance(v, str)} if isinstance(sent, dict) else {}
        return state

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class CursorStore(Protocol):
    def load(self) -> dict[str, TargetState]:
        """Every target's state. Raises `OSError`/`StoreError` when it cannot be read."""

    def save(self, name: str, state: TargetState) -> None:
        """Persist `name`'s state durably. Raises `StoreError` when it cannot be written."""


class FleetCursorStore:
    """Every target's state, kept in the fleet's `notify` state table."""

    def __init__(self, fleet: Fleet) -> None:
        self.table: StateTable = fleet.state("notify")

    def load(self) -> dict[str, TargetState]:
        return {name: TargetState.from_json(value) for name, value in self.table.load().items()}

    def save(self, name: str, state: TargetState) -> None:
        self.table.save(name, state.to_json())
