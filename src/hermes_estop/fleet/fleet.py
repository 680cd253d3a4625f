"""`Fleet`: every scope of one fleet over one store (docs/design.md §8, "the fleet").

Three levels, one model each: a store keeps holds; the fleet is every scope of one fleet root
over that store, with the clock and the actor its writes carry; a process's view (`Estop`) is
the fleet as one process honours it (its candidate locations, the check path). Everything that
acts for the whole fleet — `hermes serve` and its services, the status document, the page and
/metrics, notifications, drain, history — goes through a `Fleet` and never around it to a store.

What it adds over a store is the fleet's shape: which scopes exist (`scopes`), reads of all of
them at one `now` (`read`), scope-addressed writes, the daemon's retire of expired holds
(`retire_expired`), and the services' shared state (audit cursor, ledger, leadership).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import HoldConflict
from hermes_estop.model.hold import EngageRequest, Fence, Hold, HoldState, Reading, Snapshot
from hermes_estop.model.homes import FLEET, Layout, Location
from hermes_estop.model.policy import PolicyRefused
from hermes_estop.model.timeutil import Clock, aware_clock
from hermes_estop.stores.base import HoldStore, RecordTable

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.fleet.policy_guard import Judging, PolicyGuard
    from hermes_estop.model.audit_event import AuditEntry
    from hermes_estop.model.policy import Actor, Policy
    from hermes_estop.stores.registry import ConsumerTable
    from hermes_estop.stores.state import StateTable

__all__ = ["Fleet"]

_T = TypeVar("_T")


def _removed_generation(removed: Reading | None) -> str | None:
    return removed.hold.generation if removed is not None and removed.hold is not None else None


class Fleet:
    """Every scope of fleet root `root` over `store`. Reads never raise (a scope that cannot be
    read is UNREADABLE: held); writes raise `EstopError` subclasses naming what failed."""

    def __init__(self, store: HoldStore, root: Path, *, clock: Clock | None = None, actor: str | None = None,
                 identity: Actor | None = None) -> None:
        self.store = store
        self.root = Path(root)
        self.clock: Clock = aware_clock(clock) if clock is not None else store.default_clock()
        self._actor = identity.name if identity is not None and actor is None else actor
        self._layout = Layout(home=self.root, root=self.root)
        #: the fleet root's scope, built once: every window pass and write addresses it
        self.fleet_location: Location = self._layout.fleet
        self._identity = identity
        self._policy: PolicyGuard | None = None

    @classmethod
    def of_files(cls, root: Path, *, clock: Clock | None = None, actor: str | None = None) -> Fleet:
        """The fleet of `root` on the sentinel-file store (no configuration read)."""
        from hermes_estop.stores.file import FileStore

        return cls(FileStore(Path(root)), root, clock=clock, actor=actor)

    def __repr__(self) -> str:
        return f"Fleet(root={str(self.root)!r}, store={self.store.name!r})"

    @property
    def actor(self) -> str:
        """Who this fleet's writes are made as (audit `actor`, body `armed_by`)."""
        if self._actor is None:
            from hermes_estop.fleet.policy_guard import default_actor

            self._actor = default_actor()
        return self._actor

    @property
    def policy(self) -> PolicyGuard:
        """The arming policy every write of this fleet meets (issue 37), as `identity` (given to
        the constructor: a remote caller's `Actor.remote(token, role)`; default: the local user).
        Built on first use: the check path never writes."""
        if self._policy is None:
            from hermes_estop.fleet.policy_guard import PolicyGuard

            self._policy = PolicyGuard(self, self._identity)
        return self._policy

    # -- the scopes --------------------------------------------------------------------------

    def location(self, scope: str) -> Location:
        """The location of scope `scope` ("fleet" or a profile name); `InvalidArgument` for a
        name the profile rules refuse."""
        return self.fleet_location if scope == FLEET else self._layout.location(scope)

    def scopes(self) -> tuple[Location, ...]:
        """Every scope that can hold: the fleet root first, then every profile by name (on the
        file store the profile homes under `profiles/`; on a shared store also every profile
        with a row)."""
        return (self.fleet_location, *(self.location(name) for name in self.store.scopes(self.root)))

    # -- reading -----------------------------------------------------------------------------

    def read(self, locations: Sequence[Location] | None = None, now: datetime | None = None) -> Snapshot:
        """One read of `locations` (default: every scope) at `now` (default: the clock, read
        once). Takes no lock, writes nothing, never raises; expired holds read as EXPIRED and
        stay where they are (`retire_expired` removes them)."""
        when = self.clock() if now is None else now
        wanted = tuple(locations) if locations is not None else self.scopes()
        return Snapshot(self.store.read(wanted, when), when)

    # -- writing -----------------------------------------------------------------------------
    #
    # Every write is judged by what it does (docs/design.md, "A write is judged by what it
    # does"): the store calls the fleet's `Judging` under the location's lock with the body
    # standing and the body the write leaves, so the judgement and the write are one step,
    # fenced by the generation judged, whatever verb below asked for it.

    def _judged(self, location: Location, when: datetime, override: str | None,
                write: Callable[[Judging | None], _T], generation: Callable[[_T], str | None]) -> _T:
        """`write(judging)` under the fleet's judgement; a refusal is put on the record once
        (after the lock is released) and raised; an override on the record per rule."""
        judging = self.policy.judging(location, when, override)
        try:
            result = write(judging)
        except PolicyRefused as refused:
            if judging is not None:
                self.policy.refused(judging, refused)
            raise
        self.policy.overridden(judging, generation(result) if judging is not None and judging.overrode else None)
        return result

    def engage(self, location: Location, request: EngageRequest, now: datetime | None = None, *,
               override: str | None = None) -> Hold:
        """Arm or re-arm the hold at `location` (`HoldStore.engage`): the write and its audit line.
        Judged under the lock (`PolicyRefused`, recorded, nothing written); `override` (a
        reason) breaks glass for an admin or a local writer of the fleet root."""
        when = self.clock() if now is None else now
        return self._judged(location, when, override,
                            lambda judging: self.store.engage(location, request, when, self.actor, judge=judging),
                            lambda hold: hold.generation)

    def release(self, location: Location, generation: str | None = None, now: datetime | None = None, *,
                override: str | None = None) -> Reading | None:
        """The operator's resume of `location`; with `generation`, only that one (`HoldConflict`
        otherwise). Returns what was removed, or None. Judged as every write is."""
        when = self.clock() if now is None else now
        return self._judged(location, when, override,
                            lambda judging: self.store.release(location, generation, when, self.actor, judge=judging),
                            _removed_generation)

    def release_hold(self, location: Location, hold_id: str, now: datetime | None = None, *,
                     override: str | None = None) -> Reading:
        """`hermes resume --hold ID`: lift the scoped hold `hold_id` at `location` (fenced on the
        generation read, so a re-arm in between is refused, not lifted); `HoldConflict` when no
        such scoped hold stands. Every other hold stays as it is."""
        from hermes_estop.model.errors import HoldConflict

        when = self.clock() if now is None else now
        (reading,) = self.store.read((location,), when)
        for scoped in reading.scoped:
            if scoped.hold is not None and scoped.hold.hold_id == hold_id and scoped.hold.generation:
                removed = self.release(location, scoped.hold.generation, when, override=override)
                assert removed is not None  # release(generation) raises rather than return None
                return removed
        standing = ", ".join(s.hold.scope_label for s in reading.scoped if s.hold is not None) or "none"
        raise HoldConflict(f"no scoped hold {hold_id!r} at {location.describe()} (scoped holds there: {standing})")

    def release_all(self, location: Location, now: datetime | None = None, *, override: str | None = None) -> list[Reading]:
        """`hermes resume --all`: the full hold at `location`, then every scoped hold beside it,
        each fenced on the generation read (a re-arm in between is refused, not lifted). The
        whole lift is judged first, so a refusal leaves every hold standing; each removal is
        judged again under the lock. Returns what was removed, in that order."""
        when = self.clock() if now is None else now
        (reading,) = self.store.read((location,), when)
        judging = self.policy.judging(location, when, override)
        if judging is not None:
            try:
                judging(reading, None, when)
            except PolicyRefused as refused:
                self.policy.refused(judging, refused)
                raise
        removed = []
        if reading.state is not HoldState.ABSENT:
            full = self.release(location, None, when, override=override)
            if full is not None:
                removed.append(full)
        (reading,) = self.store.read((location,), when)
        for scoped in reading.scoped:
            if scoped.hold is not None and scoped.hold.generation:
                try:
                    lifted = self.release(location, scoped.hold.generation, when, override=override)
                except HoldConflict:
                    continue  # re-armed in between: the successor stands
                if lifted is not None:
                    removed.append(lifted)
        return removed

    def resume(self, location: Location, *, generation: str | None = None, hold: str | None = None,
               every: bool = False, now: datetime | None = None, override: str | None = None) -> list[Reading]:
        """The operator's resume of `location`, one verb for every form of it: the full hold
        (with `generation`, only that one), one scoped hold (`hold`), or every hold there
        (`every`). Returns what was removed; `HoldConflict` as the verb it picks, and
        `PolicyRefused` where the fleet's policy refuses the lift (`override`: break glass)."""
        if every:
            return self.release_all(location, now, override=override)
        if hold is not None:
            return [self.release_hold(location, hold, now, override=override)]
        removed = self.release(location, generation, now, override=override)
        return [removed] if removed is not None else []

    def release_everywhere(self, locations: Sequence[Location], now: datetime | None = None) -> bool:
        """Lift every hold, scoped ones too, at each of `locations` (hermes-agent's `disengage`,
        removing `ESTOP`); True when any was removed. `PolicyRefused` where a lift is refused."""
        when = self.clock() if now is None else now
        return any([bool(self.release_all(location, when)) for location in locations])

    def retire_generation(self, locations: Sequence[Location], generation: str, now: datetime | None = None) -> bool:
        """Retire the hold carrying `generation` wherever among `locations` it stands (a
        successor with another generation survives); True when removed. Retiring a generation
        before its deadman is a lift, judged as one."""
        when = self.clock() if now is None else now
        removed = False
        for location in locations:
            if self.retire(location, Fence(generation), now=when):
                removed = True
        return removed

    def retire(self, location: Location, fence: Fence, *, event: str = "retire", now: datetime | None = None,
               detail: str | None = None) -> bool:
        """Remove the hold at `location` only while it still matches `fence` (a successor survives);
        True when removed (audited as `event`, with `detail`: why). Judged as every write is: a
        hold retired before its deadman is lifted, which needs lift rights."""
        when = self.clock() if now is None else now
        return self._judged(location, when, None,
                            lambda judging: self.store.retire(location, fence, when, self.actor, event, judge=judging,
                                                              detail=detail),
                            lambda _removed: fence.generation)

    def acting_as(self, identity: Actor) -> Fleet:
        """This fleet (its store, root and clock), writing as `identity`."""
        return Fleet(self.store, self.root, clock=self.clock, identity=identity)

    def retire_expired(self, now: datetime | None = None, snapshot: Snapshot | None = None) -> list[Reading]:
        """The daemon's deadman: retire every expired hold of every scope, each fenced on the
        generation (or, for a hand-written one, the file identity) it was read with, so a re-arm
        that lands in between is never removed. Returns the readings retired (each audited as
        `expire`). The store checks each deadline against the clock it trusts, not `now`
        (`HoldStore.retire`); a scope whose retire fails or is refused is left for the next
        call; never raises.
        `snapshot`: a read of every scope at `now` the caller already took (default: one here)."""
        when = self.clock() if now is None else now
        read = self.read(now=when) if snapshot is None else snapshot
        retired = []
        for reading in (r for full in read.readings for r in (full, *full.scoped)):
            if reading.state is not HoldState.EXPIRED:
                continue
            self.store.step("expiry:decided")
            try:
                removed = self.retire(reading.location, reading.fence or Fence(), event="expire", now=when)
            except Exception:
                import logging

                logging.getLogger("hermes_estop").warning("cannot retire the expired hold at %s yet; retried next pass",
                                                          reading.location.describe(), exc_info=True)
                continue
            if removed:
                retired.append(reading)
        return retired

    def next_deadline(self, snapshot: Snapshot) -> datetime | None:
        """The soonest deadman among the active holds of `snapshot`, scoped ones included (when
        the daemon must look next)."""
        deadlines = [r.hold.expires_at for full in snapshot.readings for r in (full, *full.scoped)
                     if r.state is HoldState.ACTIVE and r.hold is not None and r.hold.expires_at is not None]
        return min(deadlines) if deadlines else None

    # -- the record --------------------------------------------------------------------------

    def record(self, event: str, location: Location, *, generation: str | None = None, reason: str | None = None,
               deadline: datetime | None = None, detail: str | None = None, now: datetime | None = None) -> None:
        """Append a non-write event (a window's skipped occurrence, an intent) to the audit trail."""
        when = self.clock() if now is None else now
        self.store.append_audit(AuditEvent(when, event, location.scope, generation, self.actor, reason, deadline, detail))

    def history(self, limit: int | None = None, since: datetime | None = None) -> tuple[list[AuditEvent], int]:
        """The audit trail, oldest first (with `limit`, the newest `limit`; with `since`, the
        events at or after it), and how many stored entries were corrupt and skipped (among
        those read: the file trail is read from its end only as far as the answer needs)."""
        return self.store.history_counted(limit, since)

    # -- the services' shared state ----------------------------------------------------------

    def ledger(self) -> RecordTable:
        """The window scheduler's ledger storage, shared by every scheduler of the fleet."""
        return self.store.open_ledger(self.root)

    def state(self, service: str) -> StateTable:
        """The named states of fleet-wide service `service` (the notifier's cursors)."""
        return self.store.open_state(service, self.root)

    def consumers(self) -> ConsumerTable:
        """The consumer registry: every process of the fleet that starts work, and what it last
        saw (`registry`; `hermes consumers`, `pause --wait`)."""
        return self.store.open_consumers(self.root)

    def reachable(self) -> bool:
        """False when the store as a whole does not answer (from what this process already
        knows: never a round trip); the file store answers while its fleet root can be listed."""
        reachable = self.store.reachable()
        if reachable is not None:
            return reachable
        import os

        return os.path.isdir(self.root) and os.access(self.root, os.R_OK | os.X_OK)

    def init_schema(self) -> tuple[int, list[int]]:
        """`hermes store init`: (schema version, versions applied by this call)."""
        return self.store.init_schema()

    # == reads for the levels above ===========================================================
    # What api/, cli/, daemon/, notify/ and observe/ need of the store, asked of the fleet: only
    # fleet/ and stores/ touch a store (issue 46 item 7; tests/test_layout.py). Nothing here
    # writes a hold.

    @property
    def store_name(self) -> str:
        """The store's backend name (`file`, `postgresql`), as status lines and logs name it."""
        return self.store.name

    def where(self, location: Location) -> str:
        """Where the hold of `location` is kept, for an operator to read (a path, a table row)."""
        return self.store.where(location)

    def describe_store(self) -> dict[str, Any]:
        """What `hermes store status` prints of the store."""
        return self.store.describe()

    def schema_info(self) -> dict[str, Any]:
        """Where the store's schema lives, for `hermes store init` to report."""
        return self.store.schema_info()

    @property
    def audit_failures(self) -> int:
        """Audit lines this process could not write since it started (its metric's value)."""
        return self.store.audit_failures

    @property
    def last_audit_failure(self) -> str | None:
        """Why the last audit line this process could not write was not written."""
        return self.store.last_audit_failure

    def audit_problem(self) -> str | None:
        """Why the audit trail cannot be appended to right now (None: nothing known against it)."""
        return self.store.audit_problem()

    def audit_head(self) -> int:
        """The audit cursor just past the newest entry (the notifier starts from it)."""
        return self.store.audit_head()

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        """At most `limit` audit entries after cursor `position`, oldest first (`HoldStore.audit_after`)."""
        return self.store.audit_after(position, limit)

    def leader_gate(self, role: str, poll: float | None = None) -> Callable[[], bool] | None:
        """This process's `is_leader` in the fleet's election for `role` (None: nothing to elect)."""
        return self.store.leader_gate(role, poll)

    def load_policy(self) -> tuple[Policy, str]:
        """The fleet's arming policy and where it is kept (`InvalidArgument` naming a bad one)."""
        from hermes_estop.fleet.policy_guard import load_policy

        return load_policy(self.store, self.root)

    def keep_policy(self, table: dict[str, Any]) -> None:
        """Keep `table` (validated) as the fleet's policy in a shared store (`hermes policy set`;
        `InvalidArgument` on the file store, whose policy is estop.toml's). Not a hold write."""
        from hermes_estop.fleet.policy_guard import store_policy

        store_policy(self.store, self.root, table)

