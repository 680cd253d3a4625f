"""What `hermes serve` assembles and supervises: every long-running loop of the fleet.

Each loop is a service with `name` and `run(stop: threading.Event)`; `build_services` lists them
(the window scheduler, and the cron ticker and kanban dispatcher when configured) and `run_services`
runs each in its own thread, stops them all cleanly on a signal (exit 0), and stops them all if one
dies (exit 1). `hermes serve` (cli/serve.py) parses its options, prints, and calls these.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Protocol
from collections.abc import Callable, Sequence

from hermes_estop.process.estop import Estop
from hermes_estop.consumers.loops import configured_services
from hermes_estop.fleet.deadman import DeadmanService
from hermes_estop.notify.notifier import notify_services
from hermes_estop.windows.fetch import CalendarFetcher
from hermes_estop.windows.scheduler import WindowService
from hermes_estop.windows.tasks import TaskService

__all__ = ["Service", "build_services", "run_services", "stop_on_signals", "STOP_TIMEOUT"]

logger = logging.getLogger("hermes_estop.serve")

#: how long a service may take to wind down after stop is set
STOP_TIMEOUT = 15.0


class Service(Protocol):
    """A long-running loop: returns when `stop` is set (promptly), raises only when broken."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


def build_services(estop: Estop, *, poll_interval: float, cron_interval: float = 15.0,
                   kanban_interval: float = 5.0, kanban_max: int = 4,
                   leader_poll: float | None = None) -> list[Service]:
    """Every loop `hermes serve` runs: the deadman (every expired hold of the fleet retired and
    announced within `poll_interval`, at most a second, of its deadman), the calendar fetcher
    (`[[calendars]]` feeds) and the window scheduler always (on a shared store, the scheduler only
    while this process is the elected one) with the windows' tasks (`run = [...]`, run by the
    elected scheduler); the cron ticker when this home has a job table and the kanban dispatcher when the fleet has a
    board (when configured at start-up); the notifier when targets are configured. The
    fleet-wide ones take the fleet; the consumers gate through `estop`, this process's view."""
    fleet = estop.fleet
    windows = WindowService(fleet, poll_interval=poll_interval, is_leader=fleet.leader_gate("windows", leader_poll))
    return [
        DeadmanService(fleet, interval=poll_interval),
        CalendarFetcher(fleet.root),
        windows,
        TaskService(fleet, ledger=windows.ledger, is_leader=windows.is_leader, poll_interval=poll_interval,
                    scheduler_logs_file=True),  # one problem of windows.toml, one line: the scheduler's
        *configured_services(estop, cron_interval=cron_interval, kanban_interval=kanban_interval,
                             kanban_max=kanban_max),
        *notify_services(fleet, leader_poll),
    ]


def run_services(services: Sequence[Service], stop: threading.Event, *,
                 stop_timeout: float = STOP_TIMEOUT) -> int:
    """Run `services` until `stop` is set (by a signal or by one of them dying); 0 when they all
    stopped cleanly, 1 when one failed or would not stop."""
    failed: list[str] = []

    def guard(service: Service) -> None:
        try:
            service.run(stop)
        except BaseException:
            logger.exception("serve: %s failed; stopping everything", service.name)
            failed.append(service.name)
        finally:
            if not stop.is_set():
                if service.name not in failed:
                    logger.error("serve: %s returned before stop; stopping everything", service.name)
                    failed.append(service.name)
                stop.set()

    threads = [threading.Thread(target=guard, args=(s,), name=f"hermes-serve-{s.name}", daemon=True)
               for s in services]
    for thread in threads:
        thread.start()
    while not stop.wait(0.5):
        pass
    for thread in threads:
        thread.join(stop_timeout)
        if thread.is_alive():
            logger.error("serve: %s did not stop within %gs", thread.name, stop_timeout)
            failed.append(thread.name)
    return 1 if failed else 0


def stop_on_signals(stop: threading.Event, what: str = "serve") -> Callable[[], None]:
    """Set `stop` on SIGINT or SIGTERM; returns the function that restores the previous handlers.

    Installed explicitly, for both, even where the process inherited SIGINT ignored (a daemon
    started with `nohup ... &`): an operator or a supervisor that signals a server expects it to
    stop cleanly, not to be left running or killed mid-write."""
    def handler(signum: int, _frame: Any) -> None:
        logger.info("%s: %s received, stopping", what, signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
