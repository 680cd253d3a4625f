"""`hermes serve`: the fleet's long-running loops in the foreground, until SIGINT or SIGTERM.

This module parses the options and prints; the daemon is assembled and supervised in
`hermes_estop.daemon.supervisor` (`serve`, and `serve_once` for `--once` / `--dry-run`). A line
is logged for every arm, retire and skip.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer

from hermes_estop.api.transport import check_transport, configured_write
from hermes_estop.cli.command_io import current_estop, emit_json
from hermes_estop.daemon.supervisor import serve as run_serve, serve_once
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.observe.server import parse_listen, remote_warning
from hermes_estop.process.estop import Estop

__all__ = ["register"]


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
    _check_pacing(interval, cron_interval, kanban_interval, kanban_max)
    if once and dry_run:
        raise InvalidArgument("give --once or --dry-run, not both")
    listen = None
    if http is not None:
        if once or dry_run:
            raise InvalidArgument("--http serves while `hermes serve` runs: not with --once or --dry-run")
        listen = parse_listen(http, allow_remote=http_allow_remote)
        if remote_warning(listen[0]):
            typer.echo(f"hermes: warning: {remote_warning(listen[0])}", err=True)

    if listen is not None and not http_write:
        http_write = configured_write(current_estop().layout.root)
    tls = check_transport(listen, http_write=http_write, tls_cert=tls_cert, tls_key=tls_key, insecure_http=insecure_http)
    _configure_logging(logging.DEBUG if verbose else logging.INFO)
    estop = current_estop()
    if once or dry_run:
        raise typer.Exit(_reconcile_once(estop, interval, dry_run=dry_run, as_json=as_json))
    raise typer.Exit(run_serve(estop, poll_interval=interval, cron_interval=cron_interval, kanban_interval=kanban_interval,
                               kanban_max=kanban_max, listen=listen, http_write=http_write, tls=tls))


def _check_pacing(interval: float, cron_interval: float, kanban_interval: float, kanban_max: int) -> None:
    for flag, value in (("--interval", interval), ("--cron-interval", cron_interval),
                        ("--kanban-interval", kanban_interval)):
        if not 0.05 <= value <= 3600:
            raise InvalidArgument(f"invalid {flag} {value}: expected 0.05 to 3600 seconds")
    if not 1 <= kanban_max <= 256:
        raise InvalidArgument(f"invalid --kanban-max {kanban_max}: expected 1 to 256")


def _reconcile_once(estop: Estop, interval: float, *, dry_run: bool, as_json: bool) -> int:
    """`--once` / `--dry-run`: one reconciliation (or its plan), printed; the exit status."""
    report, retired = serve_once(estop, interval, dry_run=dry_run)
    if as_json:
        emit_json({**report.to_json(), "retired": [_retired_json(reading) for reading in retired]})
    else:
        for reading in retired:
            typer.echo(f"retired  {_retired_line(reading)}")
        _print_report(report)
    for failure in report.failed:  # the other windows were acted on; each bad one named, exit 2
        typer.echo(f"hermes: error: {printable(failure)}", err=True)
    return 2 if report.failed else 0 if report.ok else 1


def _retired_json(reading: Reading) -> dict[str, Any]:
    hold = reading.hold
    return {"scope": reading.location.scope, "generation": reading.fence.describe() if reading.fence else None,
            "hold": hold.hold_id if hold is not None else None,
            "expires_at": format_instant(hold.expires_at) if hold is not None and hold.expires_at else None}


def _retired_line(reading: Reading) -> str:
    """One expired hold the deadman pass retired, as `--once` reports it."""
    hold = reading.hold
    scoped = f" scoped hold {hold.scope_label}" if hold is not None and hold.selector is not None else ""
    expired = display_instant(hold.expires_at) if hold is not None and hold.expires_at is not None else "?"
    generation = reading.fence.describe() if reading.fence else "?"
    return printable(f"{reading.location.describe()}{scoped} (generation {generation}): expired at {expired}")


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
