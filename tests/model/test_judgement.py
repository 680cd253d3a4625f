"""The one judgement of a write (issue 43), as a pure function: what a transition weakens, per
hold of the location, and who may make it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.model.hold import NOBODY, Allow, Cause, Fence, Hold, HoldState, Reading, Sentinel
from hermes_estop.model.homes import Layout
from hermes_estop.model.judgement import judge, transition, widens
from hermes_estop.model.policy import Actor, Policy, Rules
from hermes_estop.model.selector import Selector

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
LOCATION = Layout(home=Path("/fleet"), root=Path("/fleet")).fleet
BOSS = "boss@host"


def held(**fields: object) -> Hold:
    base: dict[str, object] = {"generation": "g1", "engaged_at": NOW, "reason": "db", "expires_at": NOW + timedelta(hours=2),
                               "allow": Allow.of(["1"]), "armed_by": BOSS}
    base.update(fields)
    return Hold(**base)  # type: ignore[arg-type]


def reading(hold: Hold | None, *scoped: Hold) -> Reading:
    state = HoldState.ABSENT if hold is None else HoldState.ACTIVE if hold.active_at(NOW) else HoldState.EXPIRED
    readings = tuple(Reading(LOCATION, HoldState.ACTIVE, s, Fence(s.generation)) for s in scoped)
    return Reading(LOCATION, state, hold, Fence(hold.generation) if hold else None).with_scoped(readings)


SCOPED = held(generation="s1", selector=Selector(frozenset({"cron", "kanban"})), hold_id="ab12")


@pytest.mark.parametrize(("before", "after", "kinds"), [
    pytest.param(reading(held()), None, ("removes",), id="release"),
    pytest.param(reading(held()), Sentinel(held(generation="g2", expires_at=NOW + timedelta(seconds=1))), ("deadline",),
                 id="shorter-deadline"),
    pytest.param(reading(held(expires_at=None)), Sentinel(held(generation="g2")), ("deadline",), id="deadline-where-none"),
    pytest.param(reading(held()), Sentinel(held(generation="g2", expires_at=NOW + timedelta(hours=9))), (), id="extend"),
    pytest.param(reading(held()), Sentinel(held(generation="g2", allow=Allow.of(["1", "2"]))), ("allowlist",),
                 id="wider-allowlist"),
    pytest.param(reading(held()), Sentinel(held(generation="g2", allow=NOBODY)), (), id="narrower-allowlist"),
    pytest.param(reading(held(allow=Allow.of(["1"], ["pa"]))), Sentinel(held(generation="g2", allow=Allow.of(["1"]))),
                 ("allowlist",), id="profiles-dropped"),
    pytest.param(reading(held()), Sentinel(held(generation="g2", armed_by="alice@host")), ("owner",), id="owner"),
    pytest.param(reading(held(armed_by="window:a")), Sentinel(held(generation="g2", armed_by="window:b")), (),
                 id="window-to-window"),
    pytest.param(reading(held(expires_at=NOW - timedelta(minutes=1))), None, (), id="expired-removal"),
    pytest.param(reading(None, SCOPED), Sentinel(None, (held(generation="s2", selector=Selector(frozenset({"cron"})),
                                                             hold_id="ab12"),)), ("cover",), id="narrower-cover"),
    pytest.param(reading(None, SCOPED), Sentinel(None, ()), ("removes",), id="scoped-removed"),
    pytest.param(reading(held(), SCOPED), Sentinel(held(generation="g2"), (SCOPED,)), (), id="scoped-kept-untouched"),
    pytest.param(Reading(LOCATION, HoldState.UNREADABLE, None, Fence(), "bad", Cause.BODY),
                 Sentinel(held(generation="g2")), ("deadline", "allowlist", "owner"), id="over-unreadable"),
])
def test_a_transition_weakens_exactly_what_it_takes_away(before: Reading, after: Sentinel | None,
                                                       kinds: tuple[str, ...]) -> None:
    weakens, _arms = transition(before, after, NOW)
    assert tuple(k for change in weakens for k in change.kinds) == kinds


@pytest.mark.parametrize(("before", "after", "widened"), [
    (Allow.of(["1"]), Allow.of(["1"]), False),
    (Allow.of(["1"]), Allow.of(["2"]), True),
    (NOBODY, Allow.of(["2"]), True),
    (Allow.of(["1", "2"]), Allow.of(["1"]), False),
    (Allow.of(["1"], ["pa"]), Allow.of(["1"], ["pa", "pb"]), True),
    (Allow.of(["1"], ["pa", "pb"]), Allow.of(["1"], ["pa"]), False),
    (Allow.of(["1"]), NOBODY, False),
])
def test_an_allowlist_widens_when_it_admits_someone_it_did_not(before: Allow, after: Allow, widened: bool) -> None:
    assert widens(before, after) is widened


LIFT_ADMINS = Policy(Rules(lift="admins"), roles={"boss": "admin"})


@pytest.mark.parametrize(("actor", "allowed"), [
    (Actor(BOSS, user="boss"), True),
    (Actor("alice@host", user="alice"), False),
    (Actor("alice@host", user="alice", can_write_root=True), False),
])
def test_weakening_needs_lift_rights_whatever_the_verb(actor: Actor, allowed: bool) -> None:
    shorter = Sentinel(held(generation="g2", expires_at=NOW + timedelta(seconds=1)))
    for after in (None, shorter):
        verdict = judge(reading(held()), after, actor, LIFT_ADMINS, NOW)
        assert verdict.allowed is allowed
        assert verdict.weakening


def test_a_hold_stands_while_either_clock_says_it_does() -> None:
    """The caller's clock past the deadline does not make the lift free while the store's
    trusted clock says the hold still stands (a process decides for itself, not for the fleet)."""
    hold = held(expires_at=NOW + timedelta(minutes=5))
    ahead = NOW + timedelta(hours=1)
    alice = Actor("alice@host", user="alice")
    assert not judge(reading(hold), None, alice, LIFT_ADMINS, ahead, trusted=NOW).allowed
    assert judge(reading(hold), None, alice, LIFT_ADMINS, ahead, trusted=ahead).allowed


def test_an_unreadable_policy_refuses_every_weakening_and_no_arm() -> None:
    alice = Actor("alice@host", user="alice")
    arm = judge(reading(None), Sentinel(held()), alice, Policy(), NOW, policy_problem="unknown key")
    lift = judge(reading(held()), None, alice, Policy(), NOW, policy_problem="unknown key")
    assert arm.allowed and not lift.allowed and lift.refusals[0].rule == "policy"


def test_a_lease_renewal_continues_its_arm_and_a_new_lease_is_judged() -> None:
    lease = f"run:{BOSS}"
    tight = Policy(Rules(max_ttl=timedelta(minutes=3)))
    actor = Actor(BOSS, user="boss")
    before = reading(held(armed_by=lease, expires_at=NOW + timedelta(minutes=4)))
    renewed = Sentinel(held(generation="g2", armed_by=lease, expires_at=NOW + timedelta(minutes=6)))
    assert judge(before, renewed, actor, tight, NOW).allowed
    assert not judge(reading(None), renewed, actor, tight, NOW).allowed
