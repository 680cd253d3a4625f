"""Issue 19: the daemon's deadman (`deadman.DeadmanService` over `Fleet.retire_expired`), on the
fake clock, on every store of the contract suite: an expired hold of any scope is retired and
its `expire` audit line written with no reader around; a re-arm is never retired, also when it
lands between the expiry read and the retire."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hermes_estop import Estop
from hermes_estop.fleet.deadman import DeadmanService
from hermes_estop.model.hold import HoldState


def _expires(estop: Estop) -> list[str | None]:
    return [e.generation for e in estop.history() if e.event == "expire"]


def test_the_daemon_retires_an_expired_hold_and_records_its_expiry(fleet_estop, clock):
    hold = fleet_estop.engage(reason="maintenance", ttl="2s")
    service = DeadmanService(fleet_estop.fleet, interval=5)
    assert service.tick(clock.now + timedelta(seconds=1.999)).retired == []
    report = service.tick(clock.now + timedelta(seconds=2))
    assert [r.fence.generation for r in report.retired] == [hold.generation]
    assert _expires(fleet_estop) == [hold.generation]
    fleet_estop.store.settle()
    assert fleet_estop.fleet.read().readings[0].state is HoldState.ABSENT


def test_every_scope_of_the_fleet_is_retired_not_only_this_process_s(fleet_estop, clock):
    (fleet_estop.layout.root / "profiles" / "ops").mkdir(parents=True, exist_ok=True)
    root_hold = fleet_estop.engage(reason="root", ttl="2s")
    ops_hold = fleet_estop.for_profile("ops").engage(reason="ops", ttl="3s")
    service = DeadmanService(fleet_estop.fleet)
    report = service.tick(clock.now + timedelta(seconds=3))
    assert sorted(r.location.scope for r in report.retired) == ["fleet", "ops"]
    assert sorted(_expires(fleet_estop)) == sorted([root_hold.generation, ops_hold.generation])


def test_a_rearm_before_the_deadman_is_never_retired(fleet_estop, clock):
    fleet_estop.engage(reason="first", ttl="2s")
    clock.advance(seconds=1.9)
    again = fleet_estop.engage(reason="still going", ttl="1h")
    report = DeadmanService(fleet_estop.fleet).tick(clock.now + timedelta(seconds=0.1))
    assert report.retired == [] and _expires(fleet_estop) == []
    standing = fleet_estop.fleet.read((fleet_estop.layout.fleet,)).readings[0]
    assert standing.state is HoldState.ACTIVE and standing.hold.generation == again.generation


def test_a_rearm_between_the_expiry_read_and_the_retire_survives(fleet_estop, clock, monkeypatch):
    first = fleet_estop.engage(reason="first", ttl="2s")
    fleet = fleet_estop.fleet
    real_read = fleet.read
    landed: list[Any] = []

    def read_then_rearm(*args, **kwargs):
        found = real_read(*args, **kwargs)
        if not landed:  # the operator's re-arm lands right after the daemon read the expiry
            landed.append(fleet_estop.engage(reason="operator", ttl="1h", replace=True))
        return found

    clock.advance(seconds=2)
    monkeypatch.setattr(fleet, "read", read_then_rearm)
    report = DeadmanService(fleet).tick()
    assert report.retired == []
    monkeypatch.undo()
    standing = fleet.read((fleet_estop.layout.fleet,)).readings[0]
    assert standing.state is HoldState.ACTIVE and standing.hold.generation == landed[0].generation
    # the re-arm itself recorded the lapsed hold's expiry (the store does, for a body it replaces);
    # the daemon's fenced retire added nothing
    assert _expires(fleet_estop) == [first.generation]


def test_the_loop_wakes_at_the_soonest_deadman_within_its_interval(fleet_estop, clock):
    fleet_estop.engage(reason="soon", ttl="3s")
    service = DeadmanService(fleet_estop.fleet, interval=5)
    assert service.interval == 1.0  # never sleeps longer than a second
    report = service.tick(clock.now + timedelta(seconds=2.5))
    assert service.delay(report) == pytest.approx(0.5)
    assert service.delay(service.tick(clock.now)) == pytest.approx(1.0)
