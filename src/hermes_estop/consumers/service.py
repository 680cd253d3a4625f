"""The consumers as long-running services, for `hermes serve` to run side by side.

Each service is an object with a `name` and `run(stop)`: it loops until the `threading.Event`
`stop` is set. The loop around a `tick(now)` paces itself with `time.monotonic` and skips the
ticks it missed (a tick that overran, a suspended laptop) instead of bursting to catch up: the
consumers coalesce missed work themselves. The wall clock is read once per tick, from the
`Estop`'s clock, and passed down.

On stop a service waits a little (`drain_timeout`) for the workers it started, to record their
results; workers still running are never killed.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any, Callable

from ..errors import InvalidArgument
from ..estop import Estop
from ..timeutil import Clock

__all__ = [
    "LoopService",
    "CronService",
    "KanbanService",
    "GatewayService",
    "configured_services",
    "next_deadline",
]

logger = logging.getLogger("hermes_estop.service")


def next_deadline(deadline: float, interval: float, current: float) -> tuple[float, int]:
    """The next tick's monotonic deadline after the one at `deadline`, and how many ticks were
    missed: deadlines already in the past at `current` are skipped, never run in a burst."""
    deadline += interval
    if current < deadline:
        return deadline, 0
    missed = int((current - deadline) // interval) + 1
    return deadline + missed * interval, missed


def _interval(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise InvalidArgument(f"invalid {what} interval {value!r}: expected seconds between 0 and 86400")
    return float(value)


class LoopService:
    """`tick(now)` every `interval` seconds until stopped."""

    def __init__(self, name: str, tick: Callable[[datetime], Any], *, interval: float, clock: Clock,
                 on_stop: Callable[[], Any] | None = None, monotonic: Callable[[], float] = time.monotonic,
                 log: logging.Logger | None = None) -> None:
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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, interval={self.interval:g})"

    def tick(self, now: datetime | None = None) -> Any:
        """One tick at `now` (default: the clock); a failing tick is logged, never raised, so one
        bad pass does not end the service."""
        now = self.clock() if now is None else now
        try:
            report = self._tick(now)
        except Exception:
            self.log.exception("%s: tick at %s failed", self.name, now.isoformat())
            return None
        self.ticks += 1
        self.last_report = report
        self.report(report)
        return report

    def report(self, report: Any) -> None:
        """Log what a tick did; subclasses say it in their own words."""

    def run(self, stop: threading.Event) -> None:
        self.log.info("%s: started (every %gs)", self.name, self.interval)
        deadline = self._monotonic()
        try:
            while not stop.is_set():
                self.tick()
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
            self.log.info("%s: stopped", self.name)


class CronService(LoopService):
    """Ticks the cron table of `estop`'s home (`CronRunner`), without waiting for the jobs it
    starts: a long job never delays the other jobs' ticks."""

    def __init__(self, estop: Estop, *, interval: float = 15.0, drain_timeout: float = 10.0,
                 name: str = "cron", monotonic: Callable[[], float] = time.monotonic) -> None:
        from .cron import CronRunner

        self.estop = estop
        self.runner = CronRunner(estop)
        self.drain_timeout = drain_timeout
        super().__init__(name, lambda now: self.runner.tick(now, wait=False), interval=interval,
                         clock=estop.clock, on_stop=lambda: self.runner.drain(self.drain_timeout),
                         monotonic=monotonic)

    def report(self, report: Any) -> None:
        if report.held:
            self.estop.check_paused(self.name, self.log)
        for name in report.started:
            self.log.info("%s: started job %s", self.name, name)
        for run in report.finished:
            level = logging.INFO if run.result.ok else logging.WARNING
            self.log.log(level, "%s: job %s %s%s", self.name, run.name, run.result.status,
                         f" ({run.result.detail})" if run.result.detail else "")


class KanbanService(LoopService):
    """Dispatch passes over the fleet's board (`Dispatcher`), at most `max_workers` in flight."""

    def __init__(self, estop: Estop, *, interval: float = 5.0, max_workers: int = 4,
                 timeout: timedelta | str = timedelta(hours=1), drain_timeout: float = 10.0,
                 name: str = "kanban", monotonic: Callable[[], float] = time.monotonic) -> None:
        from .kanban import Dispatcher

        self.estop = estop
        self.dispatcher = Dispatcher(estop, max_workers=max_workers, timeout=timeout)
        self.drain_timeout = drain_timeout
        super().__init__(name, lambda now: self.dispatcher.tick(now), interval=interval, clock=estop.clock,
                         on_stop=lambda: self.dispatcher.drain(self.drain_timeout), monotonic=monotonic)

    def report(self, report: Any) -> None:
        if report.held:
            self.estop.check_paused(self.name, self.log)
        for card_id in report.spawned:
            self.log.info("%s: spawned card %d", self.name, card_id)
        for run in report.finished:
            level = logging.INFO if run.result.ok else logging.WARNING
            self.log.log(level, "%s: card %d %s", self.name, run.id, "done" if run.result.ok else run.result.detail)
        for card_id in report.lost:
            self.log.warning("%s: card %d lost (its dispatcher stopped before recording it)", self.name, card_id)


class GatewayService:
    """The loopback line server of a `Gateway`, served until stopped."""

    def __init__(self, gateway: Any, *, host: str = "127.0.0.1", port: int = 0, name: str = "gateway") -> None:
        from .gateway import LineServer

        self.name = name
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
        try:
            stop.wait()
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join()


def configured_services(estop: Estop, *, cron_interval: float = 15.0, kanban_interval: float = 5.0,
                        kanban_max: int = 4) -> list[LoopService]:
    """The consumer loops this home is configured for: the cron ticker when the home has a job
    table, the kanban dispatcher when the fleet has a board."""
    from .cron import CronTable
    from .kanban import Board

    services: list[LoopService] = []
    if CronTable.of(estop).exists():
        services.append(CronService(estop, interval=cron_interval))
    if Board(estop.layout.root).exists():
        services.append(KanbanService(estop, interval=kanban_interval, max_workers=kanban_max))
    return services
