"""Gating for an APScheduler 3 scheduler a user already runs.

`gated(func, estop, ...)` wraps one job function: while the gate refuses, a run is skipped
(counted, and logged once per engagement rather than once per skip). `gate_scheduler(scheduler,
estop, ...)` wraps every job the scheduler has and every job added later. With `catch_up=True` a
job that skipped while held runs once when the hold lifts (coalesced: once, however many runs it
missed); a small watcher job of the scheduler notices the lift.

The wrapper is not picklable, so wrapped jobs belong in a memory job store (the default). Jobs in
a persistent store should gate inside their function instead (`if not estop.gate(...): return`).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from apscheduler.events import EVENT_JOB_ADDED, EVENT_SCHEDULER_SHUTDOWN  # type: ignore[import-untyped]

from hermes_estop.consumers.passgate import gate_work, work_views
from hermes_estop.consumers.reporter import ConsumerReporter
from hermes_estop.fleet.registry.entries import MIN_REPORT_INTERVAL
from hermes_estop.process.estop import Estop

__all__ = ["CATCH_UP_JOB_ID", "REPORT_JOB_ID", "Gated", "SchedulerGate", "gate_scheduler", "gated"]

logger = logging.getLogger("hermes_estop.scheduling")

#: the id of the watcher job, and the prefix of the one-off catch-up runs it schedules
CATCH_UP_JOB_ID = "hermes-estop:catch-up"
#: the id of the job that reports this scheduler to the consumer registry (`registry`)
REPORT_JOB_ID = "hermes-estop:report"


#: what `gate_scheduler` gates an APScheduler's jobs as by default (`hermes pause --only apscheduler`)
COMPONENT = "apscheduler"


class Gated:
    """A job function that runs only when the gate lets `user_id` on `profile` proceed; for
    scoped holds it is work of `component` named `job` (an APScheduler job id)."""

    def __init__(self, func: Callable[..., Any], estop: Estop, *, user_id: object = None, profile: str | None = None,
                 catch_up: bool = False, name: str | None = None, log: logging.Logger | None = None,
                 component: str | None = None, job: str | None = None) -> None:
        functools.update_wrapper(self, func, updated=())
        self.func = func
        self.estop = estop
        self.user_id = user_id
        self.profile = profile
        self.component = component
        self.job = job
        self.catch_up = catch_up
        self.name = name or getattr(func, "__qualname__", None) or repr(func)
        self.log = log or logger
        self.runs = 0
        self.skipped = 0
        self.catch_ups = 0
        self._held_skips = 0
        self._engagement: frozenset[Any] | None = None
        self._pending: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Gated({self.name!r}, runs={self.runs}, skipped={self.skipped})"

    @property
    def pending(self) -> bool:
        """A skipped run is waiting for the lift (only with `catch_up`)."""
        return self._pending is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        verdict = self.verdict()
        if not verdict:
            self._skip(verdict, args, kwargs)
            return None
        with self._lock:
            self._pending = None
            self.runs += 1
        self._lifted()
        return self.func(*args, **kwargs)

    def verdict(self) -> Any:
        """The gate's answer for this job now."""
        return gate_work(self.estop, self.user_id, self.profile, self.component, self.job)

    def catch_up_now(self) -> bool:
        """Run the pending skipped run once, if there is one and the gate now admits; True when
        it ran. A concurrent regular run or catch-up takes the pending run from under it."""
        pending = self._pending
        if pending is None or not self.verdict():
            return False
        with self._lock:
            if self._pending is not pending:
                return False
            self._pending = None
            self.runs += 1
            self.catch_ups += 1
        self._lifted()
        self.log.info("%s: catch-up run after the hold lifted", self.name)
        args, kwargs = pending
        self.func(*args, **kwargs)
        return True

    def _skip(self, verdict: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        key = frozenset((r.location.key, r.fence) for r in verdict.holds)
        with self._lock:
            self.skipped += 1
            self._held_skips += 1
            first = key != self._engagement
            self._engagement = key
            if self.catch_up:
                self._pending = (args, dict(kwargs))
        if first:
            self.log.info("%s: skipped while held (%s); further skips during this hold are counted, not logged",
                          self.name, verdict.notice)

    def _lifted(self) -> None:
        with self._lock:
            if self._engagement is None:
                return
            count, self._held_skips, self._engagement = self._held_skips, 0, None
        self.log.info("%s: the hold lifted; %d run(s) were skipped", self.name, count)


def gated(func: Callable[..., Any], estop: Estop, *, user_id: object = None, profile: str | None = None,
          catch_up: bool = False, name: str | None = None, component: str | None = None,
          job: str | None = None) -> Gated:
    """`func` gated by `estop.gate(user_id, profile, component, job)`:
    `scheduler.add_job(gated(f, estop), ...)`."""
    if isinstance(func, Gated):
        return func
    return Gated(func, estop, user_id=user_id, profile=profile, catch_up=catch_up, name=name,
                 component=component, job=job)


class SchedulerGate:
    """Gates every job of one scheduler; schedules the catch-up runs. Use `gate_scheduler`."""

    def __init__(self, scheduler: Any, estop: Estop, *, user_id: object = None, profile: str | None = None,
                 catch_up: bool = False, check_every: float = 5.0, register: bool = True,
                 component: str = COMPONENT) -> None:
        self.scheduler = scheduler
        self.component = component
        self.reporter: ConsumerReporter | None = None
        if register:
            scopes = dict.fromkeys(loc.scope for view in work_views(estop, profile) for loc in view.locations)
            self.reporter = ConsumerReporter(estop, "apscheduler", interval=MIN_REPORT_INTERVAL, scopes=tuple(scopes))
        self.estop = estop
        self.user_id = user_id
        self.profile = profile
        self.catch_up = catch_up
        self.check_every = check_every
        self.checks = 0
        self.jobs: dict[str, Gated] = {}
        self._watching = False
        self._lock = threading.Lock()

    def install(self) -> SchedulerGate:
        self.scheduler.add_listener(self._on_added, EVENT_JOB_ADDED)
        for job in self.scheduler.get_jobs():
            self._wrap(job)
        if self.catch_up:
            self._watch()
        if self.reporter is not None:
            # reported by a job of the scheduler itself: a scheduler that stops running jobs stalls
            self.reporter.register()
            self.scheduler.add_listener(lambda _event: self.close(), EVENT_SCHEDULER_SHUTDOWN)
            self.scheduler.add_job(self.reporter.report, "interval", seconds=MIN_REPORT_INTERVAL / 4, id=REPORT_JOB_ID,
                                   name="hermes-estop registry report", replace_existing=True, max_instances=1,
                                   coalesce=True)
        return self

    def close(self) -> None:
        """Leave the consumer registry (on the scheduler's shutdown)."""
        if self.reporter is not None:
            self.reporter.deregister()

    def _on_added(self, event: Any) -> None:
        if event.job_id.startswith((CATCH_UP_JOB_ID, REPORT_JOB_ID)):
            return
        job = self.scheduler.get_job(event.job_id, event.jobstore)
        if job is not None:
            self._wrap(job)

    def _wrap(self, job: Any) -> None:
        if job.id.startswith((CATCH_UP_JOB_ID, REPORT_JOB_ID)):
            return
        func = job.func
        if not isinstance(func, Gated):
            func = Gated(func, self.estop, user_id=self.user_id, profile=self.profile, catch_up=self.catch_up,
                         name=job.name, component=self.component, job=job.id)
            job.modify(func=func)
        with self._lock:
            self.jobs[job.id] = func
        if func.catch_up:
            self._watch()

    def _watch(self) -> None:
        with self._lock:
            if self._watching:
                return
            self._watching = True
        self.scheduler.add_job(self.check, "interval", seconds=self.check_every, id=CATCH_UP_JOB_ID,
                               name="hermes-estop catch-up watcher", replace_existing=True, max_instances=1,
                               coalesce=True)

    def check(self) -> int:
        """One watcher pass: schedule a one-off catch-up run for every job with a pending
        skipped run that the gate now admits. Returns how many it scheduled."""
        scheduled = 0
        with self._lock:
            tracked = list(self.jobs.items())
        for job_id, func in tracked:
            if not func.pending:
                if self.scheduler.get_job(job_id) is None:
                    with self._lock:
                        self.jobs.pop(job_id, None)
                continue
            if func.verdict():
                self.scheduler.add_job(func.catch_up_now, id=f"{CATCH_UP_JOB_ID}:{job_id}",
                                       name=f"catch-up {func.name}", replace_existing=True)
                scheduled += 1
        self.checks += 1
        return scheduled


def gate_scheduler(scheduler: Any, estop: Estop, *, user_id: object = None, profile: str | None = None,
                   catch_up: bool = False, check_every: float = 5.0, register: bool = True,
                   component: str = COMPONENT) -> SchedulerGate:
    """Gate every job of `scheduler` (an APScheduler 3 scheduler, started or not) by
    `estop.gate(user_id, profile)`, now and for jobs added later. Jobs already wrapped with
    `gated()` keep their own principal. With `catch_up`, a job that skipped runs once when the
    hold lifts, noticed by a watcher job every `check_every` seconds. With `register` (the
    default) the scheduler enters the consumer registry, reported by a job of its own, so
    `hermes pause --wait` knows when it has seen a hold. For scoped holds each job is work of
    `component` (default `apscheduler`) named by its job id."""
    return SchedulerGate(scheduler, estop, user_id=user_id, profile=profile, catch_up=catch_up,
                         check_every=check_every, register=register, component=component).install()
