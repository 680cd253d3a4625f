"""`hermes doctor`: a process that claims kanban cards by SQL while a hold stands (an ungated
dispatcher) is flagged with its pid; a clean fleet exits 0 (issue 21)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_estop.consumers.board import Board
from hermes_estop.consumers.kanban import Dispatcher
from hermes_estop.process.estop import Estop
from inprocess_cli import completed

ROGUE = textwrap.dedent("""
    import os, sqlite3, sys
    from datetime import datetime, timezone
    db = sqlite3.connect(sys.argv[1])
    now = datetime.now(timezone.utc).isoformat()
    db.execute("UPDATE cards SET status = 'running', claim = 'rogue', started_at = ?, pid = ? "
               "WHERE status = 'ready'", (now, os.getpid()))
    db.commit()
    print(os.getpid())
""")


def _hermes(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`hermes ARGS` on the fleet of `root`, run in this process (`completed`): the claimers are
    the processes these tests are about; doctor's report and exit code are what they check."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES")}
    env |= {"HERMES_ROOT": str(root), "HERMES_HOME": str(root)}
    return completed(env, *args)


@pytest.fixture
def board(fleet_root: Path) -> Board:
    board = Board(fleet_root)
    board.add("one", "true", owner="alice", ready=True)
    board.add("two", "true", owner="bob", ready=True)
    return board


def test_a_clean_fleet_with_nothing_registered_passes_saying_nothing_is_registered(fleet_root, board):
    Dispatcher(Estop(fleet_root, fleet_root), board).dispatch()  # gated, nothing held: both run and finish
    assert {card.status for card in board.cards()} == {"done"}
    Estop(fleet_root, fleet_root).engage(fleet=True)  # what `hermes pause --fleet` arms
    done = _hermes(fleet_root, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing is registered" in done.stdout and "`--wait` has nobody to wait for" in done.stdout
    assert "no problem found" not in done.stdout  # issue 38: it is not a clean bill of health
    report = json.loads(_hermes(fleet_root, "doctor", "--json").stdout)
    assert report["registered"] == 0 and report["note"].startswith("nothing is registered")


def test_a_clean_fleet_with_a_registered_consumer_finds_no_problem(fleet_root, board):
    from .test_acknowledged_stop import Fleet

    fleet = Fleet(fleet_root, None)
    try:
        gateway = fleet.start("gateway")
        fleet.until(lambda rows: fleet.row(rows, gateway) is not None)
        done = fleet.hermes("doctor")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "no problem found" in done.stdout and "nothing is registered" not in done.stdout
    finally:
        fleet.stop_all()


def test_an_ungated_dispatcher_claiming_by_sql_during_a_hold_is_flagged_with_its_pid(fleet_root, board):
    Estop(fleet_root, fleet_root).engage(fleet=True, reason="upgrade")  # what `hermes pause --fleet` arms
    rogue = subprocess.run([sys.executable, "-c", ROGUE, str(board.path)], capture_output=True, text=True,
                           check=True, timeout=60)
    pid = int(rogue.stdout)
    done = _hermes(fleet_root, "doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    breaches = [line for line in done.stdout.splitlines() if line.startswith("BREACH: kanban card")]
    assert len(breaches) == 2 and all(f"worker pid {pid}" in line for line in breaches)
    report = json.loads(_hermes(fleet_root, "doctor", "--json").stdout)
    assert {f["kind"] for f in report["findings"]} == {"breach", "unregistered"}
    assert {f["pid"] for f in report["findings"]} == {pid}


def test_work_started_before_the_hold_is_no_breach(fleet_root, board):
    with sqlite3.connect(board.path) as db:
        db.execute("UPDATE cards SET status = 'running', claim = ?, started_at = '2020-01-01T00:00:00+00:00', pid = ? "
                   "WHERE id = 1", (f"{os.getpid()}-x", os.getpid()))
    Estop(fleet_root, fleet_root).engage(fleet=True)  # what `hermes pause --fleet` arms
    report = json.loads(_hermes(fleet_root, "doctor", "--json").stdout)
    assert [f["kind"] for f in report["findings"]] == ["unregistered"]  # claimed outside the registry, not in a hold


ROGUE_CLAIMER = textwrap.dedent("""
    import os, sqlite3, subprocess, sys
    from datetime import datetime, timezone
    db = sqlite3.connect(sys.argv[1])
    worker = subprocess.Popen(["sleep", "600"])
    named = sys.argv[2] == "token"
    claim, pid = (f"{os.getpid()}-rogue", worker.pid) if named else ("rogue", os.getpid())
    db.execute("UPDATE cards SET status = 'running', claim = ?, started_at = ?, pid = ? WHERE status = 'ready'",
               (claim, datetime.now(timezone.utc).isoformat(), pid))
    db.commit()
    print(os.getpid(), flush=True)
    sys.stdin.read()  # lives, with its worker, until its stdin closes
    worker.kill()
""")


def _passes_after(fleet, kanban, instant: str) -> None:
    """Return once the dispatcher `kanban` ran a whole pass after `instant`: a report after it,
    then another (the pass before the second began after the first)."""
    from hermes_estop.model.timeutil import parse_stamp

    after = parse_stamp(instant)
    first = fleet.until(lambda rows: parse_stamp(fleet.row(rows, kanban)["last_report"]) > after)
    seen = parse_stamp(fleet.row(first, kanban)["last_report"])
    fleet.until(lambda rows: parse_stamp(fleet.row(rows, kanban)["last_report"]) > seen)


@pytest.mark.parametrize("form", ["token", "bare"])
def test_the_registered_dispatcher_never_fails_a_living_rogue_claim_and_doctor_names_the_claimer(tmp_path, form):
    from .test_acknowledged_stop import Fleet

    root = tmp_path / "fleet"
    root.mkdir()
    fleet = Fleet(root, None)
    rogue = None
    board = Board(root)
    card = board.add("migrate", "true", owner="alice")  # the board exists: `hermes serve` dispatches it
    try:
        kanban = fleet.procs["serve"] = subprocess.Popen(
            [sys.executable, "-m", "hermes_estop", "serve", "--kanban-interval", "0.2"], env=fleet.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fleet.until(lambda rows: (fleet.row(rows, kanban) or {}).get("component") == "kanban")
        paused = fleet.hermes("pause", "--fleet", "--reason", "upgrade", "--wait", "--wait-timeout", "60s")
        assert paused.returncode == 0, paused.stdout + paused.stderr
        board.mark_ready(card.id)
        rogue = subprocess.Popen([sys.executable, "-c", ROGUE_CLAIMER, str(board.path), form], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        pid = int(rogue.stdout.readline())
        claimed = board.get(card.id)
        assert claimed.status == "running"
        _passes_after(fleet, kanban, claimed.started_at.isoformat())
        kept = board.get(card.id)
        assert (kept.status, kept.claim, kept.detail) == ("running", claimed.claim, None)
        done = fleet.hermes("doctor", "--json")
        assert done.returncode == 1, done.stdout + done.stderr
        findings = json.loads(done.stdout)["findings"]
        assert {(f["kind"], f["pid"]) for f in findings} == {("breach", pid), ("unregistered", pid)}, findings
        text = fleet.hermes("doctor").stdout
        assert f"pid {pid}" in next(line for line in text.splitlines() if line.startswith("BREACH: kanban card"))
        assert "claimant not recorded" not in text
    finally:
        if rogue is not None:
            rogue.stdin.close()
            rogue.wait(60)
        fleet.stop_all()
