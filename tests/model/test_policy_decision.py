"""The arming policy's pure decision against an oracle, and `[policy]` parsing (issue 37)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings, strategies as st

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.policy import (
    NO_POLICY,
    Actor,
    HoldToArm,
    HoldToLift,
    Policy,
    Rules,
    decide_arm,
    decide_lift,
    may_override,
    parse_policy,
    policy_document,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
USERS = ("alice", "bob", "carol")
SCOPES = ("fleet", "billing", "search")

ttls = st.one_of(st.none(), st.integers(min_value=60, max_value=86400 * 3).map(lambda s: timedelta(seconds=s)))
rules = st.builds(Rules, max_ttl=ttls, require_ttl=st.booleans(),
                  reason_pattern=st.sampled_from([None, r"^[A-Z]+-\d+", "deploy"]),
                  lift=st.sampled_from(["anyone", "owner-or-admin", "admins"]),
                  lift_windows=st.sampled_from(["anyone", "owner-or-admin", "admins"]))
policies = st.builds(Policy, rules=rules, max_scope=st.sampled_from(["fleet", "profile"]),
                     roles=st.dictionaries(st.sampled_from([*USERS, "group:ops", "alice@host"]), st.sampled_from(["admin", "operator"])),
                     profiles=st.dictionaries(st.sampled_from(SCOPES[1:]), rules, max_size=2))
actors = st.one_of(
    st.builds(lambda u, ops, w: Actor(f"{u}@host", user=u, groups=frozenset({"ops"} if ops else set()), can_write_root=w),
              st.sampled_from(USERS), st.booleans(), st.booleans()),
    st.builds(Actor.remote, st.sampled_from(["ci", "pager"]), st.sampled_from(["admin", "operator"])),
)
deadlines = st.one_of(st.none(), st.integers(min_value=-3600, max_value=86400 * 4).map(lambda s: NOW + timedelta(seconds=s)))
reasons = st.sampled_from([None, "", "OPS-12 deploy", "deploy db", "just because"])
armers = st.sampled_from([None, "alice@host", "bob@host", "run:alice@host", "window:nightly", "token:ci"])


def oracle_is_admin(policy: Policy, actor: Actor) -> bool:
    if actor.role is not None:
        return actor.role == "admin"
    return policy.roles.get(actor.name) == "admin" or policy.roles.get(actor.user or "") == "admin" or any(
        policy.roles.get(f"group:{g}") == "admin" for g in actor.groups)


def oracle_arm(policy: Policy, actor: Actor, arm: HoldToArm) -> str | None:
    """The rules of issue 37 written out as a table, checked in order."""
    r = policy.profiles.get(arm.scope, policy.rules) if arm.scope != "fleet" else policy.rules
    checks = [
        ("max_scope", arm.scope == "fleet" and policy.max_scope == "profile" and not oracle_is_admin(policy, actor)),
        ("require_ttl", r.require_ttl and arm.expires_at is None),
        ("max_ttl", arm.expires_at is not None and r.max_ttl is not None and arm.expires_at > NOW + r.max_ttl),
        ("reason_pattern", r.reason_pattern is not None and (
            arm.reason is None or not __import__("re").search(r.reason_pattern, arm.reason))),
    ]
    return next((rule for rule, broken in checks if broken), None)


def oracle_lift(policy: Policy, actor: Actor, lift: HoldToLift) -> str | None:
    if lift.expires_at is not None and lift.expires_at <= NOW:
        return None
    if lift.armed_by == f"run:{actor.name}":
        return None
    r = policy.profiles.get(lift.scope, policy.rules) if lift.scope != "fleet" else policy.rules
    window = (lift.armed_by or "").startswith("window:")
    rule = "lift_windows" if window else "lift"
    who = r.lift_windows if window else r.lift
    # an operator token lifts only what it armed, whatever the policy says (issue 43)
    if actor.role == "operator" and actor.name.startswith("token:") and who == "anyone":
        rule, who = "token", "owner-or-admin"
    owner = (lift.armed_by or "").removeprefix("run:")
    allowed = {"anyone": True, "admins": oracle_is_admin(policy, actor),
               "owner-or-admin": oracle_is_admin(policy, actor) or owner == actor.name}[who]
    return None if allowed else rule


@settings(max_examples=400, deadline=None)
@given(policies, actors, st.builds(HoldToArm, st.sampled_from(SCOPES), deadlines, reasons))
def test_arm_decision_matches_the_rule_table(policy: Policy, actor: Actor, arm: HoldToArm) -> None:
    refusal = decide_arm(policy, actor, arm, NOW)
    assert (refusal.rule if refusal else None) == oracle_arm(policy, actor, arm)


@settings(max_examples=400, deadline=None)
@given(policies, actors, st.builds(HoldToLift, st.sampled_from(SCOPES), armers, deadlines))
def test_lift_decision_matches_the_rule_table(policy: Policy, actor: Actor, lift: HoldToLift) -> None:
    refusal = decide_lift(policy, actor, lift, NOW)
    assert (refusal.rule if refusal else None) == oracle_lift(policy, actor, lift)


@given(st.builds(HoldToArm, st.sampled_from(SCOPES), deadlines, reasons), actors)
def test_no_policy_refuses_nothing_but_an_operator_tokens_lift_of_anothers_hold(arm: HoldToArm, actor: Actor) -> None:
    assert decide_arm(NO_POLICY, actor, arm, NOW) is None
    refusal = decide_lift(NO_POLICY, actor, HoldToLift(arm.scope, "someone@else", arm.expires_at), NOW)
    operator_token = actor.role == "operator" and actor.name.startswith("token:")
    expired = arm.expires_at is not None and arm.expires_at <= NOW
    assert (refusal.rule if refusal else None) == ("token" if operator_token and not expired else None)
    assert decide_lift(NO_POLICY, actor, HoldToLift(arm.scope, actor.owner, arm.expires_at), NOW) is None


@settings(max_examples=200, deadline=None)
@given(policies, actors)
def test_override_is_for_admins_and_local_writers_of_the_root(policy: Policy, actor: Actor) -> None:
    assert may_override(policy, actor) == (oracle_is_admin(policy, actor) or actor.can_write_root)


@settings(max_examples=200, deadline=None)
@given(policies)
def test_a_shown_policy_reads_back_as_itself(policy: Policy) -> None:
    """(A profile's table sets values; it cannot unset a fleet-wide max_ttl or reason_pattern.)"""
    assume(all(not (getattr(r, key) is None and getattr(policy.rules, key) is not None)
               for r in policy.profiles.values() for key in ("max_ttl", "reason_pattern")))
    assert parse_policy(policy_document(policy), "test") == policy


def test_a_refusal_names_the_rule_and_the_value() -> None:
    policy = parse_policy({"max_ttl": "8h"}, "estop.toml")
    refusal = decide_arm(policy, Actor("bob@host", user="bob"), HoldToArm("fleet", NOW + timedelta(hours=9), None), NOW)
    assert refusal is not None
    assert "max_ttl" in refusal.message and "9h" in refusal.message and "8h" in refusal.message


@pytest.mark.parametrize(("table", "named"), [
    ({"max_tll": "8h"}, "'max_tll'"),
    ({"profiles": {"billing": {"max_scope": "fleet"}}}, "'max_scope'"),
    ({"max_ttl": "8"}, "max_ttl"),
    ({"max_ttl": "400d"}, "max_ttl"),
    ({"require_ttl": "yes"}, "require_ttl"),
    ({"reason_pattern": "("}, "reason_pattern"),
    ({"lift": "owners"}, "'owners'"),
    ({"max_scope": "world"}, "'world'"),
    ({"roles": {"alice": "root"}}, "'root'"),
    ({"roles": ["alice"]}, "policy.roles"),
])
def test_a_bad_policy_is_refused_naming_the_key(table: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidArgument, match=r"estop\.toml") as caught:
        parse_policy(table, "estop.toml")
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)
