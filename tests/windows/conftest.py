"""Fixtures for the window tests: a fleet on disk, its `Estop` on the fake clock, and the window
scheduler driven by a REAL APScheduler whose date jobs are fired on the fake clock.

APScheduler 3 reads the wall clock itself, so the scheduler is started paused (it keeps the jobs,
computes their `next_run_time` from their `DateTrigger`, and fires nothing by itself) and
`Harness.run_until` fires what is due in order, moving the fake clock to each job's instant first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hermes_estop import Estop
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import Reading
from hermes_estop.windows.ledger import LedgerEntry, open_ledger
from hermes_estop.windows.model import Window
from hermes_estop.windows.scheduler import TickReport, WindowService
from hermes_estop.windows.windows_file import WindowsFile


def make_scheduler() -> Any:
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    return scheduler


class Harness:
    """One fleet root, the operator's `Estop` on the fake clock, and the scheduler service."""

    def __init__(self, root: Path, clock: Any) -> None:
        self.root = root
        self.clock = clock
        self.estop = Estop(root=root, home=root, clock=clock, actor="operator@test")
        self.file = WindowsFile(root)
        self.ledger = open_ledger(Fleet.of_files(root))
        self.schedulers: list[Any] = []
        self.leader = True
        self.service = self.new_service()
        self.reports: list[TickReport] = []

    def new_service(self) -> WindowService:
        """A fresh scheduler process: new service, new APScheduler, the same files."""
        scheduler = make_scheduler()
        self.schedulers.append(scheduler)
        estop = Estop(root=self.root, home=self.root, clock=self.clock, actor="scheduler@test")
        return WindowService(estop.fleet, scheduler=scheduler, is_leader=lambda: self.leader)

    def restart(self) -> TickReport:
        """The scheduler process dies and a new one starts (its first reconciliation runs)."""
        old: Any = self.service.scheduler  # the APScheduler behind the Scheduler protocol
        old.remove_all_jobs()
        self.service = self.new_service()
        return self.start()

    def start(self) -> TickReport:
        report = self.service.start()
        self.reports.append(report)
        return report

    def write(self, *windows: Window | dict[str, Any]) -> None:
        self.file.save([w if isinstance(w, Window) else Window.parse(w) for w in windows])

    def jobs(self) -> dict[str, datetime]:
        """The wake-ups the service keeps with APScheduler."""
        return {job.id: job.next_run_time for job in self.service.scheduler.get_jobs() if job.next_run_time}

    def run_until(self, target: datetime, *, poll: bool = False,
                  each: Callable[[datetime], None] | None = None) -> list[str]:
        """Fire the due wake-up jobs in order up to and including `target`, on the fake clock;
        leave the clock at `target`. `poll`: also run the periodic reconciliation at `target`.
        Returns the ids of the jobs fired."""
        fired: list[str] = []
        scheduler = self.service.scheduler
        for _ in range(1000):
            due = [job for job in scheduler.get_jobs() if job.next_run_time is not None and job.next_run_time <= target]
            if not due:
                break
            job = min(due, key=lambda j: (j.next_run_time, j.id))
            when = job.next_run_time
            self.clock.set(when.astimezone(UTC))
            if each is not None:
                each(self.clock.now)
            job.func(*job.args, **job.kwargs)
            fired.append(job.id)
            again = scheduler.get_job(job.id)  # type: ignore[attr-defined]  # the APScheduler behind the protocol
            if again is not None and again.next_run_time == when:
                scheduler.remove_job(job.id)  # what APScheduler does once a date trigger has fired
        else:
            raise AssertionError("the service keeps scheduling jobs at instants already due")
        self.clock.set(target)
        if poll:
            self.reports.append(self.service.reconcile())
        return fired

    def reading(self, scope: str = "fleet") -> Reading:
        """The sentinel as it is on disk (a plain read: no expiry side effect)."""
        return self.estop.store.read((self.estop.layout.location(scope),), self.clock())[0]

    def engaged_at(self, when: datetime, scope: str = "fleet") -> bool:
        """The shared predicate at `when`, for a process serving `scope`."""
        estop = self.estop if scope == "fleet" else self.estop.for_profile(scope)
        return any(r.active for r in estop.store.read(estop.locations, when))

    def entries(self) -> dict[str, LedgerEntry]:
        return self.ledger.load()

    def events(self, kind: str | None = None) -> list[Any]:
        return [e for e in self.estop.history() if kind is None or e.event == kind]

    def close(self) -> None:
        for scheduler in self.schedulers:
            if scheduler.running:
                scheduler.shutdown(wait=False)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the windows validated from here on (`Window.parse`, the real one, counted)."""
    built: list[str] = []
    real = Window.parse

    def counted(cls: type[Window], *args: Any, **kwargs: Any) -> Window:
        window = real(*args, **kwargs)
        built.append(window.name)
        return window

    monkeypatch.setattr(Window, "parse", classmethod(counted))
    return built


@pytest.fixture
def harness(fleet_root: Path, clock: Any):
    h = Harness(fleet_root, clock)
    yield h
    h.close()


#: one file of every kind of window (every field; the Berlin fall-back night of 2026-10-25 in
#: the week after 2026-10-20; a one-shot whose start has a fraction of a second): what the
#: compiled schedule must answer exactly as the exact functions do
VARIED = '''
[[windows]]
name = "nightly"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "1h"
drain = "15m"
reason = "nightly maintenance"
allow = { user_ids = ["424242", "ops"], profiles = ["alpha"] }

[[windows]]
name = "once"
at = 2026-10-22T10:00:00.250Z
duration = "2h30m"
scope = "alpha"
only = ["cron", "kanban"]
jobs = ["backup-*"]

[[windows]]
name = "weekly"
cron = "0 4 * * 0"
timezone = "America/New_York"
duration = "45m"
enabled = false
not_before = 2026-10-01T00:00:00Z
not_after = 2026-10-26T00:00:00Z
exclude = [2026-10-25]

[[windows]]
name = "fall-back"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "3h"

[[windows]]
name = "long"
cron = "0 0 * * 1"
timezone = "Asia/Tokyo"
duration = "2d"

[[windows]]
name = "quarter-hourly"
cron = "*/15 * * * *"
duration = "5m"
exclude_cron = "* 3 * * *"

[[windows]]
name = "task"
cron = "15 3 1 * *"
duration = "20m"
run = ["/usr/bin/true", "--flag"]
on_failure_ttl = "2h"
'''


@pytest.fixture
def varied() -> str:
    """`VARIED`, the text of a windows file of every kind of window."""
    return VARIED
