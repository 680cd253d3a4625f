"""When the window scheduler wakes up, and the APScheduler 3 adapter that wakes it.

`Wakeups` keeps the instants the plan can change at as APScheduler `DateTrigger` jobs
(APScheduler never reads a cron expression: its `CronTrigger` reads day-of-week 0 as Monday),
through the small `Scheduler` protocol, so a test or another host process can pass its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import Occurrence, Rows, Windows, covering as covering_of, next_armed

__all__ = ["JOB_PREFIX", "LATER", "MAX_JOBS", "Scheduler", "Wakeups", "due_wakeups", "make_scheduler", "wakeups_for"]

JOB_PREFIX = "windows:"
#: wake-up jobs kept at most (the earliest); `LATER` stands for the rest
MAX_JOBS = 256
LATER = f"{JOB_PREFIX}later"


class Scheduler(Protocol):
    """The part of APScheduler 3's `BaseScheduler` the window scheduler uses."""

    @property
    def running(self) -> bool: ...

    def start(self, paused: bool = False) -> None: ...

    def shutdown(self, wait: bool = True) -> None: ...

    def get_jobs(self) -> list[Any]: ...

    def add_job(self, func: Callable[..., Any], trigger: Any = None, args: Any = None, **kwargs: Any) -> Any: ...

    def remove_job(self, job_id: str, jobstore: str | None = None) -> None: ...


def wakeups_for(windows: Iterable[Window], now: datetime, limit: int = MAX_JOBS) -> dict[str, datetime]:
    """The instants after `now` at which the plan can change (`_jobs`), the `limit` earliest
    kept plus `windows:later` at the earliest left out: 10,000 windows keep a few hundred jobs
    (APScheduler's `add_job` costs about 0.1 ms each). Asks every window the exact functions:
    the definition `due_wakeups` answers without asking them."""
    out: dict[str, datetime] = {}
    for window in windows:
        if window.enabled:
            _jobs(out, window.name, next_armed(window, now), covering_of(window, now), now)
    return _earliest(out, limit)


def due_wakeups(timeline: Rows, windows: Windows, covering: Mapping[str, Sequence[Occurrence]],
                now: datetime, limit: int = MAX_JOBS) -> dict[str, datetime]:
    """`wakeups_for` read off the pass's `timeline`: the next arm of each window something
    covers (`covering`), and the `limit + 1` earliest next arms of the others off its arm
    order. Asking each of 10,000 windows every pass was a third of a quiet pass (issue 24)."""
    out: dict[str, datetime] = {}
    for name, covered in covering.items():
        window = windows.named(name)
        _jobs(out, name, timeline.first_armed(window, now) if window is not None else None, covered, now)
    for name, upcoming in timeline.next_arms(windows, now, covering.keys(), limit + 1):
        _jobs(out, name, upcoming, (), now)
    return _earliest(out, limit)


def _jobs(out: dict[str, datetime], name: str, upcoming: Occurrence | None, covered: Sequence[Occurrence],
          now: datetime) -> None:
    """The wake-ups of the window `name`: its next arm (`windows:start:` at its start, or
    `windows:drain:` less its drain lead), and of the occurrences `covered` covering `now` the
    earliest end (`windows:end:`, the expiry) and the start of one draining (its reason changes)."""
    if upcoming is not None:
        kind = "drain" if upcoming.lead else "start"
        out[f"{JOB_PREFIX}{kind}:{name}"] = upcoming.arm_at
    if covered:
        out[f"{JOB_PREFIX}end:{name}"] = min(o.end for o in covered)
        starts = [o.start for o in covered if o.start > now]
        if starts:
            out[f"{JOB_PREFIX}start:{name}"] = min(starts)


def _earliest(out: dict[str, datetime], limit: int) -> dict[str, datetime]:
    """The `limit` earliest wake-ups, and `windows:later` at the earliest one left out."""
    if len(out) <= limit:
        return out
    ordered = sorted(out.items(), key=lambda kv: (kv[1], kv[0]))
    kept = dict(ordered[:limit])
    kept[LATER] = ordered[limit][1]
    return kept


class Wakeups:
    """Keeps the scheduler's `windows:` jobs equal to a desired set of instants."""

    def __init__(self, scheduler: Scheduler, wake: Callable[[str], None]) -> None:
        self.scheduler = scheduler
        self.wake = wake

    def jobs(self) -> dict[str, datetime]:
        out: dict[str, datetime] = {}
        for job in self.scheduler.get_jobs():
            if job.id.startswith(JOB_PREFIX) and job.next_run_time is not None:
                out[job.id] = job.next_run_time
        return out

    def set(self, desired: dict[str, datetime]) -> None:
        from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]
        from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]

        existing = {job.id: job for job in self.scheduler.get_jobs() if job.id.startswith(JOB_PREFIX)}
        for job_id in existing.keys() - desired.keys():
            with contextlib.suppress(JobLookupError):
                self.scheduler.remove_job(job_id)
        for job_id, when in desired.items():
            job = existing.get(job_id)
            if job is not None and getattr(job, "next_run_time", None) == when:
                continue
            self.scheduler.add_job(self.wake, trigger=DateTrigger(run_date=when, timezone=UTC), args=(job_id,),
                                   id=job_id, name=job_id, replace_existing=True, misfire_grace_time=None,
                                   coalesce=True, max_instances=1)


def make_scheduler() -> Scheduler:
    """A BackgroundScheduler in UTC with one worker thread: wake-ups never run concurrently."""
    from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

    scheduler: Scheduler = BackgroundScheduler(
        timezone=UTC,
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )
    return scheduler
