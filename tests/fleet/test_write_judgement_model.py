"""Model-based proof of the write judgement (issue 43 item 9): random sequences of writes through
every door, by actors of random roles under random policies, on a real sentinel-file store,
checked after every write against an oracle written independently of the project's code (the
sentinel is read as JSON with `json`, the rules are the table of docs/policy.md written out):

- no write weakens a hold (removes it, brings its deadline forward, widens its allowlist,
  changes its owner) unless its actor has lift rights over that hold's owner;
- every refusal is on the record exactly once (one `refused` audit line per refused write);
- nothing is half written: a refused write leaves the sentinel byte for byte as it was.

The doors are the requests each one makes of `Fleet`: the CLI's pause (`Estop.engage_request`),
the API's extend (fenced on the generation it read, keeping the owner) and replace, resume in its
three forms, the drop-in's `retire(generation)` and `disengage`, a window's arm over its own hold,
the windows file's retire, and a lease's renewal."""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import HoldConflict
from hermes_estop.model.hold import VACANT, Allow, EngageRequest, Fence
from hermes_estop.model.policy import Actor, PolicyRefused
from hermes_estop.windows.scheduler import EDIT

SEQUENCES = 40
WRITES = 14
LIFT_RULES = ("anyone", "owner-or-admin", "admins")


@dataclass(frozen=True)
class Who:
    actor: Actor
    admin: bool


PEOPLE = [
    Who(Actor("alice@host", user="alice"), False),
    Who(Actor("bob@host", user="bob"), False),
    Who(Actor("boss@host", user="boss"), True),
    Who(Actor.remote("ci", "operator", "127.0.0.1"), False),
    Who(Actor.remote("pager", "admin", "127.0.0.1"), True),
    Who(EDIT, False),
]


def oracle_may_lift(policy: dict[str, Any], who: Who, owner: str | None) -> bool:
    """docs/policy.md's table: who may weaken a hold armed by `owner`."""
    window = (owner or "").startswith("window:")
    rule = policy["lift_windows"] if window else policy["lift"]
    if who.actor.role == "operator" and rule == "anyone":
        rule = "owner-or-admin"  # an operator token lifts only what it armed
    principal = who.actor.principal or who.actor.name
    if owner == f"run:{principal}":
        return True
    if rule == "anyone" or who.admin:
        return True
    return rule == "owner-or-admin" and (owner or "").removeprefix("run:") == principal


def body(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / "ESTOP").read_bytes())
    except FileNotFoundError:
        return None


def stamp(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def weakened(before: dict[str, Any] | None, after: dict[str, Any] | None, now: datetime) -> str | None:
    """How writing `after` over `before` weakens the hold, by the oracle's reading (None: it does not)."""
    if before is None:
        return None
    deadline = stamp(before.get("expires_at"))
    if deadline is not None and deadline <= now:
        return None  # expired: no longer held
    if after is None:
        return "removed"
    if after.get("generation") == before.get("generation"):
        return None
    new_deadline = stamp(after.get("expires_at"))
    if new_deadline is not None and (deadline is None or new_deadline < deadline):
        return "deadline"
    old_users = set(before.get("allow", {}).get("user_ids", []))
    new_users = set(after.get("allow", {}).get("user_ids", []))
    if new_users - old_users:
        return "allowlist"
    old_profiles = set(before.get("allow", {}).get("profiles", []))
    new_profiles = set(after.get("allow", {}).get("profiles", []))
    if new_users and old_profiles and (not new_profiles or new_profiles - old_profiles):
        return "allowlist"
    owners = (before.get("armed_by"), after.get("armed_by"))
    if owners[0] != owners[1] and not all((o or "").startswith("window:") for o in owners):
        return "owner"
    return None


def refused_count(fleet: Fleet) -> int:
    return sum(1 for e in fleet.history()[0] if e.event == "refused")


def door(rng: random.Random, fleet: Fleet, who: Who, now: datetime) -> tuple[str, Any]:
    """One write through a door picked at random: (the door's name, a thunk making the write)."""
    location = fleet.fleet_location
    (reading,) = fleet.read((location,), now).readings
    hold = reading.hold if reading.active else None
    generation = hold.generation if hold is not None else None
    owner = who.actor.owner
    ttl = rng.choice([None, timedelta(seconds=30), timedelta(hours=1), timedelta(hours=5)])
    allow = rng.choice([None, Allow.of(["424242"]), Allow.of(["424242", "7"])])

    def pause(replace: bool = False) -> Any:
        return fleet.engage(location, EngageRequest(reason=rng.choice([None, "OPS-1 db", "tidy"]), allow=allow,
                                                    expires_at=now + ttl if ttl else None, replace=replace,
                                                    armed_by=owner), now)

    def extend() -> Any:
        assert ttl is not None and hold is not None
        return fleet.engage(location, EngageRequest(expires_at=now + ttl, armed_by=hold.armed_by,
                                                    only_if=frozenset({generation})), now)

    def window() -> Any:
        return fleet.engage(location, EngageRequest(reason="nightly", expires_at=now + timedelta(hours=2), replace=True,
                                                    armed_by="window:nightly", window={"name": "nightly", "occurrence": "k"},
                                                    only_if=VACANT if hold is None else frozenset({generation})), now)

    def lease() -> Any:
        return fleet.engage(location, EngageRequest(expires_at=now + timedelta(minutes=6), armed_by=f"run:{owner}",
                                                    only_if=VACANT if hold is None else frozenset({generation})), now)

    doors = {
        "cli-pause": pause,
        "api-replace": lambda: pause(replace=True),
        "resume": lambda: fleet.release(location, None, now),
        "resume-generation": lambda: fleet.release(location, generation, now),
        "resume-all": lambda: fleet.release_all(location, now),
        "dropin-disengage": lambda: fleet.release_everywhere([location], now),
        "dropin-retire": lambda: fleet.retire_generation([location], generation or "none", now),
        "window-arm": window,
        "lease": lease,
    }
    if hold is not None and ttl is not None:
        doors["api-extend"] = extend
    if hold is not None and generation is not None:
        doors["windows-file-retire"] = lambda: fleet.acting_as(EDIT).retire(location, Fence(generation), now=now)
    name = rng.choice(sorted(doors))
    return name, doors[name]


EDITOR = Who(EDIT, False)


def _fixed(at: datetime) -> datetime:
    return at


@pytest.mark.parametrize("seed", range(SEQUENCES))
def test_no_write_weakens_a_hold_without_lift_rights_and_every_refusal_is_recorded_once(tmp_path: Path, seed: int,
                                                                                      record_property: Any) -> None:
    rng = random.Random(seed)
    root = tmp_path / "fleet"
    root.mkdir()
    policy = {"lift": rng.choice(LIFT_RULES), "lift_windows": rng.choice(LIFT_RULES)}
    arm_rules = rng.choice(['', 'max_ttl = "2h"\n', 'reason_pattern = "^OPS"\n'])
    (root / "estop.toml").write_text(f'[policy]\nlift = "{policy["lift"]}"\nlift_windows = "{policy["lift_windows"]}"\n'
                                     f'{arm_rules}\n[policy.roles]\n"boss" = "admin"\n')
    now = datetime.now(UTC).replace(microsecond=0)
    doors_used: dict[str, int] = {}
    refusals = 0
    for step in range(WRITES):
        now += timedelta(minutes=rng.choice([0, 1, 40]))
        who = rng.choice(PEOPLE)
        fleet = Fleet.of_files(root, clock=functools.partial(_fixed, now)).acting_as(who.actor)
        name, write = door(rng, fleet, who, now)
        if name == "windows-file-retire":
            who = EDITOR  # the file's edit writes as itself, whoever ran the daemon
        before_bytes = (root / "ESTOP").read_bytes() if (root / "ESTOP").exists() else None
        before = body(root)
        counted = refused_count(fleet)
        doors_used[name] = doors_used.get(name, 0) + 1
        try:
            write()
        except PolicyRefused:
            refusals += 1
            after_bytes = (root / "ESTOP").read_bytes() if (root / "ESTOP").exists() else None
            assert after_bytes == before_bytes, f"seed {seed} step {step}: {name} by {who.actor.name} was refused " \
                                                "and still wrote"
            assert refused_count(fleet) == counted + 1, f"seed {seed} step {step}: a refusal not recorded exactly once"
            continue
        except HoldConflict:
            continue  # a fence the door's read no longer meets: nothing written
        assert refused_count(fleet) == counted
        after = body(root)
        how = weakened(before, after, now)
        if how is not None:
            owner = before.get("armed_by") if before is not None else None
            assert oracle_may_lift(policy, who, owner), (
                f"seed {seed} step {step}: {name} by {who.actor.name} weakened ({how}) a hold armed by {owner} under "
                f"{policy}")
    record_property("doors", doors_used)
    record_property("refusals", refusals)
