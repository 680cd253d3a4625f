"""The arming policy at the fleet's one write path (issue 37): where it is kept, who the local
caller is, and what a refused or overridden write leaves on the record.

`Fleet.engage` and `Fleet.release*` call `PolicyGuard`; the policy is read again for every write
(so a running `hermes serve` enforces a changed policy at its next write). It is kept in the
`[policy]` table of `estop.toml`; on a shared store (PostgreSQL) `hermes policy set` stores it in
the database, and that copy, when there is one, is the fleet's policy on every host.

A policy that cannot be read never stops a stop (8a: arming depends only on writing the hold):
arming proceeds under no policy, with a warning; lifting is refused (weakening needs more
certainty) unless overridden.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hermes_estop.model.errors import EstopError, InvalidArgument, StoreError
from hermes_estop.model.hold import EngageRequest, Hold, Reading, merge_hold
from hermes_estop.model.homes import Location
from hermes_estop.model.policy import (
    NO_POLICY,
    Actor,
    Arm,
    Lift,
    Policy,
    PolicyRefused,
    Refusal,
    decide_arm,
    decide_lift,
    may_override,
    parse_policy,
)
from hermes_estop.model.text import one_line, printable
from hermes_estop.stores.audit_files import _read_toml
import getpass
import grp

if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.stores.base import HoldStore


class _Fleet(Protocol):
    """What the guard needs of the fleet it guards (`fleet.Fleet`, which imports this module)."""

    store: HoldStore
    root: Path

    @property
    def actor(self) -> str: ...

    def record(self, event: str, location: Location, *, generation: str | None = None, reason: str | None = None,
               deadline: datetime | None = None, detail: str | None = None, now: datetime | None = None) -> None: ...

__all__ = ["POLICY_STATE", "PolicyGuard", "load_policy", "local_actor", "refusals", "store_policy", "stored_policy"]

#: the state table (and the name in it) a shared store keeps the fleet's policy in
POLICY_STATE = "policy"
log = logging.getLogger("hermes_estop")
#: the writes this process refused, by rule (`hermes_estop_policy_refusals`): every fleet of it
_REFUSALS: dict[str, int] = {}
_REFUSALS_LOCK = threading.Lock()


def refusals() -> dict[str, int]:
    """How many writes this process's policy refused so far, by rule."""
    with _REFUSALS_LOCK:
        return dict(_REFUSALS)


def _count(rule: str) -> None:
    with _REFUSALS_LOCK:
        _REFUSALS[rule] = _REFUSALS.get(rule, 0) + 1


def local_actor(name: str, root: Path) -> Actor:
    """The local caller: `name` (`user@host`), its user and groups for the policy's role
    mapping, and whether it can write the fleet root (which lets it break glass)."""
    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):
        user = None
    groups = set()
    for gid in {os.getgid(), *os.getgroups()}:
        try:
            groups.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            groups.add(str(gid))
    return Actor(name=name, user=user, groups=frozenset(groups), can_write_root=os.access(root, os.W_OK | os.X_OK))


def shared(store: HoldStore) -> bool:
    return store.name == "postgresql"


def stored_policy(store: HoldStore, root: Path) -> dict[str, Any] | None:
    """The `[policy]` table a shared store keeps (None: none stored, or not a shared store)."""
    if not shared(store):
        return None
    entry = store.open_state(POLICY_STATE, root).load().get(POLICY_STATE)
    return entry.get("policy") if isinstance(entry, dict) and isinstance(entry.get("policy"), dict) else None


def store_policy(store: HoldStore, root: Path, table: dict[str, Any]) -> None:
    """Keep `table` (already validated) as the fleet's policy in a shared store."""
    if not shared(store):
        raise InvalidArgument("the file store keeps its policy in estop.toml: edit its [policy] table")
    store.open_state(POLICY_STATE, root).save(POLICY_STATE, {"policy": table})


def load_policy(store: HoldStore, root: Path) -> tuple[Policy, str]:
    """The fleet's policy and where it came from; `InvalidArgument` naming the source and the
    bad key or value."""
    table = stored_policy(store, root)
    if table is not None:
        where = f"the {store.name} store"
        return parse_policy(table, where), where
    path = root / "estop.toml"  # process.fleet_config.CONFIG_FILE (a level above the fleet)
    data = _read_toml(path)
    return parse_policy(None if data is None else data.get("policy"), str(path)), str(path)


class PolicyGuard:
    """The policy checks of one fleet's writes."""

    def __init__(self, fleet: _Fleet, identity: Actor | None) -> None:
        self.fleet = fleet
        self._identity = identity

    @property
    def identity(self) -> Actor:
        """Who this fleet writes as: the one given, else the local user; a principal that is
        not the account the process runs under (`gateway:<id>@<host>`: a chat user) is known
        by its name alone and takes none of that account's roles or its write access."""
        if self._identity is None:
            name = self.fleet.actor
            principal = ":" in name.split("@", 1)[0]
            self._identity = Actor(name=name) if principal else local_actor(name, self.fleet.root)
        return self._identity

    def policy(self) -> tuple[Policy, str | None]:
        """The policy now, and the one-line problem when it cannot be read. A store that cannot
        be opened at all refuses every write itself, with its own line: no policy is read."""
        if self.fleet.store.name == "unavailable":
            return NO_POLICY, None
        try:
            return load_policy(self.fleet.store, self.fleet.root)[0], None
        except StoreError:
            raise  # the store itself does not answer: the caller decides (arming goes ahead)
        except (EstopError, OSError) as exc:
            problem = one_line(exc)
            log.warning("cannot read the fleet's policy: %s", problem)
            return NO_POLICY, problem

    def _policy_to_arm(self) -> Policy:
        """A stop always stops: a store that does not answer for the policy gets the write
        tried anyway (which fails with the store's own line, or arms)."""
        try:
            return self.policy()[0]
        except StoreError:
            return NO_POLICY

    # -- arming ------------------------------------------------------------------------------

    def check_arm(self, location: Location, request: EngageRequest, now: datetime, override: str | None) -> Refusal | None:
        """None to write as asked; the refusal an `override` lifts (the write goes ahead and is
        recorded by `overridden`); raises `PolicyRefused` (recorded) otherwise."""
        policy = self._policy_to_arm()
        if policy.empty:
            return None
        (reading,) = self.fleet.store.read((location,), now)
        standing = _standing_for(reading, request)
        merged = merge_hold(standing, request, now, "policy-check")
        refusal = decide_arm(policy, self.identity, Arm(location.scope, merged.expires_at, merged.reason), now)
        return self._judge(policy, refusal, location, request.reason, override, now)

    # -- lifting -----------------------------------------------------------------------------

    def check_lift(self, location: Location, holds: Sequence[Hold], now: datetime, override: str | None) -> Refusal | None:
        """As `check_arm`, for removing `holds` (what stands at `location` that would go). A
        store that does not answer for the policy raises its `StoreError`: nothing is lifted
        unjudged."""
        policy, problem = self.policy()
        if problem is not None and holds:
            refusal = Refusal("policy", "unreadable", f"refused: the fleet's policy cannot be read, so no hold is "
                                                      f"lifted before its deadman ({problem})")
            return self._judge(NO_POLICY, refusal, location, None, override, now)
        if policy.empty:
            return None
        for hold in holds:
            lift = decide_lift(policy, self.identity, Lift(location.scope, hold.armed_by, hold.expires_at), now)
            if lift is not None:
                return self._judge(policy, lift, location, hold.reason, override, now)
        return None

    # -- the record --------------------------------------------------------------------------

    def _judge(self, policy: Policy, refusal: Refusal | None, location: Location, reason: str | None,
               override: str | None, now: datetime) -> Refusal | None:
        if refusal is None:
            return None
        if override is not None:
            if not override.strip():
                raise InvalidArgument("invalid --override '': give the reason for breaking glass")
            if may_override(policy, self.identity):
                return refusal
            refusal = Refusal(refusal.rule, refusal.value,
                              f"{refusal.message}; {printable(self.identity.name)} may not override "
                              f"(an admin, or a local operator who can write the fleet root)")
        _count(refusal.rule)
        self.fleet.record("refused", location, reason=reason, detail=f"{refusal.rule}={refusal.value}: {refusal.message}",
                          now=now)
        raise PolicyRefused(refusal)

    def overridden(self, location: Location, refusal: Refusal | None, override: str | None, generation: str | None,
                   now: datetime) -> None:
        """Record a write that went ahead over `refusal` (audit `override`: notified, and shown
        on the status page while that generation stands)."""
        if refusal is None or override is None:
            return
        self.fleet.record("override", location, generation=generation, reason=override,
                          detail=f"{refusal.rule}={refusal.value}: {refusal.message}", now=now)


def _standing_for(reading: Reading, request: EngageRequest) -> Hold | None:
    """The hold a request re-arms at its location (the merge starts from it)."""
    if request.selector is None:
        return reading.hold
    for scoped in reading.scoped:
        hold = scoped.hold
        if hold is not None and (hold.hold_id == request.hold_id if request.hold_id else hold.selector == request.selector):
            return hold
    return None
