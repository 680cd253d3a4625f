"""cron: a job table per home (`<home>/cron/jobs.json`, see `crontable`) and a tick that runs the
due jobs the gate lets through (docs/design.md §7).

The gate is asked about each job's owner and profile, on every location the job will run under:
the table's home (its `HERMES_HOME`), the profile it names, and the fleet root; deny wins. So a
job in profile A's table naming `--profile B` waits while A is paused, and while B is. A
maintenance job owned by the allowlisted operator runs inside its own window while everyone
else's jobs wait. A held job does not run and its `next_run_at` does not move; once the hold
lifts, a job that missed several occurrences runs once (coalesced) and its next run is the first
occurrence after that moment. A one-shot job (`at`) likewise waits for the lift. A row the tick
cannot use (a bad zone, profile or expression written by hand) is parked: `next_run_at` cleared,
`last` an error naming the value; the other jobs still run.

A tick claims, runs and records: it claims due jobs under the table's lock (a claim stops a
concurrent tick from starting the same job), starts them as subprocesses without holding the
lock, notes each worker's pid on its claim, and records each result under the lock again.
Schedules are validated and their occurrences computed by `hermes_estop.model.cronspec`, the one cron
math the windows use too. Instants are stored in UTC.

A job added with `--no-overlap-window` (which needs its own `--timeout`) is also not started when
`Estop.forecast` over `[now, now + timeout)` says it would be held at some instant (a window, its
drain lead included, starting before the run could end): held like a gated job, `next_run_at`
unmoved, the notice naming the window; logged once per deciding window occurrence (issue 11).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from hermes_estop.consumers.crontable import (
    CLAIM_GRACE,
    TABLE_DIR,
    TABLE_NAME,
    Claim,
    CronJob,
    CronTable,
    DuplicateJob,
    UnknownJob,
    next_occurrence,
)
from hermes_estop.consumers.pass_report import Held, PassReport, RecordedRun
from hermes_estop.consumers.passgate import PassGate, work_views
from hermes_estop.consumers.worker import WorkerPool, WorkResult, worker_env
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import child_environment
from hermes_estop.process.forecast import Forecast, forecast_views

__all__ = [
    "TABLE_DIR",
    "TABLE_NAME",
    "Claim",
    "CronJob",
    "CronReport",
    "CronRunner",
    "CronTable",
    "DuplicateJob",
    "UnknownJob",
    "next_occurrence",
]

logger = logging.getLogger("hermes_estop.cron")
#: what this consumer gates as, for scoped holds (`hermes pause --only cron`)
COMPONENT = "cron"


def overlap_notice(forecast: Forecast) -> str | None:
    """Why a `--no-overlap-window` run is not started: the first instant of its
    `[now, now + timeout)` that would be held, and the hold or window occurrence holding it
    then; None when the forecast is clear."""
    if not forecast.intervals:
        return None
    first = forecast.intervals[0]
    by = "; ".join(hold.describe() for hold in first.holds[:3])
    more = f" (and {len(first.holds) - 3} more)" if len(first.holds) > 3 else ""
    return printable(f"not started (--no-overlap-window): it would be held from {display_instant(first.start)}, "
                     f"before its timeout ends at {display_instant(forecast.end)}, by {by}{more}")


@dataclass(frozen=True)
class CronReport(PassReport):
    """What one tick did. `executed` counts the jobs it started; `failed` the runs it recorded
    that did not succeed (parked rows among them); `held` the due jobs the gate refused (their
    `next_run_at` unmoved); `busy` the due jobs still running from an earlier tick."""

    noun: ClassVar[str] = "job"
    now: datetime
    started: tuple[str, ...] = ()
    held: tuple[Held, ...] = ()
    busy: tuple[str, ...] = ()
    finished: tuple[RecordedRun, ...] = ()

    @property
    def launched(self) -> tuple[Hashable, ...]:
        return self.started

    @property
    def executed(self) -> int:
        return len(self.started)

    def summary(self) -> str:
        return (f"cron tick: {self.executed} executed, {len(self.failed)} failed, {len(self.held)} held"
                + (f", {len(self.busy)} still running" if self.busy else ""))

    def to_json(self) -> dict[str, Any]:
        results = {run.key: run.result for run in self.finished}
        rows: list[dict[str, Any]] = []
        for name in self.started:
            result = results.pop(name, None)
            rows.append({"name": name, "outcome": result.status if result else "started",
                         **({"result": result.to_json()} if result else {})})
        for name, result in results.items():
            rows.append({"name": name, "outcome": result.status, "result": result.to_json()})
        rows += [{"name": held.key, "outcome": "held", "notice": held.notice} for held in self.held]
        rows += [{"name": name, "outcome": "busy"} for name in self.busy]
        return {"now": format_instant(self.now), "executed": self.executed, "failed": len(self.failed),
                "held": len(self.held), "busy": len(self.busy), "jobs": rows}


class CronRunner:
    """Ticks one home's table for one `Estop` (the home's). Keeps the workers it started, so a
    service can tick without waiting for them (`wait=False`) and record them on a later tick."""

    def __init__(self, estop: Estop, table: CronTable | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.estop = estop
        self.table = table if table is not None else CronTable.of(estop)
        self.pool = WorkerPool(estop.clock, monotonic)
        # per --no-overlap-window job, what held it when last logged (logged again when that changes)
        self._overlap_logged: dict[str, Any] = {}

    def pass_gate(self) -> PassGate:
        """The gate one tick decides its due jobs with: `gate(job.owner, job.profile, "cron",
        job.name)` on this home's candidates and the job's profile's; `InvalidArgument` for a bad
        profile name."""
        return PassGate(self.estop, component=COMPONENT)

    def tick(self, now: datetime | None = None, *, wait: bool = True) -> CronReport:
        """Record finished runs, then claim and start every due job the gate admits. With `wait`
        (the CLI), wait for the jobs started and record them too."""
        now = self.estop.clock() if now is None else now
        finished = self._record(self.pool.reap())
        if not self.table.exists():
            return CronReport(now, finished=tuple(finished))
        claimed, held, busy, parked = self._claim(now)
        finished += parked
        self._start(claimed)
        finished += self._record(self.pool.wait_all() if wait else self.pool.reap())
        return CronReport(now, tuple(job.name for job in claimed), tuple(held), tuple(busy), tuple(finished))

    def drain(self, timeout: float | None = None) -> list[RecordedRun]:
        """Wait (up to `timeout` seconds) for the jobs in flight and record them. Jobs still
        running are left running; their claims lapse at their deadline."""
        return self._record(self.pool.wait_all(timeout))

    def _start(self, claimed: list[CronJob]) -> None:
        """Start the claimed jobs' workers, then note each worker's pid on its claim."""
        base_env = child_environment()
        pids: dict[str, tuple[int, int | None]] = {}
        for job in claimed:
            assert job.claim is not None
            worker = self.pool.start(
                (job.name, job.claim.token),
                job.command,
                timeout=job.timeout,
                cwd=self.table.home,
                env=worker_env(base_env, {
                    "HERMES_HOME": str(self.estop.layout.home),
                    "HERMES_ROOT": str(self.estop.layout.root),
                    "HERMES_CRON_JOB": job.name,
                    "HERMES_CRON_OWNER": job.owner,
                }),
                log_path=self.table.log_dir / f"{job.name}.log",
            )
            if worker.pid is not None:
                pids[job.claim.token] = (worker.pid, worker.process_start)
        if pids:
            with self.table.edit() as jobs:
                for i, job in enumerate(jobs):
                    if job.claim is not None and job.claim.token in pids:
                        pid, started = pids[job.claim.token]
                        jobs[i] = replace(job, claim=replace(job.claim, worker=pid, worker_start=started))

    def _claim(self, now: datetime) -> tuple[list[CronJob], list[Held], list[str], list[RecordedRun]]:
        claimed: list[CronJob] = []
        held: list[Held] = []
        busy: list[str] = []
        parked: list[RecordedRun] = []
        gate = self.pass_gate()
        forecasts: dict[tuple[Any, ...], tuple[str, Any] | None] = {}
        with self.table.edit() as jobs:
            for i, job in enumerate(jobs):
                if not job.due(now):
                    continue
                if job.running(now):
                    busy.append(job.name)
                    continue
                try:
                    verdict = gate(job.owner, job.profile, job.name)
                    following = job.following(now) if verdict else None
                    until = now + job.timeout + CLAIM_GRACE
                except (InvalidArgument, OverflowError) as exc:
                    # A hand-edited row (bad zone, profile, expression, timeout) is parked, not
                    # retried each tick.
                    result = WorkResult("error", None, now, now, one_line(exc))
                    jobs[i] = replace(job, next_run_at=None, last=result, claim=None)
                    parked.append(RecordedRun(job.name, result))
                    continue
                if not verdict:
                    held.append(Held(job.name, gate.notice(verdict)))
                    continue
                cut = self._overlap(job, now, forecasts) if job.no_overlap_window else None
                if cut is not None:  # held like a gated job: not run, next_run_at unmoved
                    held.append(Held(job.name, cut))
                    continue
                claim = Claim(uuid.uuid4().hex, now, until, os.getpid())
                jobs[i] = replace(job, claim=claim, next_run_at=following)
                claimed.append(jobs[i])
        return claimed, held, busy, parked

    def _overlap(self, job: CronJob, now: datetime, memo: dict[tuple[Any, ...], tuple[str, Any] | None]) -> str | None:
        """The notice when a run of `job` started at `now` would be held at some instant before
        its timeout ends (issue 11: `--no-overlap-window`), else None. The forecast covers every
        location the job runs under (`work_views`), like its gate; one forecast per (owner,
        profile, timeout) per tick. A forecast that fails (a `windows.toml` that does not
        validate) holds the run: when in doubt, held. Logged once per deciding hold or window
        occurrence (the notice's times move with every tick; what decides does not)."""
        key = (job.owner, job.profile, job.timeout, job.name)
        if key not in memo:
            try:
                forecast = forecast_views(work_views(self.estop, job.profile), now, now + job.timeout,
                                          job.owner, job.profile, component=COMPONENT, job=job.name)
                notice = overlap_notice(forecast)
                memo[key] = None if notice is None else (notice, tuple(
                    (h.source, h.scope, h.occurrence, h.generation) for h in forecast.intervals[0].holds))
            except (EstopError, OSError) as exc:
                problem = one_line(exc)
                memo[key] = (f"not started (--no-overlap-window): its forecast failed: {problem}", problem)
        found = memo[key]
        if found is None:
            self._overlap_logged.pop(job.name, None)
            return None
        notice, decided_by = found
        if self._overlap_logged.get(job.name) != decided_by:
            self._overlap_logged[job.name] = decided_by
            logger.info("cron job %s %s", printable(job.name), notice)
        return notice

    def _record(self, done: list[tuple[Any, WorkResult]]) -> list[RecordedRun]:
        if not done:
            return []
        runs = [RecordedRun(name, result) for (name, _token), result in done]
        tokens = {name: token for (name, token), _ in done}
        results = {run.key: run.result for run in runs}
        with self.table.edit() as jobs:
            for i, job in enumerate(jobs):
                if job.claim is not None and tokens.get(job.name) == job.claim.token:
                    jobs[i] = replace(job, last=results[job.name], claim=None)
        return runs
