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
from hermes_estop.estop import Estop

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
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES")}
    env |= {"HERMES_ROOT": str(root), "HERMES_HOME": str(root)}
    return subprocess.run([sys.executable, "-m", "hermes_estop", *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def board(fleet_root: Path) -> Board:
    board = Board(fleet_root)
    board.add("one", "true", owner="alice", ready=True)
    board.add("two", "true", owner="bob", ready=True)
    return board


def test_a_clean_fleet_passes(fleet_root, board):
    Dispatcher(Estop(fleet_root, fleet_root), board).dispatch()  # gated, nothing held: both run and finish
    assert {card.status for card in board.cards()} == {"done"}
    _hermes(fleet_root, "pause", "--fleet")
    done = _hermes(fleet_root, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no problem found" in done.stdout


def test_an_ungated_dispatcher_claiming_by_sql_during_a_hold_is_flagged_with_its_pid(fleet_root, board):
    assert _hermes(fleet_root, "pause", "--fleet", "--reason", "upgrade").returncode == 0
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
    _hermes(fleet_root, "pause", "--fleet")
    report = json.loads(_hermes(fleet_root, "doctor", "--json").stdout)
    assert [f["kind"] for f in report["findings"]] == ["unregistered"]  # claimed outside the registry, not in a hold
