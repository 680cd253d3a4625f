"""`hermes demo`: the whole system on one machine in about ten seconds, with real parts.

A temporary fleet gets a one-shot maintenance window that lets the operator through, two cron
jobs (the operator's maintenance job and a user's report), kanban cards from a user and from the
operator, and a chat gateway. The real services run (window scheduler, cron ticker, kanban
dispatcher) and a timeline is printed: the window arms, the user's work holds, the operator's
maintenance work runs through the hold, the deadman lifts it, and the held work runs. The demo
then checks that this is what happened and exits 0 only if it did.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_estop.consumers.cron import CronTable
from hermes_estop.consumers.gateway import Gateway
from hermes_estop.consumers.kanban import Board
from hermes_estop.consumers.loops import CronService, KanbanService
from hermes_estop.daemon.supervisor import run_services
from hermes_estop.model.homes import Layout
from hermes_estop.model.timeutil import display_instant, in_interval, utc_now
from hermes_estop.process.estop import Estop
from hermes_estop.windows.model import Window
from hermes_estop.windows.scheduler import WindowService
from hermes_estop.windows.windows_file import WindowsFile

if TYPE_CHECKING:
    from hermes_estop.consumers.cron import CronTable
    from hermes_estop.consumers.kanban import Board

__all__ = ["DemoPlan", "DemoResult", "run_demo"]

OPERATOR = "operator"
USER = "alice"


@dataclass(frozen=True)
class DemoPlan:
    """When things happen, relative to the start."""

    window_at: float = 2.0
    window_for: float = 6.0
    jobs_at: float = 3.0
    tick: float = 0.25
    timeout: float = 25.0


@dataclass
class DemoResult:
    root: Path
    window_start: datetime
    window_end: datetime
    checks: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(ok for _, ok in self.checks)


class _Timeline(logging.Handler):
    """Prints the services' log lines with the time since the demo started."""

    def __init__(self, started: float, say: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.started = started
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.name.startswith("apscheduler"):
            return
        self.say(f"t+{time.monotonic() - self.started:4.1f}s  {message}")


def run_demo(root: Path, plan: DemoPlan = DemoPlan(), say: Callable[[str], None] = print) -> DemoResult:
    started = time.monotonic()
    now = utc_now()
    estop = Estop(layout=Layout(home=root, root=root), actor="demo@hermes")
    window_start = now + timedelta(seconds=plan.window_at)
    window_end = window_start + timedelta(seconds=plan.window_for)
    table, board = _set_up(root, plan, now, window_start)
    say(f"hermes demo: a temporary fleet in {root}")
    say(f"  window 'demo-maintenance' from {display_instant(window_start)} for {plan.window_for:g}s "
        f"(the deadman), letting '{OPERATOR}' through")
    say(f"  cron: 'vacuum-db' ({OPERATOR}) and 'nightly-report' ({USER}) due at t+{plan.jobs_at:g}s; "
        f"kanban: one card from {USER} ready now")
    handler = _Timeline(started, say)
    package_log = logging.getLogger("hermes_estop")
    previous_level = package_log.level
    package_log.addHandler(handler)
    package_log.setLevel(logging.INFO)
    stop = threading.Event()
    services = [WindowService(estop.fleet, poll_interval=plan.tick),
                CronService(estop, interval=plan.tick), KanbanService(estop, interval=plan.tick)]
    runner = threading.Thread(target=run_services, args=(services, stop), kwargs={"stop_timeout": 10.0},
                              daemon=True)
    runner.start()
    try:
        _narrate(estop, board, plan, started, say)
        settle = time.monotonic() + plan.timeout  # ends as soon as the held work is done: load only slows it
        while time.monotonic() < settle and not _all_done(table, board):
            time.sleep(plan.tick / 2)
    finally:
        stop.set()
        runner.join(15)
        package_log.removeHandler(handler)
        package_log.setLevel(previous_level)
    return _verify(root, estop, table, board, window_start, window_end)


def _set_up(root: Path, plan: DemoPlan, now: datetime, window_start: datetime) -> tuple[CronTable, Board]:
    """The demo fleet: one window letting the operator through, two cron jobs, one ready card."""
    WindowsFile(root).add(Window.parse({
        "name": "demo-maintenance", "at": window_start, "duration": f"{int(plan.window_for)}s",
        "reason": "demo: database maintenance", "allow": {"user_ids": [OPERATOR]},
    }))
    jobs_at = now + timedelta(seconds=plan.jobs_at)
    table = CronTable(root)
    table.add("vacuum-db", "sleep 0.2; echo vacuumed", now=now, at=jobs_at, owner=OPERATOR)
    table.add("nightly-report", "echo report", now=now, at=jobs_at, owner=USER)
    board = Board(root)
    board.add("summarize inbox", "echo summary", owner=USER, ready=True, now=now)
    return table, board


def _narrate(estop: Estop, board: Board, plan: DemoPlan, started: float, say: Callable[[str], None]) -> None:
    """Watch the gate until the window's hold comes and goes (or the demo times out), saying what
    the gateway answers either side and adding work while held."""
    gateway = Gateway(estop, operators=[OPERATOR])

    def stamp() -> str:
        return f"t+{time.monotonic() - started:4.1f}s"

    seen_held = False
    while time.monotonic() - started < plan.timeout:
        verdict = estop.gate(USER)
        if verdict.engaged and not seen_held:
            seen_held = True
            holders = ", ".join(f"{r.location.describe()} (armed by {r.hold.armed_by})" if r.hold else r.location.describe()
                                for r in verdict.snapshot.active)
            say(f"{stamp()}  HELD by {holders}")
            say(f"{stamp()}  gateway {USER} -> {gateway.handle(USER, None, 'hello').text}")
            say(f"{stamp()}  gateway {OPERATOR} -> {gateway.handle(OPERATOR, None, 'status of the migration?').text}")
            board.add("reindex search", "echo reindexed", owner=USER, ready=True)
            board.add("migrate schema", "sleep 0.2; echo migrated", owner=OPERATOR, ready=True)
            say(f"{stamp()}  kanban: '{USER}' adds 'reindex search'; '{OPERATOR}' adds 'migrate schema'")
        if seen_held and not verdict.engaged:
            say(f"{stamp()}  FREE again: the deadman lifted the hold")
            say(f"{stamp()}  gateway {USER} -> {gateway.handle(USER, None, 'hello again').text}")
            return
        time.sleep(plan.tick / 2)


def _all_done(table: CronTable, board: Board) -> bool:
    return all(job.last is not None for job in table.jobs()) and all(
        card.status in ("done", "failed") for card in board.cards())


def _verify(root: Path, estop: Estop, table: CronTable, board: Board, start: datetime,
            end: datetime) -> DemoResult:
    result = DemoResult(root, start, end)
    events = estop.history()
    armed = [e for e in events if e.event == "engage" and e.actor and e.reason == "demo: database maintenance"]
    result.checks.append(("the window armed a hold at its start", bool(armed) and all(
        not in_interval(e.time, None, start) for e in armed)))
    result.checks.append(("the deadman lifted it at the window's end", not estop.is_engaged()))
    jobs = {job.name: job for job in table.jobs()}

    def during(when: datetime | None) -> bool:
        return when is not None and in_interval(when, start, end)

    def after(when: datetime | None) -> bool:
        return when is not None and not in_interval(when, None, end)

    vacuum, report = jobs["vacuum-db"].last, jobs["nightly-report"].last
    result.checks.append(("the operator's cron job ran through the hold",
                          vacuum is not None and vacuum.ok and during(vacuum.started_at)))
    result.checks.append(("the user's cron job waited for the lift, then ran once",
                          report is not None and report.ok and after(report.started_at)))
    cards = {card.title: card for card in board.cards()}
    result.checks.append(("the operator's kanban card spawned through the hold",
                          cards["migrate schema"].status == "done" and during(cards["migrate schema"].started_at)))
    result.checks.append(("the user's held kanban card stayed ready, then ran after the lift",
                          cards["reindex search"].status == "done" and after(cards["reindex search"].started_at)))
    return result
