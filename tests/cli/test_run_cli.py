"""Issue 25: `hermes run` with real commands: the hold stands while the job runs and its deadman
moves with the renewals; exit 0 releases it, exit 3 keeps it with a fixed deadman and a reason
naming the exit code; a SIGKILLed `hermes run` lets the fleet wake at the lease's end and not
before; an operator's re-arm during the job is never overwritten nor released, and the operator
is told; SIGTERM reaches the job's process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cli_runner import SRC
from hermes_estop import Estop

pytestmark = pytest.mark.slow

#: the job: records what it sees of the hold (deadline at start and after `pause` seconds, the
#: generation it was given, `hermes check` from inside), then exits with `code`
JOB = r"""
import json, os, subprocess, sys, time
sentinel, out, pause, code = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
def deadline():
    return json.load(open(sentinel))["expires_at"]
first = deadline()
check = subprocess.run([sys.executable, "-m", "hermes_estop", "check", "--user", "ops-42"], capture_output=True, text=True)
time.sleep(pause)
json.dump({"first": first, "later": deadline(), "generation": os.environ.get("HERMES_ESTOP_GENERATION"),
           "check": check.returncode}, open(out, "w"))
sys.exit(code)
"""


class Fleet:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        self.env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root), PYTHONPATH=SRC)
        (root.parent / "job.py").write_text(JOB)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "hermes_estop", *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), env=self.env, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def job(self, pause: float, code: int) -> list[str]:
        return [sys.executable, str(self.root.parent / "job.py"), str(self.root / "ESTOP"), str(self.root.parent / "out.json"),
                str(pause), str(code)]

    def seen(self) -> dict:
        return json.loads((self.root.parent / "out.json").read_text())

    def estop(self) -> Estop:
        return Estop(home=self.root, root=self.root, store="file")


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path / "fleet")


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_hold_stands_while_the_job_runs_renews_and_is_released_on_exit_0(fleet):
    result = fleet.run("run", "--ttl", "3s", "--allow-user", "ops-42", "--", *fleet.job(2.5, 0))
    assert result.returncode == 0, result.stderr
    seen = fleet.seen()
    assert seen["later"] > seen["first"]                 # a renewal moved the deadman forward
    assert seen["generation"] and seen["check"] == 0     # the allowed user works through the hold
    assert not fleet.estop().is_engaged()
    events = [e.event for e in fleet.estop().history()]
    assert events[0] == "engage" and "rearm" in events and events[-1] == "release"
    assert "task-start" in events and "task-end" in events


def test_a_failing_job_keeps_the_hold_with_a_fixed_deadman_and_its_exit_code(fleet):
    result = fleet.run("run", "--ttl", "3s", "--", *fleet.job(0, 3))
    assert result.returncode == 3
    [reading] = fleet.estop().holds()
    assert reading.hold.reason.startswith("maintenance failed: ") and reading.hold.reason.endswith("exited 3")
    left = reading.hold.expires_at - datetime.now(UTC)
    assert timedelta(minutes=55) < left <= timedelta(hours=1)
    assert fleet.seen()["check"] == 1                    # nobody else works through it


def test_on_failure_release_releases_and_keeps_the_exit_code(fleet):
    result = fleet.run("run", "--ttl", "3s", "--on-failure", "release", "--", *fleet.job(0, 3))
    assert result.returncode == 3 and not fleet.estop().is_engaged()


def test_a_sigkilled_hermes_run_lets_the_fleet_wake_at_the_lease_end_not_before(fleet):
    process = fleet.popen("run", "--ttl", "2s", "--", sys.executable, "-c", "import time; time.sleep(60)")
    estop = fleet.estop()
    try:
        _wait_for(lambda: any(e.event == "rearm" for e in estop.history()))  # renewing
        process.kill()
        process.wait(30)
        last = json.loads((fleet.root / "ESTOP").read_text())["expires_at"]
        deadline = datetime.fromisoformat(last)
        freed_at = None
        while freed_at is None:
            snapshot = estop.snapshot()
            if not snapshot.engaged:
                freed_at = snapshot.now
            else:
                assert snapshot.now < deadline + timedelta(seconds=30)
                time.sleep(0.02)
        assert deadline <= freed_at                      # never before the last renewal's deadline
        sentinel = fleet.root / "ESTOP"                  # retired by the read that saw it lift, or
        assert not sentinel.exists() or json.loads(sentinel.read_text())["expires_at"] == last  # not renewed
    finally:
        if process.poll() is None:
            process.kill()
        subprocess.run(["pkill", "-f", "time.sleep\\(60\\)"], check=False)


def test_an_operator_rearm_during_the_job_is_neither_overwritten_nor_released(fleet):
    process = fleet.popen("run", "--ttl", "3s", "--", sys.executable, "-c", "import time; time.sleep(3)")
    estop = fleet.estop()
    _wait_for(lambda: estop.is_engaged())
    theirs = estop.engage(reason="operator: hold on", ttl="2h", replace=True)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0
    [reading] = estop.holds()
    assert reading.hold.generation == theirs.generation and reading.hold.reason == "operator: hold on"
    assert "re-armed the hold" in err and "left as it is" in err


def test_sigterm_reaches_the_job_and_the_hold_follows_the_failure_rule(fleet):
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
              "open(sys.argv[1], 'w').write('up')\n"
              "time.sleep(60)\n")
    marker = fleet.root.parent / "up"
    process = fleet.popen("run", "--ttl", "3s", "--", sys.executable, "-c", script, str(marker))
    _wait_for(marker.exists)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 7
    [reading] = fleet.estop().holds()
    assert reading.hold.reason.endswith("exited 7")


def test_bad_input_is_one_line_and_exit_2_with_nothing_held(fleet):
    for args in (["run", "--ttl", "banana", "--", "true"], ["run", "--on-failure", "explode", "--", "true"],
                 ["run", "--"], ["run", "--fleet", "--profile", "ops", "--", "true"]):
        result = fleet.run(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not fleet.estop().is_engaged()
