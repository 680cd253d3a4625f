"""Issue 25: the lease of a maintenance job (`lease.Lease`), on the fake clock and every store of
the contract suite: it arms, renewals move its deadman forward (fenced on the generation it last
wrote), it is released on success and kept with a fixed deadman on failure, an operator's re-arm
or resume is never overwritten nor released, and a job that stops renewing lets the fleet wake
at the lease's end, never earlier than its last deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_estop.deadman import DeadmanService
from hermes_estop.hold import HoldState
from hermes_estop.lease import Lease

TTL = timedelta(minutes=5)
HOUR = timedelta(hours=1)


@pytest.fixture
def lease(fleet_estop):
    return Lease(fleet_estop.fleet, fleet_estop.layout.fleet, TTL, reason="maintenance: migrate")


def _standing(fleet_estop):
    return fleet_estop.fleet.read((fleet_estop.layout.fleet,)).readings[0]


def test_renewals_move_the_deadman_forward_and_success_releases(lease, fleet_estop, clock):
    state = lease.arm(clock.now)
    assert state.deadline == clock.now + TTL and not state.borrowed
    deadlines = [state.deadline]
    for _ in range(3):
        clock.advance(lease.renew_every)
        assert lease.renew(clock.now)
        deadlines.append(_standing(fleet_estop).hold.expires_at)
    assert deadlines == sorted(deadlines) and len(set(deadlines)) == 4
    assert lease.finish(clock.now, 0, on_failure="hold", failure_ttl=HOUR, command="migrate") == "released fleet"
    assert _standing(fleet_estop).state is HoldState.ABSENT


def test_a_failure_keeps_the_hold_with_a_fixed_deadman_naming_the_exit_code(lease, fleet_estop, clock):
    lease.arm(clock.now)
    clock.advance(minutes=1)
    lease.finish(clock.now, 3, on_failure="hold", failure_ttl=HOUR, command="migrate")
    standing = _standing(fleet_estop)
    assert standing.state is HoldState.ACTIVE
    assert standing.hold.reason == "maintenance failed: migrate exited 3"
    assert standing.hold.expires_at == clock.now + HOUR


def test_on_failure_release_releases(lease, fleet_estop, clock):
    lease.arm(clock.now)
    lease.finish(clock.now, 3, on_failure="release", failure_ttl=HOUR, command="migrate")
    assert _standing(fleet_estop).state is HoldState.ABSENT


def test_an_operator_rearm_is_never_overwritten_nor_released(lease, fleet_estop, clock):
    lease.arm(clock.now)
    clock.advance(minutes=1)
    theirs = fleet_estop.engage(reason="operator: keep it down", ttl="2h")
    clock.advance(lease.renew_every)
    assert not lease.renew(clock.now)
    assert "re-armed" in (lease.state.taken_over or "")
    outcome = lease.finish(clock.now, 0, on_failure="hold", failure_ttl=HOUR, command="migrate")
    assert "left as it is" in outcome
    standing = _standing(fleet_estop)
    assert standing.hold.generation == theirs.generation and standing.hold.reason == "operator: keep it down"


def test_an_operator_resume_during_the_job_is_not_undone(lease, fleet_estop, clock):
    lease.arm(clock.now)
    fleet_estop.release(fleet=True)
    clock.advance(lease.renew_every)
    assert not lease.renew(clock.now)
    lease.finish(clock.now, 3, on_failure="hold", failure_ttl=HOUR, command="migrate")
    assert _standing(fleet_estop).state is HoldState.ABSENT


def test_a_standing_hold_is_borrowed_never_renewed_or_released(lease, fleet_estop, clock):
    theirs = fleet_estop.engage(reason="operator pause")
    state = lease.arm(clock.now)
    assert state.borrowed and state.generation == theirs.generation
    clock.advance(lease.renew_every)
    assert not lease.renew(clock.now)
    lease.finish(clock.now, 0, on_failure="hold", failure_ttl=HOUR, command="migrate")
    standing = _standing(fleet_estop)
    assert standing.hold.generation == theirs.generation and standing.hold.expires_at is None


def test_a_job_that_stops_renewing_lets_the_fleet_wake_at_the_lease_end_not_before(lease, fleet_estop, clock):
    lease.arm(clock.now)
    clock.advance(lease.renew_every)
    lease.renew(clock.now)
    last_deadline = lease.state.deadline
    # `hermes run` dies here: no more renewals
    deadman = DeadmanService(fleet_estop.fleet)
    assert deadman.tick(last_deadline - timedelta(microseconds=1)).retired == []
    assert fleet_estop.fleet.read(now=last_deadline - timedelta(microseconds=1)).engaged
    assert [r.location.scope for r in deadman.tick(last_deadline).retired] == ["fleet"]
    assert not fleet_estop.fleet.read(now=last_deadline).engaged


def test_a_lease_that_lapsed_while_the_store_was_unwritable_is_armed_again(lease, fleet_estop, clock):
    first = lease.arm(clock.now).generation
    clock.advance(TTL + timedelta(seconds=1))  # every renewal in between failed
    assert lease.renew(clock.now)
    assert lease.state.generation != first and lease.state.deadline == clock.now + TTL
    assert _standing(fleet_estop).state is HoldState.ACTIVE
