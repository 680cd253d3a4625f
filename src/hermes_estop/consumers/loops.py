"""The consumers as long-running services, for `hermes serve` to run side by side.

Each service is an object with a `name` and `run(stop)`: it loops until the `threading.Event`
`stop` is set. The loop around a `tick(now)` paces itself with `time.monotonic` and skips the
ticks it missed (a tick that overran, a suspended laptop) instead of bursting to catch up: the
consumers coalesce missed work themselves. The wall clock is read once per tick, from the
`Estop`'s clock, and passed down.

On stop a service waits a little (`drain_timeout`) for the workers it started, to record their
results; workers still running are never killed.

A tick that fails (a damaged `kanban.db` or `cron/jobs.json`, a FIFO planted there) is logged in
ONE line when the problem starts and one when it clears, not once per tick; the traceback only
under `HERMES_DEBUG=1`, or once for an error that is not an outage of a file or the database
(a bug should be seen with its traceback, but not every second).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.consumers.cron import CronRunner, CronTable
from hermes_estop.consumers.gateway import LineServer
from hermes_estop.consumers.kanban import Board, Dispatcher
from hermes_estop.consumers.pass_report import PassReport, log_pass
from hermes_estop.consumers.published_jobs import published
from hermes_estop.consumers.reporter import ConsumerReporter
from hermes_estop.fleet.registry.entries import MIN_REPORT_INTERVAL
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, next_deadline
from hermes_estop.process.estop import Estop
from hermes_estop.system.processes import wait_until_set

__all__ = [
    "CronService",
    "GatewayService",
    "KanbanService",
    "LoopService",
    "configured_services",
    "debug_enabled",
    "next_deadline",
]

logger = logging.getLogger("hermes_estop.service")


#: errors that are outages of what a tick reads (a damaged or planted file, the database):
#: logged as one line, their traceback only under HERMES_DEBUG=1
_OUTAGES = (EstopError, OSError, sqlite3.Error)


def debug_enabled() -> bool:
    """`HERMES_DEBUG=1` (any value but empty or 0): log tracebacks too."""
    return os.environ.get("HERMES_DEBUG", "") not in ("", "0")


def _interval(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise InvalidArgument(f"invalid {what} interval {value!r}: expected seconds between 0 and 86400")
    return float(value)


class LoopService:
    """`tick(now)` every `interval` seconds until stopped."""

    #: the consumer's `Estop`, when it has one: held passes are logged once per engagement through it
    estop: Estop | None = None
    #: whether this service honours every scope of the fleet (reported so to the registry)
    every_scope = False
    #: its entry in the consumer registry while it runs (a service with an `estop` registers)
    reporter: ConsumerReporter | None = None

    def __init__(self, name: str, tick: Callable[[datetime], Any], *, interval: float, clock: Clock,
                 on_stop: Callable[[], Any] | None = None, monotonic: Callable[[], float] = time.monotonic,
                 log: logging.Logger | None = None, debug: bool | None = None) -> None:
        self.name = name
        self.interval = _interval(interval, name)
        self.clock = clock
        self._tick = tick
        self._on_stop = on_stop
        self._monotonic = monotonic
        self.log = log or logger
        self.ticks = 0
        self.missed = 0
        self.last_report: Any = None
        self.debug = debug_enabled() if debug is None else debug
        #: the one-line description of the problem that makes ticks fail, while it lasts
        self.problem: str | None = None
        #: called with (name, report) after every pass (`hermes serve --http` counts held work)
        self.observers: list[Callable[[str, Any], None]] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, interval={self.interval:g})"

    def tick(self, now: datetime | None = None) -> Any:
        """One tick at `now` (default: the clock); a failing tick is logged, never raised, so one
        bad pass does not end the service."""
        now = self.clock() if now is None else now
        try:
            report = self._tick(now)
        except Exception as exc:  # noqa: BLE001 - one bad pass never ends the service; logged by _failed
            self._failed(exc)
            return None
        if self.problem is not None:
            self.log.warning("%s: recovered (was: %s)", self.name, self.problem)
            self.problem = None
        self.ticks += 1
        self.last_report = report
        self.report(report)
        for observer in self.observers:
            observer(self.name, report)
        return report

    def _failed(self, exc: Exception) -> None:
        """One line when a problem starts (or changes), nothing while it lasts."""
        outage = isinstance(exc, _OUTAGES)
        problem = one_line(exc) if outage else f"{type(exc).__name__}: {one_line(exc)}"
        if problem == self.problem:
            if self.debug:
                self.log.debug("%s: tick failed again", self.name, exc_info=exc)
            return
        self.problem = problem
        self.log.error("%s: ticks fail: %s (retrying every %gs; logged again when it changes or clears)",
                       self.name, problem, self.interval, exc_info=exc if self.debug or not outage else None)

    def report(self, report: Any) -> None:
        """Log what a pass did: held once per engagement, each start, each recorded result."""
        if isinstance(report, PassReport):
            if report.held and self.estop is not None:
                self.estop.check_paused(self.name, self.log)
            log_pass(self.log, self.name, report)

    def registration(self) -> ConsumerReporter | None:
        """This service's entry in the consumer registry, or None for a loop without an `estop`."""
        if self.estop is None:
            return None
        return ConsumerReporter(self.estop, self.name, interval=self.interval, every_scope=self.every_scope,
                                monotonic=self._monotonic)

    def run(self, stop: threading.Event) -> None:
        self.log.info("%s: started (every %gs)", self.name, self.interval)
        deadline = self._monotonic()
        self.reporter = self.registration()
        if self.reporter is not None:
            self.reporter.register()
        try:
            while not stop.is_set():
                self.tick()
                if self.reporter is not None:
                    self.reporter.report()
                current = self._monotonic()
                deadline, missed = next_deadline(deadline, self.interval, current)
                if missed:
                    self.missed += missed
                    self.log.info("%s: skipped %d missed tick(s)", self.name, missed)
                stop.wait(max(0.0, deadline - current))
        finally:
            if self._on_stop is not None:
                try:
                    self._on_stop()
                except Exception:
                    self.log.exception("%s: stopping failed", self.name)
            if self.reporter is not None:
                self.reporter.deregister()
            self.log.info("%s: stopped", self.name)


class CronService(LoopService):
    """Ticks the cron table of `estop`'s home (`CronRunner`), without waiting for the jobs it
    starts: a long job never delays the other jobs' ticks."""

    def __init__(self, estop: Estop, *, interval: float = 15.0, drain_timeout: float = 10.0,
                 name: str = "cron", monotonic: Callable[[], float] = time.monotonic,
                 debug: bool | None = None) -> None:
        self.estop = estop
        self.runner = CronRunner(estop, monotonic=monotonic)
        self.drain_timeout = drain_timeout
        #: the table's (mtime, size) when its jobs were last published in the registry entry
        self._published: tuple[int, int] | None = None
        super().__init__(name, lambda now: self._publish(self.runner.tick(now, wait=False)), interval=interval,
                         clock=estop.clock, on_stop=lambda: self.runner.drain(self.drain_timeout),
                         monotonic=monotonic, debug=debug)


    def _publish(self, report: Any) -> Any:
        """After a tick: the table's jobs in this consumer's registry entry when the table changed
        (issue 47: `windows impact` on another host of the fleet sees them); never raises."""
        if self.reporter is None:
            return report
        try:
            stat = os.stat(self.runner.table.path)
            seen = (stat.st_mtime_ns, stat.st_size)
            if seen != self._published:
                self.reporter.publish(published(self.runner.table.jobs()))
                self._published = seen
        except Exception:  # noqa: BLE001, S110 - an unreadable table is the tick's to report; tried again next tick
            pass
        return report


class KanbanService(LoopService):
    """Dispatch passes over the fleet's board (`Dispatcher`), at most `max_workers` in flight."""

    every_scope = True  # it gates the cards of every profile

    def __init__(self, estop: Estop, *, interval: float = 5.0, max_workers: int = 4,
                 timeout: timedelta | str = timedelta(hours=1), drain_timeout: float = 10.0,
                 name: str = "kanban", monotonic: Callable[[], float] = time.monotonic,
                 debug: bool | None = None) -> None:
        self.estop = estop
        self.dispatcher = Dispatcher(estop, max_workers=max_workers, timeout=timeout, monotonic=monotonic)
        self.drain_timeout = drain_timeout
        super().__init__(name, lambda now: self.dispatcher.tick(now), interval=interval, clock=estop.clock,
                         on_stop=lambda: self.dispatcher.drain(self.drain_timeout), monotonic=monotonic,
                         debug=debug)

    def report(self, report: Any) -> None:
        super().report(report)
        for card_id in report.lost:
            self.log.warning("%s: card %d lost (its dispatcher stopped before recording it)", self.name, card_id)


class GatewayService:
    """The loopback line server of a `Gateway`, served until stopped."""

    def __init__(self, gateway: Any, *, host: str = "127.0.0.1", port: int = 0, name: str = "gateway") -> None:
        self.name = name
        self.gateway = gateway
        self.server = LineServer(gateway, host, port)

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    def run(self, stop: threading.Event) -> None:
        thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                  name=f"{self.name}-server", daemon=True)
        thread.start()
        host, port = self.address
        logger.info("%s: listening on %s:%d", self.name, host, port)
        reporting = threading.Event()
        # a turn names any profile: the gateway honours every scope
        reporter = ConsumerReporter(self.gateway.estop, self.name, interval=MIN_REPORT_INTERVAL, every_scope=True)
        reports = reporter.start(reporting)
        try:
            wait_until_set(stop)
        finally:
            reporting.set()
            reports.join(5.0)
            self.server.shutdown()
            self.server.server_close()
            thread.join()


def configured_services(estop: Estop, *, cron_interval: float = 15.0, kanban_interval: float = 5.0,
                        kanban_max: int = 4) -> list[LoopService]:
    """The consumer loops this home is configured for: the cron ticker when the home has a job
    table, the kanban dispatcher when the fleet has a board."""
    services: list[LoopService] = []
    if CronTable.of(estop).exists():
        services.append(CronService(estop, interval=cron_interval))
    if Board(estop.layout.root).exists():
        services.append(KanbanService(estop, interval=kanban_interval, max_workers=kanban_max))
    return services
