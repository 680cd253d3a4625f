"""Issue 25: the lease of a maintenance job (`lease.Lease`), on the fake clock and every store of
the contract suite: it arms, renewals move its deadman forward (fenced on the generation it last
wrote), it is released on success and kept with a fixed deadman on failure, an operator's re-arm
or resume is never overwritten nor released, and a job that stops renewing lets the fleet wake
at the lease's end, never earlier than its last deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_estop.fleet.deadman import DeadmanService
from hermes_estop.fleet.lease import Lease
from hermes_estop.model.hold import HoldState

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


# -- issue 32 item 2, issue 33 item 6, issue 32 item 3 (the lease's side) ---------------------


def _operator_resumes(fleet_estop):
    fleet_estop.release(fleet=True)


def _operator_pauses_then_resumes(fleet_estop):
    fleet_estop.engage(reason="operator: looking", replace=True)
    fleet_estop.release(fleet=True)


def _operator_rearms(fleet_estop):
    fleet_estop.engage(reason="operator: keep it down", ttl="2h", replace=True)


@pytest.mark.parametrize("act", [_operator_resumes, _operator_pauses_then_resumes, _operator_rearms],
                         ids=["resume", "pause-then-resume", "re-arm"])
def test_a_lapsed_lease_never_rearms_over_an_operators_act(lease, fleet_estop, clock, act):
    said: list[str] = []
    lease.say = said.append
    lease.arm(clock.now)
    clock.advance(lease.renew_every)
    assert lease.renew(clock.now)
    before = _standing(fleet_estop)
    act(fleet_estop)                           # the runner is stopped meanwhile: no renewals
    after_act = _standing(fleet_estop)
    clock.advance(TTL + timedelta(seconds=1))  # it is continued after its lease lapsed
    assert not lease.renew(clock.now)
    assert lease.state.taken_over and "test@host" in lease.state.taken_over
    assert [line for line in said if "not armed again" in line]
    standing = _standing(fleet_estop)
    assert standing.state is after_act.state and (standing.hold is None) is (after_act.hold is None)
    assert standing.hold is None or standing.hold.generation != before.hold.generation
    outcome = lease.finish(clock.now, 0, on_failure="hold", failure_ttl=HOUR, command="migrate")
    assert "left as it is" in outcome
    assert _standing(fleet_estop).state is standing.state


@pytest.mark.parametrize("retired_by_deadman", [False, True], ids=["left-on-disk", "retired-by-deadman"])
def test_a_lapsed_lease_that_nobody_else_touched_is_armed_again_and_says_so(lease, fleet_estop, clock,
                                                                             retired_by_deadman):
    said: list[str] = []
    lease.say = said.append
    first = lease.arm(clock.now).generation
    clock.advance(TTL + timedelta(seconds=1))
    if retired_by_deadman:  # the daemon's `expire` of the lease's own hold is no operator's act
        assert DeadmanService(fleet_estop.fleet).tick(clock.now).retired
    assert lease.renew(clock.now)
    assert lease.state.generation != first and not lease.state.taken_over
    assert _standing(fleet_estop).state is HoldState.ACTIVE
    assert [line for line in said if "armed again" in line and "nobody else wrote it" in line]


def _break_store(fleet_estop):
    """A real fault: the scope's write lock cannot be opened (a directory where it belongs), so
    every write there fails at once, while reads still work."""
    from hermes_estop.stores.file import LOCK_NAME

    lock = fleet_estop.layout.fleet.path / LOCK_NAME
    lock.unlink(missing_ok=True)
    lock.mkdir()
    return lock


@pytest.fixture
def file_lease(fleet_root, root_layout, clock):
    from hermes_estop import Estop

    estop = Estop(layout=root_layout, store="file", clock=clock, actor="test@host")
    said: list[str] = []
    made = Lease(estop.fleet, root_layout.fleet, timedelta(seconds=6), reason="maintenance: migrate", say=said.append)
    return estop, made, said


def test_a_failed_renewal_is_retried_promptly_until_the_store_is_back(file_lease, clock):
    from hermes_estop.fleet.lease import retry_delay

    estop, lease, said = file_lease
    lease.arm(clock.now)
    armed_deadline = lease.state.deadline
    broken = _break_store(estop)
    back_at = clock.now + 2 * lease.renew_every + timedelta(milliseconds=500)  # two renewals fail
    attempts = []
    while True:
        clock.advance(lease.next_attempt_in())
        if broken.exists() and clock.now >= back_at:
            broken.rmdir()
        attempts.append(clock.now)
        if lease.renew(clock.now):
            break
        assert len(attempts) < 200
    renewed_at = attempts[-1]
    assert renewed_at - back_at <= retry_delay(lease.ttl, len(attempts))   # promptly once it was back
    assert renewed_at < armed_deadline + lease.renew_every                  # and before the last deadline
    assert lease.state.deadline == renewed_at + lease.ttl
    assert not [e for e in estop.history() if e.event == "expire"]
    failed = [line for line in said if "renewal failed" in line]
    recovered = [line for line in said if "renewals recovered" in line]
    assert len(failed) == 1 and len(recovered) == 1 and f"after {len(attempts) - 1} failed attempt" in recovered[0]


@pytest.mark.parametrize("ttl", [timedelta(seconds=1), timedelta(seconds=6), timedelta(minutes=5), timedelta(hours=1)],
                         ids=["1s", "6s", "5m", "1h"])
def test_retry_delay_is_bounded_and_leaves_several_attempts_before_the_lease_lapses(ttl):
    from hermes_estop.fleet.lease import retry_delay

    delays = [retry_delay(ttl, failures) for failures in range(1, 60)]
    assert delays == sorted(delays) and delays[0] > timedelta(0)
    assert max(delays) <= min(ttl / 12, timedelta(seconds=10))
    left, attempts = ttl * 2 / 3, 0
    for delay in delays:
        left -= delay
        if left < timedelta(0):
            break
        attempts += 1
    assert attempts >= 8


@pytest.mark.parametrize(("code", "on_failure", "said"), [(0, "hold", "the release of fleet failed"),
                                                           (3, "release", "the release of fleet failed"),
                                                           (3, "hold", "could not keep fleet held for the failure")])
def test_a_failed_final_write_says_what_stands_and_until_when(file_lease, clock, code, on_failure, said):
    estop, lease, _ = file_lease
    lease.arm(clock.now)
    clock.advance(seconds=1)
    _break_store(estop)
    outcome = lease.finish(clock.now, code, on_failure=on_failure, failure_ttl=HOUR, command="migrate")
    assert said in outcome
    assert (f"this job's hold at fleet (generation {lease.state.generation}) stands until "
            f"{lease.state.deadline.isoformat()}") in outcome


def test_the_leases_lines_show_times_as_a_person_reads_them(file_lease, clock, berlin):
    """Issue 38 item 11 on `hermes run`'s lease lines: to the second, in the local zone, with
    its offset (never `...+00:00` with microseconds)."""
    from hermes_estop.model.timeutil import display_instant

    estop, lease, said = file_lease
    lease.arm(clock.now)
    broken = _break_store(estop)
    clock.advance(lease.next_attempt_in() + timedelta(microseconds=123456))
    assert not lease.renew(clock.now)
    broken.rmdir()
    (failed,) = [line for line in said if "renewal failed" in line]
    local = display_instant(clock.now)
    assert local is not None and local.endswith(("+01:00", "+02:00")) and f"renewal failed at {local} " in failed
    assert "+00:00" not in failed and ".123456" not in failed
