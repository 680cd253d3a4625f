"""What `hermes serve` assembles and supervises: every long-running loop of the fleet.

Each loop is a service with `name` and `run(stop: threading.Event)`; `build_services` lists them
(the window scheduler, and the cron ticker and kanban dispatcher when configured) and `run_services`
runs each in its own thread, stops them all cleanly on a signal (exit 0), and stops them all if one
dies (exit 1). `serve` assembles them with the status page and the write API; `serve_once` is
`hermes serve --once`. `hermes serve` (cli/serve.py) parses its options, prints, and calls these.
"""

from __future__ import annotations

import logging
import signal
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hermes_estop.api.page_actions import PageActions
from hermes_estop.api.transport import write_api
from hermes_estop.consumers.gateway import Gateway, LineServer
from hermes_estop.consumers.loops import configured_services
from hermes_estop.consumers.reporter import ConsumerReporter
from hermes_estop.fleet.deadman import DeadmanService
from hermes_estop.fleet.registry.entries import MIN_REPORT_INTERVAL
from hermes_estop.model.hold import Reading
from hermes_estop.notify.notifier import notify_services
from hermes_estop.observe.impact_preview import arm_impact, arming_soon
from hermes_estop.observe.page import PAGE_CSS
from hermes_estop.observe.server import StatusServer, attach
from hermes_estop.observe.starvation_watch import StarvationWatch
from hermes_estop.observe.status import standing_line
from hermes_estop.process.estop import Estop
from hermes_estop.system.processes import wait_until_set
from hermes_estop.windows.fetch import CalendarFetcher
from hermes_estop.windows.scheduler import TickReport, WindowService
from hermes_estop.windows.tasks import TaskService

__all__ = ["Service", "build_services", "run_services", "serve", "serve_gateway", "serve_once", "stop_on_signals", "STOP_TIMEOUT"]

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
    board (when configured at start-up); the notifier when targets are configured; the starvation
    watch (a cron job the windows never let run on its schedule, logged once). The
    fleet-wide ones take the fleet; the consumers gate through `estop`, this process's view."""
    fleet = estop.fleet
    windows = WindowService(fleet, poll_interval=poll_interval, is_leader=fleet.leader_gate("windows", leader_poll))
    return [
        DeadmanService(fleet, interval=poll_interval),
        CalendarFetcher(fleet.root),
        windows,
        TaskService(fleet, ledger=windows.ledger, is_leader=windows.is_leader, poll_interval=poll_interval,
                    schedules=windows.schedules),  # one compiled schedule, and its file's problems logged once
        *configured_services(estop, cron_interval=cron_interval, kanban_interval=kanban_interval,
                             kanban_max=kanban_max),
        *notify_services(fleet, leader_poll, enrich=arm_impact(estop), upcoming=arming_soon(estop)),
        StarvationWatch(estop, is_leader=windows.is_leader),
    ]


def serve(estop: Estop, *, poll_interval: float, cron_interval: float = 15.0, kanban_interval: float = 5.0,
          kanban_max: int = 4, listen: tuple[str, int] | None = None, http_write: bool = False,
          tls: ssl.SSLContext | None = None) -> int:
    """`hermes serve`: every service `build_services` lists, and with `listen` the status page,
    /metrics and /api/status (with `http_write`, the write API) on that address, until SIGINT or
    SIGTERM; the exit status (`run_services`). A busy port is `InvalidArgument` (exit 2) before
    anything runs."""
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        http_server = None
        if listen is not None:
            api = write_api(estop, listen[0], http_write=http_write, tls=tls)
            # the status page serves the write API and its forms, assembled here (it imports neither)
            actions = PageActions(api, tls=tls is not None, css=PAGE_CSS) if api.write else None
            # bound now: a busy port is exit 2 before anything runs
            http_server = StatusServer(estop, *listen, api=api, actions=actions, tls=tls)
            api.status_document = http_server.api_status_json
        services = build_services(estop, poll_interval=poll_interval, cron_interval=cron_interval,
                                  kanban_interval=kanban_interval, kanban_max=kanban_max)
        logger.info("serve: running %s for fleet %s (store %s); stop with Ctrl-C or SIGTERM",
                    ", ".join(s.name for s in services), estop.layout.root, estop.fleet.store_name)
        if http_server is not None:
            services.append(attach(http_server, services))
        code = run_services(services, stop)
    finally:
        restore()
    logger.info("serve: stopped; %s", standing_line(estop))
    return code


def serve_once(estop: Estop, poll_interval: float, *, dry_run: bool) -> tuple[TickReport, list[Reading]]:
    """`hermes serve --once`: the deadman pass a running serve runs (every expired hold of the
    fleet retired; none by `dry_run`), then one pass of the window scheduler (`dry_run`: its
    plan, nothing changed), the compiled schedule left warm for the next operator command.
    Returns the windows' report and the holds retired; `EstopError` for a windows file that is
    not TOML."""
    service = WindowService(estop.fleet, poll_interval=poll_interval)
    service.check_file()
    retired = [] if dry_run else DeadmanService(estop.fleet).tick().retired
    report = service.plan()[0] if dry_run else service.settle()  # a pass leaves the schedule warm
    return report, retired


def serve_gateway(gateway: Gateway, server: LineServer) -> None:
    """`hermes gateway serve`: `server` (bound) answers its lines in a thread, and the gateway
    reports to the consumer registry from another, until SIGINT or SIGTERM (or the server
    stops); both are stopped and the socket closed before this returns."""
    stop = threading.Event()
    restore = stop_on_signals(stop, "gateway")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="gateway", daemon=True)
    thread.start()
    reporting = threading.Event()
    reports = ConsumerReporter(gateway.estop, "gateway", interval=MIN_REPORT_INTERVAL, every_scope=True).start(reporting)
    try:
        while thread.is_alive() and not stop.wait(0.5):
            pass
    finally:
        reporting.set()
        reports.join(5.0)
        if thread.is_alive():
            server.shutdown()
        server.server_close()
        restore()


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
    wait_until_set(stop)
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
