"""`hermes serve` runs the cron ticker and the kanban dispatcher beside the window scheduler, all
gated by the same predicate: held while paused, running again after `hermes resume`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from hermes_estop.consumers.cron import CronTable
from hermes_estop.consumers.kanban import Board
from hermes_estop.model.timeutil import utc_now

pytestmark = pytest.mark.slow


def wait_for(condition, timeout: float = 30.0, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def test_serve_holds_and_resumes_cron_and_kanban(hermes, tmp_path):
    root = hermes.home
    root.mkdir(parents=True)
    hermes("pause", "--reason", "maint", "--allow-user", "operator", check=0)
    now = utc_now()
    table = CronTable(root)
    table.add("report", f"touch {tmp_path / 'report-ran'}", now=now, at=now + timedelta(seconds=1), owner="alice")
    table.add("vacuum", f"touch {tmp_path / 'vacuum-ran'}", now=now, at=now + timedelta(seconds=1), owner="operator")
    board = Board(root)
    held_card = board.add("reindex", "true", owner="alice", ready=True)
    lane_card = board.add("migrate", "true", owner="operator", ready=True)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "0.2",
                             "--cron-interval", "0.2", "--kanban-interval", "0.2"],
                            env=hermes.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: (tmp_path / "vacuum-ran").exists()), "the operator's cron job did not run through the hold"
        assert wait_for(lambda: board.get(lane_card.id).status == "done"), "the operator's card did not spawn"
        time.sleep(1.0)
        assert not (tmp_path / "report-ran").exists()
        assert board.get(held_card.id).status == "ready"
        hermes("resume", check=0)
        assert wait_for(lambda: (tmp_path / "report-ran").exists()), "the held cron job did not run after the lift"
        assert wait_for(lambda: board.get(held_card.id).status == "done"), "the held card did not spawn after the lift"
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "cron: started" in output and "kanban: started" in output


def test_serve_logs_a_damaged_board_once_when_it_starts_and_once_when_it_clears(hermes, tmp_path):
    root = hermes.home
    root.mkdir(parents=True)
    board = Board(root)
    board.add("t", "true")
    good = board.path.read_bytes()
    for suffix in ("-wal", "-shm"):
        board.path.with_name(board.path.name + suffix).unlink(missing_ok=True)
    board.path.write_bytes(b"damaged by hand\n" * 200)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "1",
                                 "--kanban-interval", "0.05"], env=hermes.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: "kanban: ticks fail" in log.read_text(), timeout=90), log.read_text()
        time.sleep(1.0)  # many more failing passes at 0.05 s
        board.path.write_bytes(good)
        assert wait_for(lambda: "kanban: recovered" in log.read_text(), timeout=90), log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    output = log.read_text()
    assert proc.returncode == 0, output
    assert output.count("kanban: ticks fail") == 1 and output.count("kanban: recovered") == 1, output
    assert "Traceback" not in output, output
