"""PassGate: a pass decides its items from one snapshot at most `max_age` old, per view, with the
same answers as `Estop.gate`."""

from __future__ import annotations

import pytest

from hermes_estop import InvalidArgument
from hermes_estop.consumers.passgate import PassGate, gate_work


class Ticks:
    """A fake monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pass_keeps_its_snapshot_until_it_is_max_age_old(fleet):
    ticks = Ticks()
    passing = PassGate(fleet, max_age=0.005, monotonic=ticks)
    assert passing("alice", None)
    fleet.engage(reason="maintenance")
    ticks.now += 0.004
    assert passing("alice", None), "within max_age the pass decides from the snapshot it has"
    ticks.now += 0.001
    verdict = passing("alice", None)
    assert not verdict and verdict.engaged, "at max_age the snapshot is read again"


def test_a_hold_engaged_mid_pass_stops_the_rest_of_the_pass(fleet):
    passing = PassGate(fleet, max_age=0.0)
    assert passing(None, None)
    fleet.engage(reason="maintenance")
    assert not passing(None, None)
    fleet.release(fleet=True)
    assert passing(None, None)


@pytest.mark.parametrize("user, admitted", [("alice", True), ("bob", False), (None, False)])
def test_verdicts_and_notices_are_those_of_the_gate(fleet, user, admitted):
    fleet.engage(reason="maintenance", allow={"user_ids": ["alice"]}, ttl="1h")
    passing = PassGate(fleet)
    for _ in range(3):
        verdict = passing(user, None)
        assert bool(verdict) is admitted is bool(fleet.gate(user))
        assert passing.notice(verdict) == fleet.gate(user).notice


@pytest.mark.parametrize("profile, held", [("p1", True), ("p2", False), (None, False)])
def test_work_for_another_profile_is_gated_through_that_profiles_view(fleet, p1, profile, held):
    p1.engage(reason="p1 maintenance")
    passing = PassGate(fleet)
    assert bool(passing(None, profile)) is not held
    assert bool(gate_work(fleet, None, profile)) is not held


def test_a_bad_profile_name_is_refused(fleet):
    with pytest.raises(InvalidArgument, match="profile"):
        PassGate(fleet)(None, "../elsewhere")


def test_an_unhashable_owner_from_a_hand_edited_row_is_still_gated(fleet):
    passing = PassGate(fleet)
    assert passing(["alice"], None)
    fleet.engage(reason="maintenance", allow={"user_ids": ["alice"]})
    assert not PassGate(fleet)(["alice"], None)


def test_an_unhashable_profile_is_refused_as_a_bad_profile(fleet):
    with pytest.raises(InvalidArgument):
        PassGate(fleet)(None, ["p1"])  # type: ignore[arg-type]  # a hand-edited row is not typed
