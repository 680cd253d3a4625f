"""APScheduler gating: wrapped jobs skip while held (counted, logged once per engagement), run
again after the lift, and with catch_up run once (coalesced) when the hold lifts."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from hermes_estop import Allow
from hermes_estop.consumers.scheduling import (
    CATCH_UP_JOB_ID,
    REPORT_JOB_ID,
    Gated,
    gate_scheduler,
    gated,
)

WAIT = 15.0


def wait_for(predicate, timeout=WAIT):
    """Poll `predicate` until true; False after `timeout` seconds (a bound, not an assertion
    on speed)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class Job:
    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls.append((args, kwargs))

    @property
    def count(self):
        with self.lock:
            return len(self.calls)


@pytest.fixture
def scheduler():
    sched = BackgroundScheduler(timezone=UTC)
    yield sched
    if sched.running:
        sched.shutdown(wait=True)


def test_skips_are_counted_and_logged_once_per_engagement(fleet, caplog):
    job = Job()
    wrapped = gated(job, fleet, name="report")
    hold = fleet.engage(reason="maintenance")
    with caplog.at_level(logging.INFO, logger="hermes_estop.scheduling"):
        for _ in range(3):
            assert wrapped() is None
        skipped_logs = [r for r in caplog.records if "skipped while held" in r.getMessage()]
        assert len(skipped_logs) == 1 and "maintenance" in skipped_logs[0].getMessage()
        fleet.release(generation=hold.generation)
        wrapped()
        assert any("3 run(s) were skipped" in r.getMessage() for r in caplog.records)
        fleet.engage(reason="second")
        wrapped()
        wrapped()
    assert (wrapped.skipped, wrapped.runs, job.count) == (5, 1, 1)
    assert len([r for r in caplog.records if "skipped while held" in r.getMessage()]) == 2


def test_an_admitted_principal_runs_through_the_hold(fleet):
    job = Job()
    fleet.engage(allow=Allow.of(["op"], ["p1"]))
    gated(job, fleet, user_id="op", profile="p1")()
    gated(job, fleet, user_id="op", profile="p2")()
    gated(job, fleet)()
    assert job.count == 1


def test_catch_up_runs_the_skipped_run_once_after_the_lift(fleet):
    job = Job()
    wrapped = gated(job, fleet, catch_up=True)
    fleet.engage()
    for n in range(3):
        wrapped(n, key="v")
    assert wrapped.pending and not wrapped.catch_up_now()
    fleet.release()
    assert wrapped.catch_up_now()
    assert not wrapped.catch_up_now()
    assert job.calls == [((2,), {"key": "v"})]


def test_without_catch_up_nothing_is_pending(fleet):
    wrapped = gated(Job(), fleet)
    fleet.engage()
    wrapped()
    fleet.release()
    assert not wrapped.pending and not wrapped.catch_up_now()


def test_a_regular_run_after_the_lift_takes_the_pending_catch_up(fleet):
    job = Job()
    wrapped = gated(job, fleet, catch_up=True)
    fleet.engage()
    wrapped()
    fleet.release()
    wrapped()
    assert not wrapped.catch_up_now()
    assert job.count == 1


def test_gate_scheduler_wraps_existing_and_later_jobs_but_not_its_watcher(fleet, scheduler):
    scheduler.add_job(Job(), "interval", hours=1, id="before")
    own = gated(Job(), fleet, user_id="op")
    scheduler.add_job(own, "interval", hours=1, id="own")
    gate = gate_scheduler(scheduler, fleet, catch_up=True, check_every=3600)
    scheduler.add_job(Job(), "interval", hours=1, id="after")
    scheduler.start(paused=True)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"before", "own", "after", CATCH_UP_JOB_ID, REPORT_JOB_ID}
    assert all(isinstance(jobs[i].func, Gated) for i in ("before", "own", "after"))
    assert jobs["own"].func is own and own.user_id == "op"
    assert not isinstance(jobs[CATCH_UP_JOB_ID].func, Gated)
    assert not isinstance(jobs[REPORT_JOB_ID].func, Gated)
    assert set(gate.jobs) == {"before", "own", "after"}


@pytest.mark.slow
def test_a_wrapped_interval_job_does_not_run_while_held_and_runs_again_after_the_lift(estop_for, scheduler):
    estop = estop_for(None, real_clock=True)
    job = Job()
    scheduler.add_job(job, "interval", seconds=0.05, id="tick")
    gate = gate_scheduler(scheduler, estop)
    estop.engage(reason="maintenance")
    scheduler.start()
    assert wait_for(lambda: gate.jobs["tick"].skipped >= 3)
    assert job.count == 0
    estop.release()
    assert wait_for(lambda: job.count >= 2)
    estop.engage(reason="again")
    ran = job.count
    skipped = gate.jobs["tick"].skipped
    assert wait_for(lambda: gate.jobs["tick"].skipped >= skipped + 3)
    assert job.count <= ran + 1  # at most one run (max_instances=1) was past its gate at the engage


@pytest.mark.slow
def test_catch_up_with_a_real_scheduler_runs_once_when_the_hold_lifts(estop_for, scheduler):
    estop = estop_for(None, real_clock=True)
    job = Job()
    scheduler.add_job(job, "interval", hours=1, id="hourly", next_run_time=datetime.now(UTC))
    gate = gate_scheduler(scheduler, estop, catch_up=True, check_every=0.05)
    estop.engage(reason="maintenance")
    scheduler.start()
    assert wait_for(lambda: gate.jobs["hourly"].skipped == 1)
    checks = gate.checks
    assert wait_for(lambda: gate.checks >= checks + 3)
    assert job.count == 0
    estop.release()
    assert wait_for(lambda: job.count == 1)
    checks = gate.checks
    assert wait_for(lambda: gate.checks >= checks + 5)
    assert job.count == 1
    assert gate.jobs["hourly"].catch_ups == 1
