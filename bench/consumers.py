"""Benchmarks of the consumers: what the gate adds to a cron tick and a kanban dispatch pass, and
how fast a dispatcher in another process stops spawning once `engage()` returns.

The "no gate" baseline is the same tick over the same table (the same pass over the same board)
with the consumer's gate (`CronRunner.pass_gate`, `Dispatcher.pass_gate`) answering a constant:
the verdict of ONE snapshot taken up front. Both sides do identical downstream work (held: the
notice per refused item; free: claim, next occurrence, write-back) and differ only in what the
gate itself costs. The two sides run in interleaved rounds (ABBA, `harness.compare_rounds`)
with the garbage collector on, as a user runs them; each figure is the median of the per-round
ratios. A control runs the ungated free tick against itself (two identical tables): it reads
1.0x when the method is unbiased. Cron jobs are no-ops (`_NoopPool`: a worker that has finished the moment
it is started), so no process is spawned; the time-to-stop figure spawns real workers.

Run: `python bench/run.py --only consumers` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness import Comparison, Figure, compare_rounds, percentile
from hermes_estop import Estop
from hermes_estop.consumers.cron import CronJob, CronRunner, CronTable
from hermes_estop.consumers.kanban import Board, Dispatcher
from hermes_estop.consumers.passgate import PassGate
from hermes_estop.consumers.worker import WorkerPool, WorkResult
from hermes_estop.model.homes import Layout
from hermes_estop.process.check import Verdict
from hermes_estop.stores import FileStore

__all__ = ["run"]

HERE = Path(__file__).resolve().parent
STOP_DISPATCHER = HERE / "stop_dispatcher.py"
ITEMS = 10_000
OVERHEAD_TARGET = 0.10
CONTROL_TOLERANCE = 0.02


class _NoopPool(WorkerPool):
    """Workers that have finished ("ok") the moment they are started: a job as a no-op."""

    def __init__(self, clock) -> None:
        super().__init__(clock)
        self._done: list[tuple[Hashable, WorkResult]] = []

    def __len__(self) -> int:
        return 0

    def start(self, key: Hashable, command: str, **_: Any) -> Any:  # type: ignore[override]
        now = self.clock()
        self._done.append((key, WorkResult("ok", 0, now, now)))
        return SimpleNamespace(pid=None)  # finished already: no pid to note on the claim

    def reap(self) -> list[tuple[Hashable, WorkResult]]:
        done, self._done = self._done, []
        return done

    def wait_all(self, timeout: float | None = None) -> list[tuple[Hashable, WorkResult]]:
        return self.reap()


class _NoopRunner(CronRunner):
    """The real `CronRunner` (claim, gate, next occurrence, write-back, record) with no-op jobs."""

    def __init__(self, estop: Estop, table: CronTable | None = None) -> None:
        super().__init__(estop, table)
        self.pool = _NoopPool(self.estop.clock)


class _ConstantGate(PassGate):
    """No gate: every item gets the verdict of one snapshot taken up front."""

    def __init__(self, estop: Estop) -> None:
        super().__init__(estop)
        self.verdict = estop.gate()

    def __call__(self, owner: Any, profile: Any, job: Any = None) -> Verdict:
        return self.verdict


class _UngatedRunner(_NoopRunner):
    """The same tick with no gate."""

    def pass_gate(self) -> PassGate:
        return _ConstantGate(self.estop)


class _UngatedDispatcher(Dispatcher):
    """The same pass with no gate."""

    def pass_gate(self) -> PassGate:
        return _ConstantGate(self.fleet)


def _fleet(tmp: Path) -> Layout:
    root = tmp / "fleet"
    (root / "profiles" / "p0").mkdir(parents=True)
    return Layout(home=root / "profiles" / "p0", root=root)


def _fill_table(table: CronTable, count: int, due: datetime) -> None:
    """`count` every-minute jobs, all due at `due`, written in one edit (adding them one by one
    would rewrite the table `count` times)."""
    with table.edit() as jobs:
        jobs[:] = [CronJob(name=f"job-{i}", command="true", schedule="* * * * *", timezone="UTC", at=None,
                           owner=f"user-{i % 50}", profile=None, timeout=timedelta(minutes=10), created_at=due,
                           next_run_at=due) for i in range(count)]


def _overhead(name: str, unit: str, subject, baseline, *, rounds: int, items: int) -> Figure:
    """Gated vs ungated, one pass per run, in interleaved rounds; the garbage collector on (a
    collection lands on either side alike over enough rounds). The heap is collected once
    first so the previous figure's garbage is not charged to this one."""
    gc.collect()
    result = compare_rounds(subject, baseline, calls=1, rounds=rounds)
    overhead = result.ratio - 1.0
    return Figure(name, result.subject * 1e3, unit, f"the same {unit.split('/')[1]}, gate answered by a constant",
                  result.baseline * 1e3, result.ratio, "gate overhead < 10%", overhead < OVERHEAD_TARGET,
                  {"overhead_pct": round(overhead * 100, 1), "items": items, **result.spread()})


def cron_held(tmp: Path, quick: bool) -> Figure:
    layout = _fleet(tmp / "cron-held")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    estop.engage(reason="bench: held", ttl="2h", fleet=True)
    time.sleep(0.2)  # let the body settle so the store's identity cache may serve it
    due = datetime(2030, 1, 1, tzinfo=UTC)
    table = CronTable(tmp / "cron-held-table")
    _fill_table(table, ITEMS, due)
    gated = _NoopRunner(estop, table=table)
    plain = _UngatedRunner(estop, table=table)
    report = gated.tick(due)
    assert len(report.held) == ITEMS and report.executed == 0, report.summary()
    assert len(plain.tick(due).held) == ITEMS
    return _overhead(f"cron tick over {ITEMS:,} jobs while held", "ms/tick", lambda: gated.tick(due),
                     lambda: plain.tick(due), rounds=8 if quick else 64, items=ITEMS)


def _free_ticks(estop: Estop, tmp: Path, items: int, **runners: type[_NoopRunner]) -> list:
    """One tick function per named runner, each over its own table of `items` every-minute jobs:
    every job runs on every tick (each call moves that runner's clock a minute on)."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    ticks = []
    for side, kind in runners.items():
        table = CronTable(tmp / side)
        _fill_table(table, items, start)
        runner, clock = kind(estop, table=table), [start]

        def tick(runner: _NoopRunner = runner, clock: list[datetime] = clock) -> None:
            report = runner.tick(clock[0])
            assert report.executed == items, report.summary()
            clock[0] += timedelta(minutes=1)  # every job is due again

        ticks.append(tick)
    return ticks


def _free_rounds(quick: bool) -> int:
    return 4 if quick else 24


def cron_free(tmp: Path, quick: bool) -> Figure:
    """Every job runs on every tick (a no-op), so a tick also computes each job's next occurrence
    and writes the table back twice (claim, record): seconds per tick at 10,000 jobs, so the
    smoke run uses fewer."""
    items = 1_000 if quick else ITEMS
    layout = _fleet(tmp / "cron-free")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    gated, plain = _free_ticks(estop, tmp, items, **{"cron-free-gated": _NoopRunner, "cron-free-plain": _UngatedRunner})
    return _overhead(f"cron tick over {items:,} jobs while free (no-op jobs)", "ms/tick", gated, plain,
                     rounds=_free_rounds(quick), items=items)


def cron_free_control(tmp: Path, quick: bool) -> Figure:
    """The method's control: the ungated free tick against itself (two identical tables, the
    same rounds as `cron_free`). It reads 1.0x unless the interleaving favours a side."""
    items = 1_000 if quick else ITEMS
    layout = _fleet(tmp / "cron-control")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    first, second = _free_ticks(estop, tmp, items, **{"cron-control-a": _UngatedRunner, "cron-control-b": _UngatedRunner})
    gc.collect()
    result: Comparison = compare_rounds(first, second, calls=1, rounds=_free_rounds(quick))
    spread = result.spread()
    within = abs(result.ratio - 1) <= CONTROL_TOLERANCE or spread["ratio_p25"] <= 1.0 <= spread["ratio_p75"]
    return Figure(f"control: ungated cron tick over {items:,} jobs while free, against itself", result.subject * 1e3,
                  "ms/tick", "the same tick on an identical table", result.baseline * 1e3, result.ratio,
                  "1.0x within noise (within 2%, or 1.0 between the rounds' quartiles)", within,
                  {"items": items, **spread})


def _fill_board(board: Board, count: int) -> None:
    """`count` ready cards: the first through `Board.add` (which creates the schema), the rest in
    one transaction (`Board.add` opens a connection per card, about 10 ms each here)."""
    board.add("seed", "true", ready=True)
    import sqlite3

    db = sqlite3.connect(board.path, isolation_level=None)
    try:
        stamp = "2030-01-01T00:00:00Z"
        db.execute("BEGIN")
        db.executemany("INSERT INTO cards (title, command, status, owner, created_at, updated_at) "
                       "VALUES (?, 'true', 'ready', ?, ?, ?)",
                       [(f"card {i}", f"user-{i % 50}", stamp, stamp) for i in range(count - 1)])
        db.execute("COMMIT")
    finally:
        db.close()


def kanban_held(tmp: Path, quick: bool) -> Figure:
    layout = _fleet(tmp / "kanban-held")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    estop.engage(reason="bench: held", ttl="2h", fleet=True)
    time.sleep(0.2)
    board = Board(layout.root)
    _fill_board(board, ITEMS)
    gated = Dispatcher(estop, board=board)
    plain = _UngatedDispatcher(estop, board=board)
    now = datetime.now(UTC)
    report = gated.tick(now)
    assert len(report.held) == ITEMS and not report.spawned, report.summary()
    assert len(plain.tick(now).held) == ITEMS
    return _overhead(f"kanban dispatch pass over {ITEMS:,} ready cards while held", "ms/pass",
                     lambda: gated.tick(now), lambda: plain.tick(now), rounds=8 if quick else 64, items=ITEMS)


class _Dispatcher:
    """`bench/stop_dispatcher.py` in its own process: the real `KanbanService` at 10 Hz on the
    board, reporting every pass (monotonic start, end) and every spawn (monotonic time)."""

    def __init__(self, root: Path, interval: float) -> None:
        env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root))
        env.pop("HERMES_ESTOP_STORE", None)
        self.proc = subprocess.Popen([sys.executable, str(STOP_DISPATCHER), str(root), str(interval)],
                                     stdout=subprocess.PIPE, stdin=subprocess.PIPE, env=env, text=True)
        self.passes: list[tuple[float, float, int]] = []
        self.spawns: list[float] = []
        self._lock = threading.Lock()
        self._ready: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._ready.get(timeout=60)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                if event["kind"] == "pass":
                    self.passes.append((event["t0"], event["t1"], event["spawned"]))
                elif event["kind"] == "spawn":
                    self.spawns.append(event["t"])
                else:
                    self._ready.put(event)

    def view(self) -> tuple[list[tuple[float, float, int]], list[float]]:
        with self._lock:
            return list(self.passes), list(self.spawns)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the script stops its service when stdin closes
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def time_to_stop(tmp: Path, quick: bool) -> Figure:
    interval = 0.1
    root = tmp / "stop-fleet"
    root.mkdir()
    estop = Estop(layout=Layout(home=root, root=root), store=FileStore(root))
    board = Board(root)
    _fill_board(board, 200)
    dispatcher = _Dispatcher(root, interval)
    trials = 8 if quick else 40
    delays: list[float] = []  # engage() returned -> last spawn after it (0 when none)
    settled: list[float] = []  # engage() returned -> end of the first pass that started after it
    late_spawns = 0  # spawns in a pass that started after engage() returned
    rng = random.Random(6)
    try:
        for _ in range(trials):
            estop.release(fleet=True)
            deadline = time.monotonic() + 10
            count = len(dispatcher.view()[1])
            while len(dispatcher.view()[1]) == count and time.monotonic() < deadline:
                time.sleep(0.01)  # spawning again
            time.sleep(0.2 + rng.random() * interval)  # engage at a random phase of the loop
            estop.engage(reason="bench: stop", fleet=True)
            returned = time.monotonic()
            time.sleep(5 * interval)
            passes, spawns = dispatcher.view()
            after = [spawn for spawn in spawns if spawn >= returned]
            delays.append(max(after) - returned if after else 0.0)
            following = [p for p in passes if p[0] >= returned]
            if not following:
                raise RuntimeError("the dispatcher made no pass after engage() returned")
            first = following[0]
            settled.append(first[1] - returned)
            late_spawns += sum(1 for spawn in spawns if spawn >= first[0])
            for card in board.cards("done") + board.cards("failed"):
                board.mark_ready(card.id)  # keep cards ready for the next trial
        passes, spawns = dispatcher.view()
    finally:
        dispatcher.close()
        estop.release(fleet=True)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(passes)]
    worst = max(delays)
    return Figure("time to stop: engage() returns -> last new spawn (dispatcher at 10 Hz, other process)",
                  worst * 1e3, "ms (max)", "loop interval", interval * 1e3, worst / interval,
                  "no spawn after the first pass that follows engage()", late_spawns == 0,
                  {"trials": trials, "max_delay_ms": round(worst * 1e3, 2),
                   "trials_with_spawn_after_return": sum(1 for d in delays if d > 0),
                   "spawns_in_passes_started_after_return": late_spawns,
                   "first_following_pass_done_ms_p50": round(percentile(settled, 50) * 1e3, 2),
                   "first_following_pass_done_ms_max": round(max(settled) * 1e3, 2),
                   "measured_interval_ms_p50": round(statistics.median(gaps) * 1e3, 2) if gaps else None,
                   "passes": len(passes), "spawns": len(spawns)})


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        return [cron_held(tmp, quick), cron_free(tmp, quick), cron_free_control(tmp, quick), kanban_held(tmp, quick),
                time_to_stop(tmp, quick)]
