"""The consumer side of the registry (`registry`): a process that starts work registers itself,
reports from its own loop what it last saw, and deregisters when it stops.

Reports are made from the consumer's loop, after a pass, never from `gate()`: the hot path is
untouched, and a report proves the pass that was running when a hold arrived has ended. A loop
calls `report()` each time round; the reporter reads the holds once and writes at most once per
`MIN_REPORT_INTERVAL`, and at once whenever what it sees changes. A report that cannot be
written is logged once (and once when it works again), never raised: the registry is for the
operator's knowledge, it must never stop a consumer that gates correctly.

    reporter = ConsumerReporter(estop, "my-loop", interval=5)
    with reporter:                      # registers; deregisters on exit
        while running:
            do_one_gated_pass()
            reporter.report()
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hermes_estop import __version__
from hermes_estop.fleet.registry.entries import ALL_SCOPES, MIN_REPORT_INTERVAL, ConsumerEntry, observed_holds, this_host
from hermes_estop.model.text import one_line
from hermes_estop.system.processes import start_time

if TYPE_CHECKING:
    from hermes_estop.fleet.tables import ConsumerTable
    from hermes_estop.model.hold import Snapshot
    from hermes_estop.process.estop import Estop

__all__ = ["ConsumerReporter"]

logger = logging.getLogger("hermes_estop.fleet.registry.entries")


class ConsumerReporter:
    """One consumer process's entry in the registry. `scopes`: the scopes whose holds it honours
    (default: its candidate locations'); `every_scope`: it honours every scope of the fleet (a
    kanban dispatcher gates cards of every profile), and reads them all for its reports."""

    def __init__(self, estop: Estop, component: str, *, interval: float, scopes: Sequence[str] | None = None,
                 every_scope: bool = False, monotonic: Callable[[], float] = time.monotonic,
                 extra: dict[str, Any] | None = None) -> None:
        self.estop = estop
        self.every_scope = every_scope
        self._monotonic = monotonic
        self._table: ConsumerTable | None = None
        self._written_at = float("-inf")
        self._problem: str | None = None
        self._lock = threading.Lock()
        now = estop.clock()
        pid = os.getpid()
        chosen = (ALL_SCOPES,) if every_scope else tuple(scopes) if scopes is not None \
            else tuple(loc.scope for loc in estop.locations)
        self.entry = ConsumerEntry(
            component=component, host=this_host(), pid=pid, pid_start=start_time(pid), home=str(estop.layout.home),
            profile=estop.layout.profile, scopes=chosen, version=__version__,
            interval=max(float(interval), MIN_REPORT_INTERVAL), registered_at=now, reported_at=now,
            extra=dict(extra or {}))
        self.registered = False

    def __repr__(self) -> str:
        return f"ConsumerReporter({self.entry.describe()!r})"

    def __enter__(self) -> ConsumerReporter:
        self.register()
        return self

    def __exit__(self, *exc: object) -> None:
        self.deregister()

    @property
    def table(self) -> ConsumerTable:
        if self._table is None:
            self._table = self.estop.fleet.consumers()
        return self._table

    def read(self) -> Snapshot:
        """What this consumer sees now: its own candidates, or every scope of the fleet."""
        return self.estop.fleet.read() if self.every_scope else self.estop.snapshot()

    def register(self) -> bool:
        """Enter the registry with a first report; True when written."""
        with self._lock:
            self.registered = True
        return self.report(force=True)

    def report(self, snapshot: Snapshot | None = None, *, force: bool = False) -> bool:
        """Report what this consumer sees (`snapshot`, default: one read now) when it changed,
        when `MIN_REPORT_INTERVAL` passed since the last report, or with `force`. True when a
        report was written; never raises."""
        if not self.registered:
            return False
        try:
            seen = snapshot if snapshot is not None else self.read()
            observed = observed_holds(seen)
            with self._lock:  # `deregister` takes it too: a report in flight never re-creates a removed entry
                if not self.registered:
                    return False
                due = self._monotonic() - self._written_at >= MIN_REPORT_INTERVAL
                if not (force or due or observed != self.entry.observed):
                    return False
                entry = self.entry.reported(self.estop.clock(), observed, "held" if seen.engaged else "proceed")
                self.table.put(entry)
                self.entry = entry
                self._written_at = self._monotonic()
        except Exception as exc:  # noqa: BLE001 - the registry never stops a consumer
            self._failed(exc)
            return False
        if self._problem is not None:
            logger.warning("%s: reporting to the consumer registry works again", self.entry.component)
            self._problem = None
        return True

    def publish(self, extra: dict[str, Any]) -> None:
        """Replace what this entry carries of its own (`extra`: a cron consumer's job table,
        `published_jobs`); the next report writes it, however soon."""
        with self._lock:
            self.entry = replace(self.entry, extra=dict(extra))
            self._written_at = float("-inf")

    def deregister(self) -> None:
        """Leave the registry (a consumer that stops is not lost, it is gone); never raises.
        Under the lock `report()` writes under, so a report in flight on another thread either
        lands before the removal or sees it and writes nothing (issue 32 item 11)."""
        with self._lock:
            if not self.registered:
                return
            self.registered = False
            try:
                self.table.remove(self.entry.key)
            except Exception as exc:  # noqa: BLE001 - stopping never fails on the registry
                self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        problem = one_line(exc)
        if problem != self._problem:
            logger.warning("%s: cannot report to the consumer registry: %s (it will show as stalled, then lost)",
                           self.entry.component, problem)
            self._problem = problem

    def run(self, stop: threading.Event) -> None:
        """Report every `MIN_REPORT_INTERVAL` until `stop` (for a consumer with no loop of its
        own to report from: a gateway serving turns), registered meanwhile."""
        with self:
            while not stop.wait(MIN_REPORT_INTERVAL / 4):
                self.report()

    def start(self, stop: threading.Event) -> threading.Thread:
        """`run(stop)` in a daemon thread."""
        thread = threading.Thread(target=self.run, args=(stop,), name=f"hermes-report-{self.entry.component}",
                                  daemon=True)
        thread.start()
        return thread
