"""cron: a job table per home (`<home>/cron/jobs.json`) and a tick that runs the due jobs the gate
lets through (DESIGN 7).

The gate is asked about each job's owner and profile, so a maintenance job owned by the
allowlisted operator runs inside its own window while everyone else's jobs wait. A held job does
not run and its `next_run_at` does not move; once the hold lifts, a job that missed several
occurrences runs once (coalesced) and its next run is the first occurrence after that moment.
A one-shot job (`at`) likewise waits for the lift.

A tick claims, runs and records: it claims due jobs under the table's lock (a claim stops a
concurrent tick from starting the same job), starts them as subprocesses without holding the
lock, and records each result under the lock again. Schedules are validated and their
occurrences computed by `hermes_estop.cronspec`, the one cron math the windows use too: croniter
on the wall clock of the job's IANA timezone, then the DST rule (a daily job whose start repeats
on the fall-back night runs once, at its first instant; a start in the spring-forward gap runs
at the gap's end). Instants are stored in UTC.
"""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..cronspec import first_start_after, validate_cron, validate_timezone
from ..errors import InvalidArgument, StoreError
from ..estop import Estop
from ..fsutil import atomic_write, exclusive_lock, sweep_temporaries
from ..timeutil import format_instant, in_interval, parse_instant, parse_stamp
from .common import (
    PassGate,
    WorkerPool,
    WorkResult,
    parse_timeout,
    validate_name,
    validate_owner,
    validate_profile,
    worker_env,
)

__all__ = [
    "TABLE_DIR",
    "TABLE_NAME",
    "DuplicateJob",
    "UnknownJob",
    "Claim",
    "CronJob",
    "CronTable",
    "CronRunner",
    "CronReport",
    "HeldJob",
    "JobRun",
    "next_occurrence",
]

TABLE_DIR = "cron"
TABLE_NAME = "jobs.json"
_FORMAT = 1
#: a claim outlives its job's timeout by this much before another tick may treat it as stale
_CLAIM_GRACE = timedelta(minutes=1)


class DuplicateJob(InvalidArgument):
    """`add` of a name the table already has."""


class UnknownJob(InvalidArgument):
    """`remove` of a name the table does not have."""


def next_occurrence(schedule: str, timezone: str, after: datetime) -> datetime:
    """The first occurrence of `schedule` in `timezone` strictly after `after`, in UTC, by the
    cronspec rules; `InvalidArgument` (which parks a hand-edited row) for a bad expression or
    zone, or a schedule with no occurrence left."""
    expr = validate_cron(schedule)
    found = first_start_after(expr, validate_timezone(timezone), after)
    if found is None:
        raise InvalidArgument(f"invalid cron expression {schedule!r}: it never fires after {format_instant(after)}")
    return found


@dataclass(frozen=True)
class Claim:
    """A tick's claim on a running job; stale (ignored) from `until` on."""

    token: str
    since: datetime
    until: datetime
    pid: int

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "since": format_instant(self.since), "until": format_instant(self.until),
                "pid": self.pid}

    @classmethod
    def from_json(cls, data: Any) -> "Claim | None":
        if not isinstance(data, Mapping):
            return None
        since, until = parse_stamp(data.get("since")), parse_stamp(data.get("until"))
        if not isinstance(data.get("token"), str) or since is None or until is None:
            return None
        pid = data.get("pid")
        return cls(data["token"], since, until, pid if isinstance(pid, int) else 0)


@dataclass(frozen=True)
class CronJob:
    """One row of the table. Exactly one of `schedule` (with `timezone`) and `at` is set.
    `next_run_at` None means a one-shot job that has run."""

    name: str
    command: str
    schedule: str | None
    timezone: str
    at: datetime | None
    owner: str | None
    profile: str | None
    timeout: timedelta
    created_at: datetime
    next_run_at: datetime | None
    last: WorkResult | None = None
    claim: Claim | None = None

    def due(self, now: datetime) -> bool:
        return self.next_run_at is not None and in_interval(now, self.next_run_at, None)

    def running(self, now: datetime) -> bool:
        """Claimed by a tick whose claim has not gone stale."""
        return self.claim is not None and in_interval(now, None, self.claim.until)

    def following(self, now: datetime) -> datetime | None:
        """`next_run_at` after a run at `now`: the first occurrence after now (coalescing every
        occurrence missed before it); None for a one-shot job."""
        if self.schedule is None:
            return None
        return next_occurrence(self.schedule, self.timezone, now)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "at": format_instant(self.at),
            "command": self.command,
            "owner": self.owner,
            "profile": self.profile,
            "timeout": int(self.timeout.total_seconds()),
            "created_at": format_instant(self.created_at),
            "next_run_at": format_instant(self.next_run_at),
            "last": self.last.to_json() if self.last else None,
            "claim": self.claim.to_json() if self.claim else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> "CronJob":
        """Raises ValueError/KeyError/TypeError on a row this module did not write."""
        created = parse_stamp(data["created_at"])
        if created is None or not isinstance(data["name"], str) or not isinstance(data["command"], str):
            raise ValueError("bad row")
        schedule = data.get("schedule")
        at = parse_stamp(data.get("at"))
        if (schedule is None) == (at is None):
            raise ValueError("a job needs a schedule or an instant")
        last = data.get("last")
        return cls(
            name=data["name"],
            command=data["command"],
            schedule=schedule,
            timezone=data.get("timezone") or "UTC",
            at=at,
            owner=data.get("owner"),
            profile=data.get("profile"),
            timeout=timedelta(seconds=int(data["timeout"])),
            created_at=created,
            next_run_at=parse_stamp(data.get("next_run_at")),
            last=WorkResult.from_json(last) if isinstance(last, Mapping) else None,
            claim=Claim.from_json(data.get("claim")),
        )


class CronTable:
    """The job table of one home. Readers take no lock (the file is replaced atomically); every
    change is a read-modify-write under `cron/.jobs.json.lock`."""

    def __init__(self, home: str | Path) -> None:
        self.home = Path(home)
        self.dir = self.home / TABLE_DIR
        self.path = self.dir / TABLE_NAME
        self.lock_path = self.dir / f".{TABLE_NAME}.lock"
        self.log_dir = self.dir / "logs"

    @classmethod
    def of(cls, estop: Estop) -> "CronTable":
        return cls(estop.layout.home)

    def exists(self) -> bool:
        return self.path.is_file()

    def jobs(self) -> list[CronJob]:
        return self._load()

    def get(self, name: str) -> CronJob | None:
        for job in self._load():
            if job.name == name:
                return job
        return None

    def _load(self) -> list[CronJob]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read the cron table {self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(raw.decode("utf-8-sig"))
            return [CronJob.from_json(row) for row in data["jobs"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise StoreError(f"the cron table {self.path} is damaged (not a table this program wrote); "
                             "fix or move it away") from None

    def _store(self, jobs: list[CronJob]) -> None:
        """One job per line: readable and diffable, and written by json's C encoder (an indented
        dump runs the pure-Python one, which took a third of a tick over 10,000 jobs)."""
        rows = ",\n".join("    " + json.dumps(job.to_json()) for job in jobs)
        listing = f"[\n{rows}\n  ]" if jobs else "[]"
        text = f'{{\n  "format": {_FORMAT},\n  "jobs": {listing}\n}}\n'
        atomic_write(self.path, text.encode("utf-8"))

    @contextmanager
    def edit(self) -> Iterator[list[CronJob]]:
        """The jobs, under the lock; the list as left at the end of the block is written back
        (atomically) when it changed. On an exception nothing is written."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.dir}: {exc.strerror or exc}") from None
        with exclusive_lock(self.lock_path):
            sweep_temporaries(self.path)
            jobs = self._load()
            before = list(jobs)
            yield jobs
            if jobs != before:
                self._store(jobs)

    def add(self, name: str, command: str, *, now: datetime, schedule: str | None = None, timezone: str = "UTC",
            at: Any = None, owner: Any = None, profile: Any = None, timeout: Any = None) -> CronJob:
        """Validate everything, then add the job; `DuplicateJob` (nothing written) when the name
        is taken. The first run is the first occurrence after `now` (or `at`)."""
        validate_name(name, "job name")
        if not isinstance(command, str) or not command.strip():
            raise InvalidArgument(f"invalid command {command!r}: expected a shell command")
        if (schedule is None) == (at is None):
            raise InvalidArgument("give a cron expression or a one-shot time (--at), exactly one")
        when = None
        timezone = validate_timezone(timezone).key
        if schedule is not None:
            schedule = validate_cron(schedule)
            first = next_occurrence(schedule, timezone, now)
        else:
            when = parse_instant(at, what="run time")
            if not in_interval(now, None, when):
                raise InvalidArgument(f"invalid run time {format_instant(when)!r}: it is not in the future")
            first = when
        job = CronJob(
            name=name,
            command=command,
            schedule=schedule,
            timezone=timezone if schedule is not None else "UTC",
            at=when,
            owner=validate_owner(owner),
            profile=validate_profile(profile),
            timeout=parse_timeout(timeout),
            created_at=now,
            next_run_at=first,
        )
        with self.edit() as jobs:
            if any(existing.name == name for existing in jobs):
                raise DuplicateJob(f"duplicate job name {name!r}: a job by that name exists (remove it first)")
            jobs.append(job)
        return job

    def remove(self, name: str) -> CronJob:
        with self.edit() as jobs:
            for i, job in enumerate(jobs):
                if job.name == name:
                    del jobs[i]
                    return job
        raise UnknownJob(f"unknown job name {name!r}: no such job in {self.path}")


@dataclass(frozen=True)
class HeldJob:
    name: str
    notice: str | None


@dataclass(frozen=True)
class JobRun:
    name: str
    result: WorkResult


@dataclass(frozen=True)
class CronReport:
    """What one tick did. `executed` counts the jobs it started; `failed` the runs it recorded
    that did not succeed; `held` the due jobs the gate refused (their `next_run_at` unmoved);
    `busy` the due jobs still running from an earlier tick."""

    now: datetime
    started: tuple[str, ...] = ()
    held: tuple[HeldJob, ...] = ()
    busy: tuple[str, ...] = ()
    finished: tuple[JobRun, ...] = ()

    @property
    def executed(self) -> int:
        return len(self.started)

    @property
    def failed(self) -> tuple[JobRun, ...]:
        return tuple(run for run in self.finished if not run.result.ok)

    def summary(self) -> str:
        return (f"cron tick: {self.executed} executed, {len(self.failed)} failed, {len(self.held)} held"
                + (f", {len(self.busy)} still running" if self.busy else ""))

    def to_json(self) -> dict[str, Any]:
        results = {run.name: run.result for run in self.finished}
        rows: list[dict[str, Any]] = []
        for name in self.started:
            result = results.pop(name, None)
            rows.append({"name": name, "outcome": result.status if result else "started",
                         **({"result": result.to_json()} if result else {})})
        for name, result in results.items():
            rows.append({"name": name, "outcome": result.status, "result": result.to_json()})
        rows += [{"name": held.name, "outcome": "held", "notice": held.notice} for held in self.held]
        rows += [{"name": name, "outcome": "busy"} for name in self.busy]
        return {"now": format_instant(self.now), "executed": self.executed, "failed": len(self.failed),
                "held": len(self.held), "busy": len(self.busy), "jobs": rows}


@dataclass
class CronRunner:
    """Ticks one home's table for one `Estop` (the home's). Keeps the workers it started, so a
    service can tick without waiting for them (`wait=False`) and record them on a later tick."""

    estop: Estop
    table: CronTable | None = None
    pool: WorkerPool = field(init=False)

    def __post_init__(self) -> None:
        if self.table is None:
            self.table = CronTable.of(self.estop)
        self.pool = WorkerPool(self.estop.clock)

    def pass_gate(self) -> PassGate:
        """The gate one tick decides its due jobs with: `gate(job.owner, job.profile)`, through
        the job's profile's view of the fleet (or this home's); `InvalidArgument` for a bad
        profile name."""
        return PassGate(self.estop)

    def tick(self, now: datetime | None = None, *, wait: bool = True) -> CronReport:
        """Record finished runs, then claim and start every due job the gate admits. With `wait`
        (the CLI), wait for the jobs started and record them too."""
        now = self.estop.clock() if now is None else now
        finished = self._record(self.pool.reap())
        if not self.table.exists():
            return CronReport(now, finished=tuple(finished))
        claimed, held, busy, broken = self._claim(now)
        finished += broken
        base_env = dict(os.environ)
        for job in claimed:
            assert job.claim is not None
            self.pool.start(
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
        finished += self._record(self.pool.wait_all() if wait else self.pool.reap())
        return CronReport(now, tuple(job.name for job in claimed), tuple(held), tuple(busy), tuple(finished))

    def drain(self, timeout: float | None = None) -> list[JobRun]:
        """Wait (up to `timeout` seconds) for the jobs in flight and record them. Jobs still
        running are left running; their claims lapse at their deadline."""
        return self._record(self.pool.wait_all(timeout))

    def _claim(self, now: datetime) -> tuple[list[CronJob], list[HeldJob], list[str], list[JobRun]]:
        claimed: list[CronJob] = []
        held: list[HeldJob] = []
        busy: list[str] = []
        broken: list[JobRun] = []
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
                except InvalidArgument as exc:
                    # A hand-edited row (bad zone, profile, expression) is parked, not retried each tick.
                    result = WorkResult("error", None, now, now, str(exc))
                    jobs[i] = replace(job, next_run_at=None, last=result, claim=None)
                    broken.append(JobRun(job.name, result))
                    continue
                if not verdict:
                    held.append(HeldJob(job.name, gate.notice(verdict)))
                    continue
                claim = Claim(uuid.uuid4().hex, now, now + job.timeout + _CLAIM_GRACE, os.getpid())
                jobs[i] = replace(job, claim=claim, next_run_at=following)
                claimed.append(jobs[i])
        return claimed, held, busy, broken

    def _record(self, done: list[tuple[Any, WorkResult]]) -> list[JobRun]:
        if not done:
            return []
        runs = [JobRun(name, result) for (name, _token), result in done]
        tokens = {name: token for (name, token), _ in done}
        results = {run.name: run.result for run in runs}
        with self.table.edit() as jobs:
            for i, job in enumerate(jobs):
                if job.claim is not None and tokens.get(job.name) == job.claim.token:
                    jobs[i] = replace(job, last=results[job.name], claim=None)
        return runs
