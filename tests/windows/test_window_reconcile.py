"""The pure decision core: one plan per scope from (windows, ledger, one reading, now)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import rows, scope_plan

from hermes_estop.model.hold import VACANT, Allow, Fence, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.windows.ledger import ARMED, RELEASED, SKIPPED, entry_for
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import covering
from hermes_estop.windows.plan import (
    Arm,
    Retire,
    Skip,
    chain_end,
    claims,
    intersect_allow,
)

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
FLEET = Location("fleet", Path("/nonexistent"))


def window(name: str, start: datetime, duration: str = "1h", **extra) -> Window:
    return Window.parse({"name": name, "at": start.isoformat(), "duration": duration, **extra})


def absent() -> Reading:
    return Reading(FLEET, HoldState.ABSENT)


def holding(generation: str | None, *, expires_at=None, armed_by=None, body_window=None, allow=None,
            reason=None) -> Reading:
    hold = Hold(generation, T0, reason, expires_at, allow if allow is not None else Allow(), armed_by, body_window)
    return Reading(FLEET, HoldState.ACTIVE, hold, Fence(generation))


@pytest.mark.parametrize(
    "allows, users, profiles",
    [
        ([Allow.of(["1", "2"]), Allow.of(["2", "3"])], {"2"}, set()),
        ([Allow.of(["1"]), Allow.of(["2"])], set(), set()),
        ([Allow.of(["1"], ["ops"]), Allow.of(["1"])], {"1"}, {"ops"}),
        ([Allow.of(["1"], ["ops", "bot"]), Allow.of(["1"], ["bot"])], {"1"}, {"bot"}),
        ([Allow.of(["1"], ["ops"]), Allow.of(["1"], ["bot"])], set(), set()),
        ([Allow.of(["1"]), Allow()], set(), set()),
        ([Allow.of(["1"]), Allow(valid=False)], set(), set()),
    ],
)
def test_composite_allowlist_is_the_intersection(allows, users, profiles):
    combined = intersect_allow(allows)
    assert (combined.user_ids, combined.profiles) == (users, profiles)
    for user in ("1", "2", "3"):
        for profile in ("ops", "bot", None):
            assert combined.admits(user, profile) == all(a.admits(user, profile) for a in allows)


def test_chain_end_follows_starts_up_to_and_including_the_lift_instant():
    a = window("a", T0, "1h")
    b = window("b", T0 + timedelta(hours=1), "1h")  # starts exactly when a lifts
    c = window("c", T0 + timedelta(hours=2, seconds=1), "1h")  # a free second before it
    [first] = covering(a, T0)
    assert chain_end([first], rows([a, b, c]), T0) == T0 + timedelta(hours=2)


def test_chain_end_is_bounded_for_a_window_overlapping_itself_forever():
    forever = Window.parse({"name": "f", "cron": "* * * * *", "duration": "2m"})
    members = covering(forever, T0)
    end = chain_end(members, rows([forever]), T0, limit=10)
    assert T0 + timedelta(minutes=2) < end <= T0 + timedelta(minutes=13)


def test_fresh_occurrence_on_a_vacant_scope_arms_fenced_on_vacant():
    w = window("w", T0, reason="why", allow={"user_ids": ["7"]})
    plan = scope_plan("fleet", T0, rows([w]), {}, absent())
    [arm] = plan.actions
    assert isinstance(arm, Arm) and arm.only_if is VACANT
    assert arm.desired.deadline == T0 + timedelta(hours=1)
    assert arm.desired.armed_by == "window:w"
    assert arm.desired.reason == "why" and arm.desired.allow == Allow.of(["7"])


def test_foreign_hold_yields_a_skip_and_no_write():
    w = window("w", T0)
    plan = scope_plan("fleet", T0, rows([w]), {}, holding("manual", armed_by="root@host"))
    [skip] = plan.actions
    assert isinstance(skip, Skip) and skip.standing_generation == "manual"


def test_skipped_or_released_occurrence_is_left_alone():
    w = window("w", T0)
    [occurrence] = covering(w, T0)
    for state in (SKIPPED, RELEASED):
        plan = scope_plan("fleet", T0 + timedelta(minutes=1), rows([w]), {occurrence.key: entry_for(occurrence, state, T0)},
                          absent())
        assert plan.actions == ()


def test_our_hold_gone_before_the_end_is_noted_released():
    w = window("w", T0)
    [occurrence] = covering(w, T0)
    entries = {occurrence.key: entry_for(occurrence, ARMED, T0, "g1")}
    plan = scope_plan("fleet", T0 + timedelta(minutes=5), rows([w]), entries, absent())
    assert plan.actions == ()
    [note] = plan.notes
    assert (note.state, note.generation) == (RELEASED, "g1")


def test_our_hold_as_wanted_needs_no_write():
    w = window("w", T0)
    [occurrence] = covering(w, T0)
    entries = {occurrence.key: entry_for(occurrence, ARMED, T0, "g1")}
    reading = holding("g1", expires_at=T0 + timedelta(hours=1), armed_by="window:w",
                      reason="maintenance window w")
    assert scope_plan("fleet", T0 + timedelta(minutes=5), rows([w]), entries, reading).actions == ()


def test_a_longer_duration_extends_our_own_hold_fenced_on_its_generation():
    w = window("w", T0, "2h")
    [occurrence] = covering(w, T0)
    entries = {occurrence.key: entry_for(occurrence, ARMED, T0, "g1")}
    reading = holding("g1", expires_at=T0 + timedelta(hours=1), armed_by="window:w", reason="maintenance window w")
    [arm] = scope_plan("fleet", T0 + timedelta(minutes=5), rows([w]), entries, reading).actions
    assert isinstance(arm, Arm) and arm.only_if == frozenset({"g1"}) and arm.desired.deadline == T0 + timedelta(hours=2)


def test_no_candidate_left_retires_exactly_our_generation():
    w = window("w", T0)
    [occurrence] = covering(w, T0)
    entries = {occurrence.key: entry_for(occurrence, ARMED, T0, "g1")}
    reading = holding("g1", expires_at=T0 + timedelta(hours=3))
    [retire] = scope_plan("fleet", T0 + timedelta(hours=1), rows([w]), entries, reading).actions
    assert isinstance(retire, Retire) and retire.generation == "g1"


def test_body_claims_only_from_a_window_armed_hold():
    body = {"name": "a", "occurrence": "x", "covers": [{"name": "a", "occurrence": "x"}, {"name": "b", "occurrence": "y"}]}
    assert claims(Hold("g", window=body, armed_by="window:a"), "ops") == {"ops/a@x", "ops/b@y"}
    assert claims(Hold("g", window=body, armed_by="root@host"), "ops") == frozenset()
    assert claims(Hold("g", armed_by="window:a"), "ops") == frozenset()
