"""Issue 25: `hermes run` with real commands: the hold stands while the job runs and its deadman
moves with the renewals; exit 0 releases it, exit 3 keeps it with a fixed deadman and a reason
naming the exit code; a SIGKILLed `hermes run` lets the fleet wake at the lease's end and not
before; an operator's re-arm during the job is never overwritten nor released, and the operator
is told; SIGTERM reaches the job's process group.

Issue 32 items 1-3: the job never runs without its hold (a SIGKILLed runner takes its job's
whole process group down; what the job left running is stopped at its end, named); a stopped
runner whose lease lapsed never re-arms over an operator's resume; the renewer is stopped and
joined before the final write."""

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
from hermes_estop.fleet.fleet import Fleet as HoldFleet
from hermes_estop.fleet.lease import Lease
from hermes_estop.stores.file import LOCK_NAME

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
            process.wait(30)


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


# -- issue 32: a maintenance job never outlives its hold --------------------------------------


def _alive(pid: int) -> bool:
    """`pid` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _kill_left(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


#: jobs that write the pids of every process they run (one a line) to argv[1] and then run long
KILLED_JOBS = {
    "the-command-itself": ["sh", "-c", 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300', "job"],
    "a-child-of-the-command": ["sh", "-c", 'sleep 300 & echo $$ $! > "$1.tmp"; mv "$1.tmp" "$1"; wait', "job"],
}


@pytest.mark.parametrize("job", list(KILLED_JOBS.values()), ids=list(KILLED_JOBS))
def test_a_killed_runner_takes_its_job_down(fleet, job):
    pidfile = fleet.root.parent / "pids"
    process = fleet.popen("run", "--fleet", "--ttl", "120s", "--", *job, str(pidfile))
    pids: list[int] = []
    try:
        _wait_for(pidfile.exists)
        pids = [int(word) for word in pidfile.read_text().split()]
        assert all(_alive(pid) for pid in pids)
        process.kill()
        process.wait(30)
        _wait_for(lambda: not any(_alive(pid) for pid in pids))
        assert fleet.estop().is_engaged()       # the job went down while its hold stood
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        _kill_left(pids)


def test_what_the_job_left_running_is_stopped_at_its_end_and_named(fleet):
    pidfile = fleet.root.parent / "background"
    # the job exits once its background child runs `sleep` (before its exec it is a copy of sh)
    job = 'sleep 300 & echo $! > "$1"; until grep -qx sleep /proc/$!/comm; do :; done; exit 0'
    result = fleet.run("run", "--fleet", "--ttl", "30s", "--", "sh", "-c", job, "job", str(pidfile))
    background = int(pidfile.read_text())
    try:
        assert result.returncode == 0, result.stderr
        assert not _alive(background)
        [line] = [line for line in result.stderr.splitlines() if "left running" in line]
        assert f"pid {background} (sleep 300)" in line
        assert not fleet.estop().is_engaged()
    finally:
        _kill_left([background])


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0]


def _stop_outside_a_write(process: subprocess.Popen, root: Path) -> None:
    """SIGSTOP the runner, at a moment it holds no write lock (an operator's resume would wait
    for a lock held by a stopped process: a real but different problem)."""
    import fcntl

    while True:
        os.kill(process.pid, signal.SIGSTOP)
        _wait_for(lambda: _state(process.pid) == b"T")
        with open(root / LOCK_NAME, "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.kill(process.pid, signal.SIGCONT)
                time.sleep(0.05)
                continue
            fcntl.flock(lock, fcntl.LOCK_UN)
            return


class Lines:
    """The lines of a runner's stderr, read as they come."""

    def __init__(self, stream) -> None:
        import queue
        import threading

        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def first_with(self, text: str) -> str:
        while True:
            line = self.lines.get(timeout=60)
            if text in line:
                return line


@pytest.mark.parametrize("operator_resumes", [True, False], ids=["operator-resumed", "nobody-acted"])
def test_a_stopped_runner_never_rearms_over_an_operators_resume(fleet, operator_resumes):
    go_on = fleet.root.parent / "go-on"
    wait_for_it = f"import os, time\nwhile not os.path.exists({str(go_on)!r}): time.sleep(0.05)\n"
    process = fleet.popen("run", "--fleet", "--ttl", "2s", "--", sys.executable, "-c", wait_for_it)
    estop = fleet.estop()
    try:
        lines = Lines(process.stderr)
        lines.first_with("held fleet")
        _stop_outside_a_write(process, fleet.root)
        deadline = datetime.fromisoformat(json.loads((fleet.root / "ESTOP").read_text())["expires_at"])
        if operator_resumes:
            estop.release(fleet=True)
        while datetime.now(UTC) <= deadline + timedelta(seconds=0.5):  # the lease lapses while stopped
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGCONT)
        line = lines.first_with("lapsed")
        if operator_resumes:
            assert "not armed again" in line and "released it" in line
            assert not estop.is_engaged()       # the operator's resume stands
        else:
            assert "armed again" in line and "not armed again" not in line
            assert estop.is_engaged()
        go_on.touch()
        assert process.wait(120) == 0
        assert not estop.is_engaged()
    finally:
        go_on.touch()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            process.wait(30)


def test_the_renewer_is_stopped_and_joined_before_the_final_release(tmp_path):
    import fcntl
    import threading

    from hermes_estop.fleet.lease import Renewer

    root = tmp_path / "fleet"
    root.mkdir()
    hold_fleet = HoldFleet.of_files(root, actor="test@host")
    lease = Lease(hold_fleet, hold_fleet.fleet_location, timedelta(seconds=3), reason="maintenance: migrate")
    lease.arm(hold_fleet.clock())
    with open(root / LOCK_NAME, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # a writer stuck inside its write
        renewer = Renewer(lease, hold_fleet.clock)
        time.sleep(2 * lease.renew_every.total_seconds())   # the renewal at 1 s waits on the lock
        stopped = threading.Event()
        threading.Thread(target=lambda: (renewer.stop(), stopped.set()), daemon=True).start()
        generation = lease.state.generation
        assert not stopped.wait(0.5)              # stop waits for the renewal in flight
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert stopped.wait(60)
    assert lease.state.generation != generation   # that renewal landed before stop returned
    assert lease.finish(hold_fleet.clock(), 0, on_failure="hold", failure_ttl=timedelta(hours=1),
                        command="migrate") == "released fleet"
    assert not hold_fleet.read().engaged


def test_the_jobs_output_says_when_renewals_failed_and_when_they_recovered(fleet):
    go_on = fleet.root.parent / "go-on"
    wait_for_it = f"import os, time\nwhile not os.path.exists({str(go_on)!r}): time.sleep(0.05)\n"
    process = fleet.popen("run", "--fleet", "--ttl", "6s", "--", sys.executable, "-c", wait_for_it)
    lock = fleet.root / LOCK_NAME
    try:
        lines = Lines(process.stderr)
        lines.first_with("held fleet")
        lock.unlink()
        lock.mkdir()                         # the store refuses every write at the scope
        failed = lines.first_with("renewal failed")
        lock.rmdir()                         # and it is back
        recovered = lines.first_with("renewals recovered")
        assert "lease at fleet" in failed and "after" in recovered
        go_on.touch()
        assert process.wait(120) == 0
        events = [e.event for e in fleet.estop().history()]
        assert "expire" not in events and events[-1] == "release"
    finally:
        go_on.touch()
        if lock.is_dir():
            lock.rmdir()
        if process.poll() is None:
            process.kill()
            process.wait(30)
