"""The store of last resort: what a process gets when its configured store cannot even be opened
(a bad URL, an unreadable config). Every location reads as UNREADABLE, so the fleet is held and
nobody is admitted; every write raises the original error. Never silently free."""

from __future__ import annotations

from datetime import datetime

from hermes_estop.model.errors import StoreUnavailable
from hermes_estop.model.hold import Cause, EngageRequest, Fence, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.stores.base import FleetStateInRoot, HoldStore

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_estop.model.audit_event import AuditEntry, AuditEvent
    from hermes_estop.stores.base import Judge

__all__ = ["UnavailableStore"]


class UnavailableStore(FleetStateInRoot, HoldStore):
    name = "unavailable"

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem

    def _refuse(self) -> StoreUnavailable:
        return StoreUnavailable(f"store unavailable: {self.problem}")

    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        return tuple(
            Reading(location, HoldState.UNREADABLE, None, Fence(), f"store unavailable: {self.problem}", Cause.STORE_DOWN)
            for location in locations
        )

    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str,
               judge: Judge | None = None) -> Hold:
        raise self._refuse()

    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire",
               judge: Judge | None = None, detail: str | None = None) -> bool:
        raise self._refuse()

    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Judge | None = None) -> Reading | None:
        raise self._refuse()

    def append_audit(self, event: AuditEvent) -> None:
        raise self._refuse()

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        raise self._refuse()

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        raise self._refuse()

    def audit_head(self) -> int:
        raise self._refuse()

    def describe(self) -> dict[str, object]:
        return {"backend": self.name, "problem": self.problem}
