"""Which clock decides an expiry (issue 32 item 8; docs/design.md "Which clock decides an expiry").

A process decides for itself with its own clock (a reader past the deadline proceeds), never for
the fleet: gate() and every read leave the hold where it is, and a retire checks the deadline
against the clock the store trusts (PostgreSQL: the server's; files: the wall clock as the
monotonic clock confirms it). Real clocks here, on both stores, and `hermes check` in a process
of its own.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.fleet.deadman import DeadmanService
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import EngageRequest
from hermes_estop.model.timeutil import WallClockGuard, format_instant, utc_now
from hermes_estop.process.estop import Estop
from hermes_estop.stores import FileStore

SRC = str(Path(__file__).resolve().parents[2] / "src")
AHEAD = timedelta(hours=2)


def ahead_clock() -> datetime:
    """A consumer's documented `Estop(clock=...)` two hours ahead (or a host whose clock jumped)."""
    return utc_now() + AHEAD


def hermes_check(backend, fleet_root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(fleet_root), HERMES_ROOT=str(fleet_root), HERMES_ESTOP_STORE=backend.spec(fleet_root),
               PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "hermes_estop", "check"], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def operator(store, root_layout) -> Estop:
    """The operator's process on the store's own clock, which arms a one-hour hold."""
    estop = Estop(layout=root_layout, store=store, actor="operator@host")
    estop.engage(reason="maintenance", ttl="1h", fleet=True)
    return estop


@pytest.mark.parametrize("read", ["gate", "is_engaged", "get_state", "paused_reply", "holds", "check_paused"])
def test_a_reader_whose_clock_runs_ahead_never_frees_the_fleet(backend, store, root_layout, fleet_root, operator, read):
    skewed = Estop(layout=root_layout, store=store, clock=ahead_clock, actor="skewed@host")
    answer = getattr(skewed, read)(*(["cron"] if read == "check_paused" else []))
    assert answer in (False, None, ()) or getattr(answer, "proceed", False)  # it decides for itself: free
    assert backend.present(store, root_layout.own)
    assert operator.is_engaged()
    checked = hermes_check(backend, fleet_root)
    assert checked.returncode == 1, (checked.stdout, checked.stderr)  # held, in another process
    assert "expire" not in [event.event for event in operator.history()]


def test_a_deadman_whose_clock_runs_ahead_retires_nothing(backend, store, root_layout, fleet_root, operator, caplog):
    skewed = Fleet(store, fleet_root, clock=ahead_clock, actor="skewed-daemon")
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        report = DeadmanService(skewed).tick()
    assert report.retired == []
    assert backend.present(store, root_layout.own) and operator.is_engaged()
    assert "expire" not in [event.event for event in operator.history()]
    assert any("not retiring" in record.getMessage() for record in caplog.records)


def test_an_expire_line_is_never_stamped_by_a_clock_that_runs_ahead(backend, store, root_layout, fleet_root):
    deadline = utc_now() - timedelta(seconds=1)
    store.engage(root_layout.own, EngageRequest(reason="lapsed", expires_at=deadline), deadline - timedelta(hours=1),
                 "setup")
    skewed = Fleet(store, fleet_root, clock=ahead_clock, actor="skewed-daemon")
    assert len(skewed.retire_expired()) == 1
    after = utc_now()
    (line,) = [event for event in skewed.history()[0] if event.event == "expire"]
    assert deadline <= line.time <= after + timedelta(seconds=5)  # slack: the server's clock is not ours


def test_the_file_store_refuses_to_retire_across_a_wall_clock_jump_the_monotonic_clock_does_not_confirm(
        fleet_root, root_layout, clock, caplog):
    start = clock.now
    ticks = {"wall": start.timestamp(), "monotonic": 1000.0}
    guard = WallClockGuard(wall=lambda: ticks["wall"], monotonic=lambda: ticks["monotonic"])
    store = FileStore(fleet_root, wall_clock=guard)
    fleet = Fleet(store, fleet_root, clock=clock, actor="daemon")
    hold = fleet.engage(root_layout.own, EngageRequest(reason="maintenance", expires_at=start + timedelta(hours=1)))
    # the wall clock jumps two hours ahead in one second of monotonic time
    ticks["wall"] += AHEAD.total_seconds() + 1
    ticks["monotonic"] += 1
    clock.set(start + AHEAD + timedelta(seconds=1))
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        assert fleet.retire_expired() == []
    assert root_layout.own.sentinel.exists()
    assert any("jumped 7200s ahead" in record.getMessage() for record in caplog.records)
    # an hour of monotonic time later the deadline has passed by a clock this process can vouch for
    ticks["wall"] += 3600
    ticks["monotonic"] += 3600
    clock.advance(hours=1)
    assert [r.fence.generation for r in fleet.retire_expired()] == [hold.generation]
    (line,) = [event for event in fleet.history()[0] if event.event == "expire"]
    assert line.time == start + timedelta(hours=1, seconds=1)  # the confirmed time, not the jumped wall clock


@pytest.mark.parametrize(("jump", "trusted_offset"), [(-3600.0, -3600.0), (0.5, 0.5), (7200.0, 0.0)],
                         ids=["back-accepted", "slew-accepted", "ahead-refused"])
def test_the_wall_clock_guard_trusts_only_what_the_monotonic_clock_confirms(jump, trusted_offset):
    ticks = {"wall": 1_000_000.0, "monotonic": 5.0}
    guard = WallClockGuard(wall=lambda: ticks["wall"], monotonic=lambda: ticks["monotonic"])
    ticks["wall"] += 10 + jump
    ticks["monotonic"] += 10
    trusted, ahead = guard.trusted()
    assert trusted == datetime.fromtimestamp(1_000_010.0 + trusted_offset, UTC)
    assert ahead == (jump if trusted_offset != jump else 0.0)


def test_an_expired_hold_stays_on_disk_for_every_reader_until_the_deadman(backend, store, root_layout, fleet_estop,
                                                                           clock):
    fleet_estop.engage(reason="window", ttl="10m")
    clock.advance(minutes=11)
    for _ in range(3):
        assert fleet_estop.gate().proceed
    assert backend.present(store, root_layout.own)
    assert format_instant(clock.now)  # the reader's clock said expired; only the deadman retires
    assert len(fleet_estop.fleet.retire_expired()) == 1
    assert not backend.present(store, root_layout.own)
