"""Issue 25 with issue 21: `hermes run --wait` runs the job only once every registered consumer
the hold covers acknowledged it (a lease renewed meanwhile still counts: any generation it wrote),
and does not run it (exit 75, hold released) when one never does."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .test_acknowledged_stop import Fleet

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path: Path):
    root = tmp_path / "fleet"
    root.mkdir()
    running = Fleet(root, None)
    try:
        yield running
    finally:
        running.stop_all()


def test_run_wait_runs_the_job_once_every_consumer_acknowledged_across_renewals(fleet):
    fleet.start("kanban", interval=0.5)
    fleet.start("cron", interval=0.5)
    fleet.until(lambda rows: len(rows) == 2)
    marker = fleet.root / "ran"
    # a 1 s lease renews every 0.33 s: the acknowledgements arrive for renewed generations
    done = fleet.hermes("run", "--ttl", "1s", "--wait", "--wait-timeout", "60s", "--",
                        "sh", "-c", f"touch {marker}")
    assert done.returncode == 0, done.stderr
    assert "stopped: 2 of 2 consumers acknowledged" in done.stderr
    assert "owed by the consumers the hold covers (all): cron@" in done.stderr  # the rule of every --wait
    assert marker.exists()


def test_run_wait_does_not_run_the_job_when_a_consumer_never_acknowledges(fleet):
    fleet.start("kanban", interval=0.2)
    frozen = fleet.procs["kanban"]
    fleet.until(lambda rows: len(rows) == 1)
    os.kill(frozen.pid, signal.SIGSTOP)
    fleet.until(lambda rows: rows[0]["state"] == "stalled")
    marker = fleet.root / "ran"
    done = fleet.hermes("run", "--wait", "--wait-timeout", "2s", "--", "sh", "-c", f"touch {marker}")
    assert done.returncode == 75, done.stdout + done.stderr
    assert f"pid {frozen.pid}" in done.stderr and "the job did not run" in done.stderr
    assert not marker.exists()
    status = fleet.hermes("check")
    assert status.returncode == 0, status.stdout  # the job's hold was released, not left behind
