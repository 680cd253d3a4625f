"""`hermes pause --wait` / `resume --wait` with real consumer processes on both stores: a cron
ticker, a kanban dispatcher, a gateway and an APScheduler adapter, each its own subprocess
(issue 21); the commands run in this process. No timing assertions: the waits have generous timeouts, the outcomes are exit codes
and the registry's states."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.fleet.registry.roster import read_roster
from inprocess_cli import completed
from pg_helpers import pg_server, pg_url  # noqa: F401

HERE = Path(__file__).parent
KINDS = ("cron", "kanban", "gateway", "apscheduler")
#: a hang guard, far above what a loaded machine needs; never a timing assertion
GUARD = 60.0


class Fleet:
    def __init__(self, root: Path, store: str | None) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES")}
        self.env |= {"HERMES_ROOT": str(root), "HERMES_HOME": str(root)}
        if store is not None:
            self.env["HERMES_ESTOP_STORE"] = store
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._estop: Estop | None = None

    def hermes(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`hermes ARGS` with this fleet's environment, run in this process (`completed`): the
        consumers are the processes these tests are about, the command's output and exit code
        are what they check."""
        return completed(self.env, *args)

    def start(self, kind: str, interval: float = 0.2) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, str(HERE / "consumer_process.py"), kind, str(interval)],
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.procs[kind] = proc
        return proc

    @property
    def estop(self) -> Estop:
        """This fleet through the library, in this process (for set-up and polling: what the
        commands call, where the command is not what a test tests)."""
        if self._estop is None:
            self._estop = Estop(env=self.env)
        return self._estop

    def consumers(self) -> list[dict]:
        """The registry's rows as `hermes consumers --json` prints them (`read_roster`, what it
        calls), read in this process: the tests poll it, and the command is not what they test."""
        roster = read_roster(self.estop.fleet)
        assert roster.problem is None, roster.problem
        return json.loads(json.dumps(roster.to_json(), default=str))["consumers"]

    def until(self, what: Callable[[list[dict]], bool]) -> list[dict]:
        deadline = time.monotonic() + GUARD
        while True:
            rows = self.consumers()
            if what(rows):
                return rows
            assert time.monotonic() < deadline, f"never happened; registry: {rows}"
            time.sleep(0.2)

    def row(self, rows: list[dict], proc: subprocess.Popen[bytes]) -> dict | None:
        return next((r for r in rows if r["pid"] == proc.pid), None)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._estop is not None:
            self._estop.close()


@pytest.fixture(params=["file", "postgresql"])
def fleet(request, tmp_path: Path) -> Iterator[Fleet]:
    root = tmp_path / "fleet"
    root.mkdir()
    store = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    running = Fleet(root, store)
    if store is not None:
        running.estop.fleet.init_schema()  # what `hermes store init` does
    try:
        yield running
    finally:
        running.stop_all()


def _all_running(fleet: Fleet) -> list[dict]:
    for kind in KINDS:
        fleet.start(kind)
    return fleet.until(lambda rows: sorted(r["component"] for r in rows) == sorted(KINDS))


def test_pause_wait_returns_once_every_consumer_acknowledged_and_resume_wait_and_drain_likewise(fleet):
    _all_running(fleet)
    paused = fleet.hermes("pause", "--reason", "maintenance", "--wait", "--wait-timeout", "60s")
    assert paused.returncode == 0, paused.stderr
    assert "stopped: 4 of 4 consumers acknowledged" in paused.stdout
    rows = fleet.consumers()
    assert all(r["acknowledged"] and r["verdict"] == "held" for r in rows), rows
    resumed = fleet.hermes("resume", "--wait", "--wait-timeout", "60s")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed: 4 of 4 consumers acknowledged" in resumed.stdout
    assert all(r["acknowledged"] and r["observed"] == [] for r in fleet.consumers())
    drained = fleet.hermes("drain", "--fleet", "--timeout", "60s")
    assert drained.returncode == 0, drained.stderr
    assert "stopped: 4 of 4 consumers acknowledged" in drained.stdout and "drained fleet" in drained.stdout


def test_a_stopped_consumer_is_stalled_and_fails_the_wait_naming_it(fleet):
    _all_running(fleet)
    frozen = fleet.procs["kanban"]
    os.kill(frozen.pid, signal.SIGSTOP)
    rows = fleet.until(lambda rows: (fleet.row(rows, frozen) or {}).get("state") == "stalled")
    assert {r["state"] for r in rows if r["pid"] != frozen.pid} == {"live"}
    paused = fleet.hermes("pause", "--wait", "--wait-timeout", "3s")
    assert paused.returncode == 75, paused.stdout + paused.stderr
    assert "not acknowledged: kanban@" in paused.stderr and f"pid {frozen.pid}" in paused.stderr
    assert "3 of 4 consumers acknowledged" in paused.stderr
    os.kill(frozen.pid, signal.SIGCONT)


def test_a_killed_consumer_is_lost_and_listed_not_waited_for(fleet):
    _all_running(fleet)
    gone = fleet.procs["cron"]
    gone.kill()
    gone.wait()
    rows = fleet.until(lambda rows: (fleet.row(rows, gone) or {}).get("state") == "lost")
    assert fleet.row(rows, gone)["component"] == "cron"
    paused = fleet.hermes("pause", "--wait", "--wait-timeout", "60s")
    assert paused.returncode == 0, paused.stderr
    assert "stopped: 3 of 3 consumers acknowledged" in paused.stdout
    assert "1 lost (not waited for): cron@" in paused.stdout and f"pid {gone.pid}" in paused.stdout
    status = fleet.hermes("status")
    assert "acknowledged by 3 of 3 consumers; 1 lost: cron@" in status.stdout


def test_a_consumer_that_stops_deregisters(fleet):
    proc = fleet.start("gateway")
    fleet.until(lambda rows: fleet.row(rows, proc) is not None)
    proc.terminate()
    assert proc.wait(GUARD) == 0
    assert fleet.consumers() == []


def _frozen(fleet: Fleet, kind: str) -> subprocess.Popen[bytes]:
    """`kind`'s consumer SIGSTOPped and seen stalled: a wait that owes it times out."""
    frozen = fleet.procs[kind]
    os.kill(frozen.pid, signal.SIGSTOP)
    fleet.until(lambda rows: (fleet.row(rows, frozen) or {}).get("state") == "stalled")
    return frozen


def test_a_scoped_hold_is_owed_only_by_the_consumers_it_covers_on_pause_and_resume(fleet):
    _all_running(fleet)
    frozen = _frozen(fleet, "gateway")  # the hold does not cover it: it must not be waited for
    paused = fleet.hermes("pause", "--only", "kanban", "--wait", "--wait-timeout", "60s", "--json")
    assert paused.returncode == 0, paused.stdout + paused.stderr
    acked = json.loads(paused.stdout)["acknowledgement"]
    assert acked["covers"] == "kanban" and [r["component"] for r in acked["owed"]] == ["kanban"]
    assert sorted(r["component"] for r in acked["not_owed"]) == ["apscheduler", "cron", "gateway"]
    hold_id = json.loads(paused.stdout)["hold"]
    resumed = fleet.hermes("resume", "--hold", hold_id, "--wait", "--wait-timeout", "60s")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed: 1 of 1 consumers acknowledged" in resumed.stdout
    assert "owed by the consumers the hold covers (kanban): kanban@" in resumed.stdout
    assert "not owed (the hold does not cover them): " in resumed.stdout and f"pid {frozen.pid}" in resumed.stdout
    os.kill(frozen.pid, signal.SIGCONT)


@pytest.mark.parametrize(("only", "frozen_kind", "owed"), [
    ("kanban", "kanban", 1),  # the one it covers stalls: the wait fails naming it
    ("cron", "gateway", 1),
])
def test_pause_only_wait_names_the_consumers_owed(fleet, only, frozen_kind, owed):
    _all_running(fleet)
    frozen = _frozen(fleet, frozen_kind)
    paused = fleet.hermes("pause", "--only", only, "--wait", "--wait-timeout", "3s" if only == frozen_kind else "60s")
    out = paused.stdout + paused.stderr
    assert f"owed by the consumers the hold covers ({only}): {only}@" in out
    if only == frozen_kind:
        assert paused.returncode == 75, out
        assert f"0 of {owed} consumers acknowledged" in paused.stderr and f"pid {frozen.pid}" in paused.stderr
    else:
        assert paused.returncode == 0, out
        assert f"stopped: {owed} of {owed} consumers acknowledged" in paused.stdout
        assert "not acknowledged" not in out
    os.kill(frozen.pid, signal.SIGCONT)


def test_drain_of_a_full_hold_is_owed_by_every_consumer_and_says_so(fleet):
    _all_running(fleet)
    drained = fleet.hermes("drain", "--fleet", "--timeout", "60s")
    assert drained.returncode == 0, drained.stderr
    assert "owed by the consumers the hold covers (all): apscheduler@" in drained.stdout
    assert "not owed" not in drained.stdout
