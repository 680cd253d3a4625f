"""cron's job table: one per home (`<home>/cron/jobs.json`), its rows and their claims.

Readers take no lock (the file is replaced atomically); every change is a read-modify-write
under `cron/.jobs.json.lock` (`CronTable.edit`, the one locked update the table has, on
`fsutil.locked_update`). The table is read with `fsutil.read_optional` (`O_NONBLOCK|O_NOFOLLOW`,
then checked regular): a FIFO or a directory planted at `cron/jobs.json` is refused with one
line, it never blocks a tick.

A claim records the run in flight where another process can see it (issue 11: `hermes drain`):
the ticking process's pid, the worker's process group once started, and when it started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.consumers.validate import parse_timeout, validate_name, validate_owner, validate_profile
from hermes_estop.consumers.worker import WorkResult
from hermes_estop.model.cronspec import first_start_after, validate_cron, validate_timezone
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.timeutil import format_instant, in_interval, parse_instant, parse_stamp
from hermes_estop.process.estop import Estop
from hermes_estop.system.fsutil import LOCK_TIMEOUT, locked_update, read_optional

__all__ = [
    "CLAIM_GRACE",
    "MAX_TABLE_BYTES",
    "TABLE_DIR",
    "TABLE_NAME",
    "Claim",
    "CronJob",
    "CronTable",
    "DuplicateJob",
    "UnknownJob",
    "next_occurrence",
]

TABLE_DIR = "cron"
TABLE_NAME = "jobs.json"
_WHAT = "the cron table"
_FORMAT = 1
#: a table larger than this is refused, never read into memory
MAX_TABLE_BYTES = 64 * 1024 * 1024
#: a claim outlives its job's timeout by this much before another tick may treat it as stale
CLAIM_GRACE = timedelta(minutes=1)


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


def _is_pid(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Claim:
    """A tick's claim on a running job; stale (ignored) from `until` on."""

    token: str
    since: datetime
    until: datetime
    pid: int
    #: the worker's pid (its process group), recorded once it has started
    worker: int | None = None
    #: the worker's start time (`processes.start_time`): without it the worker is never signalled
    worker_start: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "since": format_instant(self.since), "until": format_instant(self.until),
                "pid": self.pid, "worker": self.worker, "worker_start": self.worker_start}

    @classmethod
    def from_json(cls, data: Any) -> Claim | None:
        if not isinstance(data, Mapping):
            return None
        since, until = parse_stamp(data.get("since")), parse_stamp(data.get("until"))
        if not isinstance(data.get("token"), str) or since is None or until is None:
            return None
        pid, worker, started = data.get("pid"), data.get("worker"), data.get("worker_start")
        return cls(data["token"], since, until, pid if isinstance(pid, int) and _is_pid(pid) else 0,
                   worker if isinstance(worker, int) and _is_pid(worker) else None,
                   started if isinstance(started, int) and not isinstance(started, bool) else None)


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
    #: `hermes cron add --no-overlap-window`: a run is not started when the forecast over
    #: `[now, now + timeout)` says it would be held at some instant (a window would cut it off)
    no_overlap_window: bool = False

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
            "no_overlap_window": self.no_overlap_window,
        }

    @classmethod
    def from_json(cls, data: Any) -> CronJob:
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
            no_overlap_window=data.get("no_overlap_window") is True,
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
    def of(cls, estop: Estop) -> CronTable:
        return cls(estop.layout.home)

    def exists(self) -> bool:
        """Something is at the table's path (a FIFO or directory too: reading it is then
        refused with one line, rather than the table silently counting as absent)."""
        return os.path.lexists(self.path)

    def jobs(self) -> list[CronJob]:
        return self._load()

    def get(self, name: str) -> CronJob | None:
        for job in self._load():
            if job.name == name:
                return job
        return None

    def _load(self) -> list[CronJob]:
        return self._parse(read_optional(self.path, MAX_TABLE_BYTES, what=_WHAT))

    def _parse(self, raw: bytes | None) -> list[CronJob]:
        if raw is None:
            return []
        try:
            data = json.loads(raw.decode("utf-8-sig"))
            return [CronJob.from_json(row) for row in data["jobs"]]
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            raise StoreError(f"the cron table {self.path} is damaged (not a table this program wrote); "
                             "fix or move it away") from None

    @staticmethod
    def _render(jobs: list[CronJob]) -> bytes:
        """One job per line: readable and diffable, and written by json's C encoder (an indented
        dump runs the pure-Python one, which took a third of a tick over 10,000 jobs)."""
        rows = ",\n".join("    " + json.dumps(job.to_json()) for job in jobs)
        listing = f"[\n{rows}\n  ]" if jobs else "[]"
        return f'{{\n  "format": {_FORMAT},\n  "jobs": {listing}\n}}\n'.encode()

    @contextmanager
    def edit(self, wait: float = LOCK_TIMEOUT) -> Iterator[list[CronJob]]:
        """The jobs, under the lock (waited for at most `wait` seconds: `StoreError` then); the
        list as left at the end of the block is written back (atomically) when it changed. On an
        exception nothing is written."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.dir}: {exc.strerror or exc}") from None
        with locked_update(self.path, limit=MAX_TABLE_BYTES, what=_WHAT, lock_path=self.lock_path,
                           timeout=wait) as file:
            jobs = self._parse(file.current)
            before = list(jobs)
            yield jobs
            if jobs != before:
                file.replace(self._render(jobs))

    def add(self, name: str, command: str, *, now: datetime, schedule: str | None = None, timezone: str = "UTC",
            at: Any = None, owner: object = None, profile: str | None = None, timeout: Any = None,
            no_overlap_window: bool = False) -> CronJob:
        """Validate everything, then add the job; `DuplicateJob` (nothing written) when the name
        is taken. The first run is the first occurrence after `now` (or `at`)."""
        validate_name(name, "job name")
        if no_overlap_window and timeout is None:
            raise InvalidArgument("--no-overlap-window needs --timeout DUR: the run's forecast spans [start, start + timeout), "
                                  "so the timeout must be the job's own, not the 1h default")
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
            no_overlap_window=bool(no_overlap_window),
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
