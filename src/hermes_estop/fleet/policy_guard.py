"""The arming policy at the fleet's one write path (issue 37): where it is kept, who the local
caller is (`default_actor`, the name every write is recorded as, and `local_actor`, the roles
it holds), and what a refused or overridden write leaves on the record.

`Fleet.engage` and `Fleet.release*` call `PolicyGuard`; the policy is read again for every write
(so a running `hermes serve` enforces a changed policy at its next write). It is kept in the
`[policy]` table of `estop.toml`; on a shared store (PostgreSQL) `hermes policy set` stores it in
the database, and that copy, when there is one, is the fleet's policy on every host.

A policy that cannot be read never stops a stop (8a: arming depends only on writing the hold):
arming proceeds under no policy, with a warning; lifting is refused (weakening needs more
certainty) unless overridden.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import socket
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hermes_estop.model.errors import EstopError, InvalidArgument, StoreError
from hermes_estop.model.hold import Reading, Sentinel
from hermes_estop.model.homes import Location
from hermes_estop.model.policy import (
    NO_POLICY,
    Actor,
    Policy,
    PolicyRefused,
    Refusal,
    may_override,
    parse_policy,
)
from hermes_estop.model.text import one_line, printable
from hermes_estop.system.fsread import foreign_control, read_config

if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.model.judgement import Judgement
    from hermes_estop.stores.base import HoldStore


class _Fleet(Protocol):
    """What the guard needs of the fleet it guards (`fleet.Fleet`, which imports this module)."""

    store: HoldStore
    root: Path

    @property
    def actor(self) -> str: ...

    def record(self, event: str, location: Location, *, generation: str | None = None, reason: str | None = None,
               deadline: datetime | None = None, detail: str | None = None, now: datetime | None = None) -> None: ...

__all__ = ["POLICY_STATE", "Judging", "PolicyGuard", "account_name", "default_actor", "load_policy", "local_actor", "refusals",
           "store_policy", "stored_policy"]

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


def account_name() -> str:
    """The account of this process's effective uid (its uid where it has no name). Never
    `$USER` or `$LOGNAME`: the environment is input, and root with `USER=alice` is root."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OSError):
        return str(uid)


def default_actor() -> str:
    """Who did it, as far as this process can tell: `user@host` (`account_name`)."""
    return f"{account_name()}@{socket.gethostname()}"


def local_actor(name: str, root: Path) -> Actor:
    """The local caller: `name` (`user@host`), the account of the effective uid and its groups
    for the policy's role mapping (never `$USER`/`$LOGNAME`: the environment is input), and
    whether it can write the fleet root (which lets it break glass)."""
    user = account_name()
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
    data = read_config(path)
    if data is not None and "policy" in data:
        try:
            owner = os.stat(root).st_uid
        except OSError:
            owner = os.geteuid()
        problem = foreign_control(path, owner)
        if problem is not None:
            raise InvalidArgument(f"refusing the policy in {printable(path)}: {problem}")
    return parse_policy(None if data is None else data.get("policy"), str(path)), str(path)


class PolicyGuard:
    """The policy checks of one fleet's writes."""

    def __init__(self, fleet: _Fleet, identity: Actor | None) -> None:
        self.fleet = fleet
        self._identity = identity
        #: why the policy could not be read at this fleet's last write (None: it was), for the
        #: doors to print: a write under an unreadable policy arms with a warning on every door
        self.problem: str | None = None

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

    def judging(self, location: Location, now: datetime, override: str | None) -> Judging | None:
        """The judgement of one write at `location` (None: nothing to judge: no policy, and an
        actor held to no rule of its own). The policy is read here, before the store's lock is
        taken: it is input to the judgement, which runs under the lock (`Judging.__call__`).
        A blank `override` is refused before anything is read or written."""
        if override is not None and not override.strip():
            raise InvalidArgument("invalid --override '': give the reason for breaking glass")
        try:
            policy, problem = self.policy()
        except StoreError as exc:
            # a store that does not answer for the policy: the write itself is tried (a stop
            # always stops, or fails with the store's own line); nothing is weakened unjudged
            policy, problem = NO_POLICY, one_line(exc)
        self.problem = problem
        identity = self.identity
        if policy.empty and problem is None and identity.lift_floor == "anyone":
            return None
        return Judging(self, location, policy, problem, now, override)

    # -- the record --------------------------------------------------------------------------

    def refused(self, judging: Judging, refused: PolicyRefused) -> None:
        """Put a refused write on the record: one `refused` line naming every rule it broke."""
        for refusal in refused.refusals:
            _count(refusal.rule)
        detail = "; ".join(f"{r.rule}={r.value}: {r.message}" for r in refused.refusals)
        try:
            self.fleet.record("refused", judging.location, reason=judging.reason, detail=detail, now=judging.now)
        except (EstopError, OSError) as exc:
            log.warning("cannot record a refused write in the audit trail: %s", one_line(exc))

    def overridden(self, judging: Judging | None, generation: str | None) -> None:
        """Record a write that went ahead over refusals (audit `override`, one line per rule it
        overrode: notified, and shown on the status page while that generation stands)."""
        if judging is None or judging.override is None:
            return
        for refusal in judging.overrode:
            self.fleet.record("override", judging.location, generation=generation, reason=judging.override,
                              detail=f"{refusal.rule}={refusal.value}: {refusal.message}", now=judging.now)


class Judging:
    """One write's judgement (`model.judgement.judge`): what a store calls under its lock with
    the body standing and the body the write leaves. It raises `PolicyRefused` naming every
    rule broken (nothing is written), unless `override` breaks glass for an actor who may; the
    rules overridden are kept for the record (`overrode`)."""

    def __init__(self, guard: PolicyGuard, location: Location, policy: Policy, problem: str | None, now: datetime,
                 override: str | None) -> None:
        self.guard = guard
        self.location = location
        self.policy = policy
        self.problem = problem
        self.now = now
        self.override = override
        self.identity = guard.identity
        self.overrode: list[Refusal] = []
        self.reason: str | None = None
        self.verdicts: list[Judgement] = []

    def __call__(self, before: Reading, after: Sentinel | None, trusted: datetime) -> None:
        from hermes_estop.model.judgement import judge

        verdict = judge(before, after, self.identity, self.policy, self.now, trusted=trusted,
                        policy_problem=self.problem)
        self.verdicts.append(verdict)
        if verdict.allowed:
            return
        self.reason = next((h.reason for h in verdict.arms), None) or next(
            (c.before.reason for c in verdict.weakens), None)
        if self.override is not None:
            if may_override(self.policy, self.identity):
                self.overrode.extend(r for r in verdict.refusals if r not in self.overrode)
                return
            raise PolicyRefused(*(Refusal(r.rule, r.value, f"{r.message}; {printable(self.identity.name)} may not "
                                                           f"override (an admin, or a local operator who can write the "
                                                           f"fleet root)") for r in verdict.refusals))
        raise PolicyRefused(*verdict.refusals)
