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
Schedules are validated and their occurrences computed by `hermes_estop.cronspec`, the one cron
math the windows use too. Instants are stored in UTC.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from ..errors import InvalidArgument
from ..estop import Estop
from ..text import one_line
from ..timeutil import format_instant
from .crontable import (
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
from .passgate import PassGate
from .report import Held, PassReport, Run
from .worker import WorkerPool, WorkResult, worker_env

__all__ = [
    "TABLE_DIR",
    "TABLE_NAME",
    "Claim",
    "CronJob",
    "CronReport",
    "CronRunner",
    "CronTable",
    "DuplicateJob",
    "HeldJob",
    "JobRun",
    "UnknownJob",
    "next_occurrence",
]

#: a held job (`.name`, `.notice`) and a recorded run (`.name`, `.result`): the shared shapes
HeldJob = Held
JobRun = Run


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
    finished: tuple[Run, ...] = ()

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

    def pass_gate(self) -> PassGate:
        """The gate one tick decides its due jobs with: `gate(job.owner, job.profile)` on this
        home's candidates and the job's profile's; `InvalidArgument` for a bad profile name."""
        return PassGate(self.estop)

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

    def drain(self, timeout: float | None = None) -> list[Run]:
        """Wait (up to `timeout` seconds) for the jobs in flight and record them. Jobs still
        running are left running; their claims lapse at their deadline."""
        return self._record(self.pool.wait_all(timeout))

    def _start(self, claimed: list[CronJob]) -> None:
        """Start the claimed jobs' workers, then note each worker's pid on its claim."""
        base_env = dict(os.environ)
        pids: dict[str, int] = {}
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
                pids[job.claim.token] = worker.pid
        if pids:
            with self.table.edit() as jobs:
                for i, job in enumerate(jobs):
                    if job.claim is not None and job.claim.token in pids:
                        jobs[i] = replace(job, claim=replace(job.claim, worker=pids[job.claim.token]))

    def _claim(self, now: datetime) -> tuple[list[CronJob], list[Held], list[str], list[Run]]:
        claimed: list[CronJob] = []
        held: list[Held] = []
        busy: list[str] = []
        parked: list[Run] = []
        gate = self.pass_gate()
        with self.table.edit() as jobs:
            for i, job in enumerate(jobs):
                if not job.due(now):
                    continue
                if job.running(now):
                    busy.append(job.name)
                    continue
                try:
                    verdict = gate(job.owner, job.profile)
                    following = job.following(now) if verdict else None
                    until = now + job.timeout + CLAIM_GRACE
                except (InvalidArgument, OverflowError) as exc:
                    # A hand-edited row (bad zone, profile, expression, timeout) is parked, not
                    # retried each tick.
                    result = WorkResult("error", None, now, now, one_line(exc))
                    jobs[i] = replace(job, next_run_at=None, last=result, claim=None)
                    parked.append(Run(job.name, result))
                    continue
                if not verdict:
                    held.append(Held(job.name, gate.notice(verdict)))
                    continue
                claim = Claim(uuid.uuid4().hex, now, until, os.getpid())
                jobs[i] = replace(job, claim=claim, next_run_at=following)
                claimed.append(jobs[i])
        return claimed, held, busy, parked

    def _record(self, done: list[tuple[Any, WorkResult]]) -> list[Run]:
        if not done:
            return []
        runs = [Run(name, result) for (name, _token), result in done]
        tokens = {name: token for (name, token), _ in done}
        results = {run.key: run.result for run in runs}
        with self.table.edit() as jobs:
            for i, job in enumerate(jobs):
                if job.claim is not None and tokens.get(job.name) == job.claim.token:
                    jobs[i] = replace(job, last=results[job.name], claim=None)
        return runs
