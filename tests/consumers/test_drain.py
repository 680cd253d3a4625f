"""`hermes drain` over real subprocess cron jobs and kanban cards: it arms the hold, waits until
nothing is in flight (exit 0), gives up at --timeout (exit 75, listing what runs), stops what runs
with --terminate-after (recorded "terminated by drain"), and never waits for a dead pid. The
in-flight records are what the consumers already claim with."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from hermes_estop.consumers.board import BoardBusy
from hermes_estop.consumers.cron import Claim, CronRunner, CronTable
from hermes_estop.consumers.drainer import wait_until_quiet
from hermes_estop.consumers.gateway import Gateway
from hermes_estop.consumers.inflight import InFlight, in_flight_counts, in_flight_section, survey, terminate
from hermes_estop.consumers.kanban import Board, Dispatcher
from hermes_estop.consumers.turns import pid_alive, read_turns
from hermes_estop.model.timeutil import utc_now
from hermes_estop.system.processes import start_time
from inprocess_cli import completed

from .helpers import finishes

pytestmark = pytest.mark.slow


def _until(path) -> str:
    return f"while [ ! -e {path} ]; do sleep 0.05; done"


@pytest.fixture
def live(estop_for, tmp_path):
    """A cron job and a kanban card of profile p1 running as real subprocesses (until `go`
    exists), started by this process's runner and dispatcher on the real clock."""
    estop = estop_for("p1", real_clock=True)
    go = tmp_path / "go"
    table = CronTable.of(estop)
    table.add("backup", _until(go), now=utc_now() - timedelta(minutes=3), schedule="* * * * *", profile="p1",
              owner="alice")
    board = Board(estop.layout.root)
    card = board.add("reindex", _until(go), profile="p1", owner="bob", ready=True)
    runner, dispatcher = CronRunner(estop), Dispatcher(estop)
    assert runner.tick(wait=False).started == ("backup",)
    assert dispatcher.tick().spawned == (card.id,)
    yield estop, table, board, card, go
    go.touch()
    runner.drain(timeout=30)
    dispatcher.drain(timeout=30)


def _drain(python, env, *args):
    return subprocess.Popen([python, "-m", "hermes_estop", "drain", "--json", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_consumers_record_their_work_in_flight_where_they_claim_it(live):
    estop, table, board, card, _ = live
    job = table.get("backup")
    assert job.claim.worker and pid_alive(job.claim.worker)
    assert board.get(card.id).pid and pid_alive(board.get(card.id).pid)
    assert in_flight_counts(estop) == {"cron": 1, "kanban": 1, "gateway": 0}
    names = {(item.kind, item.name, item.owner) for item in survey(estop).items}
    assert names == {("job", "backup", "alice"), ("card", f"#{card.id}", "bob")}


def test_drain_arms_the_hold_and_exits_0_once_the_running_work_has_ended(live, python, subprocess_env):
    estop, _, _, _, go = live
    proc = _drain(python, subprocess_env, "--timeout", "5m", "--reason", "upgrade")
    finishes(lambda: _wait(lambda: estop.is_engaged()))
    assert proc.poll() is None, proc.communicate()
    go.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    state = json.loads(out)
    assert (state["quiet"], state["in_flight"], state["terminated"]) == (True, [], [])
    assert estop.holds()[0].hold.reason == "upgrade"


def test_drain_exits_75_at_the_timeout_listing_what_still_runs(live, python, subprocess_env):
    _, _, _, card, _ = live
    proc = _drain(python, subprocess_env, "--timeout", "1s")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 75
    state = json.loads(out)
    assert state["timed_out"] and state["counts"] == {"cron": 1, "kanban": 1, "gateway": 0}
    assert sorted(item["name"] for item in state["in_flight"]) == sorted(["backup", f"#{card.id}"])
    text = subprocess.run([python, "-m", "hermes_estop", "drain", "--timeout", "1s"], env=subprocess_env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert text.returncode == 75 and "backup" in text.stderr and f"#{card.id}" in text.stderr


def test_terminate_after_stops_the_workers_by_process_group_and_records_them_failed(live, python, subprocess_env):
    _, table, board, card, _ = live
    groups = [table.get("backup").claim.worker, board.get(card.id).pid]
    proc = _drain(python, subprocess_env, "--timeout", "2m", "--terminate-after", "1s")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(json.loads(out)["terminated"]) == 2
    job = table.get("backup")
    assert job.claim is None and (job.last.status, job.last.detail) == ("failed", "terminated by drain")
    stopped = board.get(card.id)
    assert (stopped.status, stopped.detail) == ("failed", "terminated by drain")
    for group in groups:
        finishes(lambda group=group: _wait(lambda: not _group_alive(group)))


def test_a_dead_pid_never_keeps_a_drain_waiting(estop_for, python, subprocess_env):
    estop = estop_for("p1", real_clock=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    now = utc_now()
    table = CronTable.of(estop)
    table.add("crashed", "true", now=now - timedelta(minutes=3), schedule="* * * * *", profile="p1")
    with table.edit() as jobs:
        jobs[0] = replace(jobs[0], claim=Claim("t", now, now + timedelta(hours=1), dead.pid, dead.pid))
    board = Board(estop.layout.root)
    card = board.add("orphan", "true", profile="p1", ready=True)
    assert board.claim(card.id, "c", now, now + timedelta(hours=1)) and board.note_worker(card.id, "c", dead.pid)
    assert survey(estop).items == ()
    proc = _drain(python, subprocess_env, "--timeout", "5m")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


@pytest.fixture
def stranger():
    """A process that leads its own process group, as a recorded worker did, and whose pid a
    record names with a start time an hour older: the worker ended and its pid was reused."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc, start_time(proc.pid) - 3600 * os.sysconf("SC_CLK_TCK")
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("consumer", ["cron", "kanban"])
def test_drain_terminate_after_never_signals_a_stranger_that_reused_a_workers_pid(estop_for, python, subprocess_env,
                                                                                   stranger, consumer):
    estop = estop_for("p1", real_clock=True)
    proc, recorded_start = stranger
    now = utc_now()
    if consumer == "cron":
        table = CronTable.of(estop)
        table.add("old", "true", now=now - timedelta(minutes=3), schedule="* * * * *", profile="p1")
        with table.edit() as jobs:
            jobs[0] = replace(jobs[0], claim=Claim("t", now, now + timedelta(hours=1), proc.pid, proc.pid,
                                                   recorded_start))
    else:
        board = Board(estop.layout.root)
        card = board.add("old", "true", profile="p1", ready=True)
        assert board.claim(card.id, "c", now, now + timedelta(hours=1))
        assert board.note_worker(card.id, "c", proc.pid, recorded_start)
    assert survey(estop).items == ()  # the recorded worker is gone: its pid runs something else
    drain = _drain(python, subprocess_env, "--timeout", "1m", "--terminate-after", "1s")
    out, err = drain.communicate(timeout=120)
    assert (drain.returncode, json.loads(out)["terminated"]) == (0, []), err
    assert proc.poll() is None


def test_terminate_signals_nobody_for_a_record_without_a_start_time(stranger, tmp_path):
    proc, _ = stranger
    legacy = InFlight("kanban", "card", "#1", None, tmp_path, utc_now(), proc.pid, "c", proc.pid, tmp_path)
    assert terminate((legacy,), utc_now(), grace=0) == []
    assert proc.poll() is None


def test_a_gateway_turn_whose_pid_was_reused_is_not_in_flight(tmp_path):
    turns = tmp_path / "gateway"
    turns.mkdir()
    older = start_time(os.getpid()) - 3600 * os.sysconf("SC_CLK_TCK")
    (turns / f"turns-{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "start": older, "turns": {"t1": {"user": "u", "profile": None, "since": None}}}))
    assert read_turns(tmp_path) == []


def test_a_profile_drain_does_not_wait_for_another_profiles_card(live, estop_for):
    assert in_flight_counts(estop_for("p2")) == {"cron": 0, "kanban": 0, "gateway": 0}
    assert in_flight_counts(estop_for(None)) == {"cron": 1, "kanban": 1, "gateway": 0}


def test_a_gateway_turn_in_flight_is_visible_to_another_reader_until_it_ends(p1):
    release, entered = threading.Event(), threading.Event()

    def slow(user, profile, text):
        entered.set()
        release.wait(60)
        return "done"

    gateway = Gateway(p1, respond=slow)
    thread = threading.Thread(target=gateway.handle, args=("bob", "p1", "long question"))
    thread.start()
    finishes(lambda: entered.wait(60))
    [turn] = read_turns(p1.layout.home)
    assert (turn.user, turn.pid) == ("bob", os.getpid())
    assert in_flight_counts(p1)["gateway"] == 1
    release.set()
    thread.join(60)
    assert read_turns(p1.layout.home) == []


def _wait(condition) -> None:
    import time

    while not condition():
        time.sleep(0.02)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):  # a zombie leader of our own: reap it
        os.waitpid(group, os.WNOHANG)
    return pid_alive(group)


def test_the_status_section_counts_the_work_in_flight_per_consumer(live):
    estop = live[0]
    section = in_flight_section(estop)
    assert section["json"]["in_flight"] == {"cron": 1, "kanban": 1, "gateway": 0}
    assert section["lines"] == ["in flight: 1 cron, 1 kanban, 0 gateway"]


def test_a_profile_drain_waits_for_a_job_in_another_table_naming_that_profile(estop_for, tmp_path):
    fleet, p1 = estop_for(None, real_clock=True), estop_for("p1", real_clock=True)
    go = tmp_path / "go"
    CronTable.of(fleet).add("for-p1", _until(go), now=utc_now() - timedelta(minutes=3), schedule="* * * * *",
                            profile="p1")
    runner = CronRunner(fleet)
    assert runner.tick(wait=False).started == ("for-p1",)
    try:
        assert in_flight_counts(p1)["cron"] == 1
        assert in_flight_counts(estop_for("p2"))["cron"] == 0
    finally:
        go.touch()
        runner.drain(timeout=30)
    assert in_flight_counts(p1)["cron"] == 0


def test_terminated_work_keeps_the_drains_reason_when_its_owner_records_the_end_too(estop_for, python,
                                                                                    subprocess_env):
    estop = estop_for("p1", real_clock=True)
    table = CronTable.of(estop)
    table.add("long", "sleep 120", now=utc_now() - timedelta(minutes=3), schedule="* * * * *", profile="p1")
    board = Board(estop.layout.root)
    card = board.add("long", "sleep 120", profile="p1", ready=True)
    owners = [subprocess.Popen([python, "-m", "hermes_estop", *argv], env=subprocess_env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) for argv in (["cron", "tick"], ["kanban", "dispatch"])]
    try:
        finishes(lambda: _wait(lambda: in_flight_counts(estop) == {"cron": 1, "kanban": 1, "gateway": 0}
                               and table.get("long").claim.worker and board.get(card.id).pid), guard=120)
        proc = _drain(python, subprocess_env, "--timeout", "2m", "--terminate-after", "1s")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        for owner in owners:
            owner.wait(timeout=120)  # each records the end of the worker it was waiting for
    finally:
        for owner in owners:
            if owner.poll() is None:
                owner.kill()
    assert (table.get("long").last.status, table.get("long").last.detail) == ("failed", "terminated by drain")
    assert (board.get(card.id).status, board.get(card.id).detail) == ("failed", "terminated by drain")


_HOLD_LOCKED = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def locked_board(estop_for, python):
    """The fleet's board, held by another process in `locking_mode=EXCLUSIVE` until the test ends."""
    estop = estop_for("p1", real_clock=True)
    board = Board(estop.layout.root)
    board.add("t", "true", profile="p1", ready=True)
    holder = subprocess.Popen([python, "-c", _HOLD_LOCKED, str(board.path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    yield estop, board
    holder.stdin.close()
    holder.wait(timeout=60)


def test_a_read_of_a_locked_board_gives_up_and_says_it_is_busy(locked_board):
    _, board = locked_board
    with pytest.raises(BoardBusy, match="is busy: another process holds its lock"):
        board.cards("running")


def test_drain_never_waits_on_a_locked_board_past_its_timeout(locked_board, python, subprocess_env):
    proc = _drain(python, subprocess_env, "--timeout", "1s")
    out, err = proc.communicate(timeout=120)
    state = json.loads(out)
    assert (proc.returncode, state["quiet"]) == (75, False), err
    assert [problem for problem in state["problems"] if "is busy" in problem], state


def test_status_never_waits_on_a_locked_board(locked_board, subprocess_env):
    shown = completed(subprocess_env, "status")  # in this process; the board's lock is another's
    assert shown.returncode == 0, shown.stderr
    assert "in flight: cannot tell: the kanban board" in shown.stdout and "is busy" in shown.stdout, shown.stdout


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_wait_times_out_on_the_injected_clock_and_never_kills_a_ticker(estop_for):
    estop = estop_for("p1", real_clock=True)
    now = utc_now()
    table = CronTable.of(estop)
    table.add("claimed", "true", now=now - timedelta(minutes=3), schedule="* * * * *", profile="p1")
    with table.edit() as jobs:  # claimed by a live ticker (this process) whose worker is not noted yet
        jobs[0] = replace(jobs[0], claim=Claim("t", now, now + timedelta(hours=1), os.getpid()))
    ticks = FakeMonotonic()
    seen = []
    result = wait_until_quiet(estop, fleet=False, timeout=10, terminate_after=1, monotonic=ticks,
                              sleep=ticks.sleep, poll=0.25, on_progress=lambda found, at, waited: seen.append(waited))
    assert not result.quiet and result.waited >= 10 and result.terminated == []
    assert [item.name for item in result.last.items] == ["claimed"]
    assert len(seen) == 40 and table.get("claimed").claim is not None


def test_hermes_status_shows_the_work_in_flight_per_consumer(live, subprocess_env):
    shown = completed(subprocess_env, "status")  # in this process: its output is what is checked
    assert shown.returncode == 0, shown.stderr
    assert "in flight: 1 cron, 1 kanban, 0 gateway" in shown.stdout
    as_json = completed(subprocess_env, "status", "--json")
    assert json.loads(as_json.stdout)["in_flight"] == {"cron": 1, "kanban": 1, "gateway": 0}
