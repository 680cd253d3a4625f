"""Benchmark of the impact preview (issue 47 item 6): `hermes windows impact NAME` on a fleet of
10,000 windows (distinct schedules over ten scopes, bench/windows.py's `write_distinct`) and 1,000
cron jobs (100 in each of ten homes: the root and nine profiles, every five minutes, seven owners,
one job in ten naming another profile) with 1,000 ready cards on the board.

Timed as the operator runs it: a real `hermes` process of the installed package, warm (the
window file compiled by a first run, which is timed apart as the cold figure), the fastest of
its rounds, with its peak resident set. Target: <= 0.5 s warm. The in-process figure (the read of
the homes and the pure computation, `observe.impact_preview.window_impact`, no interpreter start)
is reported beside it, and the baseline is `hermes windows next NAME` on the same fleet (the
command's floor: the interpreter, the CLI and the compiled schedule), timed in the same rounds.

Run: `python bench/run.py --only impact` (add `--quick` for fewer rounds).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import Figure
from hermes_estop import Estop
from hermes_estop.consumers.board import Board
from hermes_estop.consumers.crontable import CronJob, CronTable, next_occurrence
from hermes_estop.observe.impact_preview import window_impact, window_occurrence
from hermes_estop.stores import FileStore
from windows import SCOPES, _process, write_distinct

__all__ = ["run"]

WINDOWS = 10_000
JOBS = 1_000
CARDS = 1_000
#: the window asked about: the first of the file (scope fleet, 30 minutes)
NAME = "w000000"
TARGET = 0.5


def build(root: Path, now: datetime) -> None:
    """The fleet: the windows, 100 jobs in each home, the ready cards."""
    write_distinct(root, WINDOWS)
    homes = [root, *(root / "profiles" / scope for scope in SCOPES if scope != "fleet")]
    per_home = JOBS // len(homes)
    for h, home in enumerate(homes):
        template = CronJob("x", "true", "*/5 * * * *", "UTC", None, None, None, timedelta(minutes=10), now,
                           next_occurrence("*/5 * * * *", "UTC", now))
        rows = [replace(template, name=f"job-{h}-{i}", owner=f"op-{i % 7}",
                        profile=SCOPES[(h + 1) % len(SCOPES)] if i % 10 == 0 and SCOPES[(h + 1) % len(SCOPES)] != "fleet"
                        else None) for i in range(per_home)]
        with CronTable(home).edit() as jobs:
            jobs.extend(rows)
    board = Board(root)
    for i in range(CARDS):
        board.add(f"card {i}", "true", owner=f"op-{i % 7}", profile=SCOPES[1 + i % (len(SCOPES) - 1)], ready=True,
                  now=now)


def run(quick: bool) -> list[Figure]:
    rounds = 3 if quick else 7
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        root, cache = tmp / "fleet", tmp / "cache"
        cache.mkdir()
        now = datetime.now(UTC)
        build(root, now)
        args = ["windows", "impact", NAME]
        cold, _ = _process(root, args, cache)
        timed, next_timed = [], []
        for _ in range(rounds):  # interleaved with the baseline: both see the same load
            timed.append(_process(root, args, cache))
            next_timed.append(_process(root, ["windows", "next", NAME], cache))
        warm, peak = min(timed)
        baseline = min(next_timed)[0]
        estop = Estop(home=root, root=root, store=FileStore(root))
        window, occurrence = window_occurrence(estop, NAME, 1, estop.clock())
        assert occurrence is not None
        inproc = []
        found = None
        for _ in range(rounds):
            start = time.perf_counter()
            found = window_impact(estop, window, occurrence, estop.clock())
            inproc.append(time.perf_counter() - start)
        assert found is not None
        detail = {"windows": WINDOWS, "jobs": JOBS, "ready_cards": CARDS, "rounds": rounds, "cold_seconds": round(cold, 3),
                  "peak_rss_mib": round(peak, 1), "all_seconds": [round(t, 3) for t, _ in timed],
                  "in_process_seconds": round(min(inproc), 3), "held_runs": found.impact.held_runs,
                  "ready_cards_waiting": found.impact.cards.waiting}
        return [Figure(f"hermes windows impact, {WINDOWS:,} windows, {JOBS:,} jobs (warm process)", warm, "s",
                       baseline_name=f"hermes windows next {NAME}", baseline=baseline, ratio=warm / baseline,
                       target=f"<= {TARGET} s", met=warm <= TARGET, detail=detail),
                Figure(f"window_impact in process, {WINDOWS:,} windows, {JOBS:,} jobs", min(inproc), "s",
                       detail={"rounds": rounds})]
