"""`hermes serve`: the fleet's long-running loops in the foreground, until SIGINT or SIGTERM.

Each loop is a service with `name` and `run(stop: threading.Event)`; `build_services` lists them
(the window scheduler, and the cron ticker and kanban dispatcher when configured) and `run_services` runs each in its own thread, stops them all
cleanly on a signal (exit 0), and stops them all if one dies (exit 1). A line is logged for every
arm, retire and skip.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Annotated, Any, Callable, Protocol, Sequence

import typer

from ..errors import InvalidArgument
from ..text import printable
from ..estop import Estop
from ..timeutil import display_instant
from .common import current_estop, emit_json

__all__ = ["register", "Service", "build_services", "run_services", "STOP_TIMEOUT"]

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
    from ..consumers.service import configured_services
    from ..deadman import DeadmanService
    from ..notify.service import notify_services
    from ..windows.fetch import CalendarFetcher
    from ..windows.service import WindowService
    from ..windows.tasks import TaskService

    fleet = estop.fleet
    windows = WindowService(fleet, poll_interval=poll_interval, is_leader=fleet.leader_gate("windows", leader_poll))
    return [
        DeadmanService(fleet, interval=poll_interval),
        CalendarFetcher(fleet.root),
        windows,
        TaskService(fleet, ledger=windows.ledger, is_leader=windows.is_leader, poll_interval=poll_interval),
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


def _configure_logging(level: int) -> None:
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    logging.getLogger("hermes_estop").setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    if root.level > level or root.level == logging.NOTSET:
        root.setLevel(level)


def serve(
    interval: Annotated[float, typer.Option("--interval", help="Seconds between reconciliations (windows.toml edits are picked up this often).")] = 5.0,
    once: Annotated[bool, typer.Option("--once", help="Reconcile the windows once (arming/retiring as due), print the report, exit.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what the window scheduler would do now, change nothing, exit.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --once or --dry-run: machine-readable output.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug lines too.")] = False,
    cron_interval: Annotated[float, typer.Option("--cron-interval", help="Seconds between cron ticks (when this home has a job table).")] = 15.0,
    kanban_interval: Annotated[float, typer.Option("--kanban-interval", help="Seconds between kanban dispatch passes (when the fleet has a board).")] = 5.0,
    kanban_max: Annotated[int, typer.Option("--kanban-max", help="Kanban workers in flight at most.")] = 4,
    http: Annotated[str | None, typer.Option("--http", help="Also serve the status page, /metrics and /api/status (read-only) on ADDR:PORT, e.g. 127.0.0.1:9477.")] = None,
    http_allow_remote: Annotated[bool, typer.Option("--http-allow-remote", help="Allow --http on a non-loopback address.")] = False,
    http_write: Annotated[bool, typer.Option("--http-write", help="Serve the write API under /api/v1/ (needs a token: hermes tokens create); or `write = true` under [http] in estop.toml.")] = False,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert", metavar="PEM", help="Serve --http over TLS with this certificate chain.")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", metavar="PEM", help="The private key of --tls-cert.")] = None,
    insecure_http: Annotated[bool, typer.Option("--insecure-http", help="Allow --http-write on a non-loopback address without TLS (tokens travel in clear).")] = False,
) -> None:
    """Run the fleet's loops in the foreground until SIGINT/SIGTERM: the maintenance-window
    scheduler, and the cron ticker and kanban dispatcher when they are configured."""
    for flag, value in (("--interval", interval), ("--cron-interval", cron_interval),
                        ("--kanban-interval", kanban_interval)):
        if not 0.05 <= value <= 3600:
            raise InvalidArgument(f"invalid {flag} {value}: expected 0.05 to 3600 seconds")
    if not 1 <= kanban_max <= 256:
        raise InvalidArgument(f"invalid --kanban-max {kanban_max}: expected 1 to 256")
    if once and dry_run:
        raise InvalidArgument("give --once or --dry-run, not both")
    listen = None
    if http is not None:
        from ..observe.server import parse_listen, remote_warning

        if once or dry_run:
            raise InvalidArgument("--http serves while `hermes serve` runs: not with --once or --dry-run")
        listen = parse_listen(http, allow_remote=http_allow_remote)
        if remote_warning(listen[0]):
            typer.echo(f"hermes: warning: {remote_warning(listen[0])}", err=True)
    from ..api.transport import check_transport, configured_write

    if listen is not None and not http_write:
        http_write = configured_write(current_estop().layout.root)
    tls = check_transport(listen, http_write=http_write, tls_cert=tls_cert, tls_key=tls_key, insecure_http=insecure_http)
    _configure_logging(logging.DEBUG if verbose else logging.INFO)
    estop = current_estop()
    if once or dry_run:
        from ..windows.service import WindowService

        service = WindowService(estop.fleet, poll_interval=interval)
        service.windows_file.parse_each(service.windows_file.snapshot().raw)  # not TOML: one line, exit 2
        report = service.plan()[0] if dry_run else service.settle()
        if as_json:
            emit_json(report.to_json())
        else:
            _print_report(report)
        for failure in report.failed:  # the other windows were acted on; each bad one named, exit 2
            typer.echo(f"hermes: error: {printable(failure)}", err=True)
        raise typer.Exit(2 if report.failed else 0 if report.ok else 1)
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        http_server = None
        if listen is not None:
            from ..observe.server import StatusServer, attach

            from ..api.transport import write_api

            api = write_api(estop, listen[0], http_write=http_write, tls=tls)
            http_server = StatusServer(estop, *listen, api=api, tls=tls)  # bound now: a busy port is exit 2 before anything runs
            api.status_document = http_server.status_json
        services = build_services(estop, poll_interval=interval, cron_interval=cron_interval,
                                  kanban_interval=kanban_interval, kanban_max=kanban_max)
        logger.info("serve: running %s for fleet %s (store %s); stop with Ctrl-C or SIGTERM",
                    ", ".join(s.name for s in services), estop.layout.root, estop.fleet.backend)
        if http_server is not None:
            services.append(attach(http_server, services))
        code = run_services(services, stop)
    finally:
        restore()
    from ..observe.status import standing_line

    logger.info("serve: stopped; %s", standing_line(estop))
    raise typer.Exit(code)


def _print_report(report: Any) -> None:
    what = "would do" if report.dry_run else "did"
    typer.echo(f"windows at {display_instant(report.now)}: {report.windows} window(s); "
               f"{'leader' if report.leader else 'standby (not the leader)'}")
    for key in report.active:
        typer.echo(f"  active   {key}")
    if not report.events:
        typer.echo(f"  {what} nothing")
    for event in report.events:
        typer.echo(f"  {what}  {event.describe()}")
    for job_id, when in sorted(report.wakeups.items(), key=lambda kv: kv[1]):
        typer.echo(f"  wake     {display_instant(when)}  {job_id}")
    for error in report.errors:
        typer.echo(f"  error    {printable(error)}")
    for failure in report.failed:
        typer.echo(f"  failed   {printable(failure)}")


def register(app: typer.Typer) -> None:
    """Add `hermes serve` to `app`."""
    app.command("serve")(serve)
