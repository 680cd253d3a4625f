"""`hermes cron | kanban | gateway`: the reference consumers, gated by the shared predicate.

The consumer modules (croniter, sqlite3, socketserver) are imported inside the commands, so the
rest of the CLI stays cheap to start.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from hermes_estop.cli import drain
from hermes_estop.cli.command_io import JsonOpt, current_estop, emit_json, fail, new_app
from hermes_estop.consumers.cron import CronRunner, CronTable
from hermes_estop.consumers.gateway import Gateway, LineServer, is_loopback
from hermes_estop.consumers.kanban import Board, Dispatcher
from hermes_estop.daemon.supervisor import serve_gateway
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_relative

if TYPE_CHECKING:
    from hermes_estop.consumers.cron import CronReport
    from hermes_estop.consumers.kanban import DispatchReport

__all__ = ["cron_app", "gateway_app", "kanban_app", "register"]

OwnerOpt = Annotated[str | None, typer.Option("--owner", help="The user id that owns the work (the gate's principal).")]
TimeoutOpt = Annotated[str | None, typer.Option("--timeout", help="Stop a run that takes longer (90s, 10m, 1h). Default 1h.")]


cron_app = new_app("cron", "The cron job table of this home: jobs run on their schedule unless gated.")
kanban_app = new_app("kanban", "The fleet's kanban board: a dispatch pass spawns workers for ready cards unless gated.")
gateway_app = new_app("gateway", "The chat turn gate and its loopback line server.")


def _when(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "-"
    return f"{display_instant(value)} ({format_relative(value, now)})"


def _emit_pass(report: CronReport | DispatchReport, as_json: bool) -> None:
    """A pass's report: its JSON, or its lines for a person (escaped)."""
    if as_json:
        emit_json(report.to_json())
        return
    for line in report.lines():
        typer.echo(line)


# -- cron ------------------------------------------------------------------------------------

@cron_app.command("add")
def cron_add(
    name: Annotated[str, typer.Argument(help="A unique job name.")],
    command: Annotated[str, typer.Option("--command", help="The shell command to run.")],
    cron: Annotated[str | None, typer.Option("--cron", help="5-field cron expression, e.g. '*/15 * * * *'.")] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone the expression is read in.")] = "UTC",
    at: Annotated[str | None, typer.Option("--at", help="Run once at this ISO-8601 time instead.")] = None,
    owner: OwnerOpt = None,
    profile: Annotated[str | None, typer.Option("--profile", help="The profile the job is for (default: this home's).")] = None,
    timeout: TimeoutOpt = None,
    no_overlap_window: Annotated[bool, typer.Option("--no-overlap-window", help="Do not start a run that a hold or window would cut off: before each run, forecast [now, now + --timeout) and hold the run if any instant is held. Needs --timeout.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a job: `hermes cron add NAME --cron EXPR [--tz ZONE] --command CMD [--owner ID]`."""
    estop = current_estop()
    now = estop.clock()
    job = CronTable.of(estop).add(name, command, now=now, schedule=cron, timezone=tz, at=at, owner=owner,
                                  profile=profile if profile is not None else estop.layout.profile,
                                  timeout=timeout, no_overlap_window=no_overlap_window)
    if as_json:
        emit_json(job.to_json())
        return
    what = f"{job.schedule} ({job.timezone})" if job.schedule else "once"
    guard = ", not started when a hold or window would cut it off within its timeout" if job.no_overlap_window else ""
    typer.echo(f"added cron job {job.name}: {what}, next run {_when(job.next_run_at, now)}{guard}")


@cron_app.command("list")
def cron_list(as_json: JsonOpt = False) -> None:
    """The jobs of this home, their next run and their last result."""
    estop = current_estop()
    table = CronTable.of(estop)
    jobs = table.jobs()
    if as_json:
        emit_json({"table": str(table.path), "jobs": [job.to_json() for job in jobs]})
        return
    if not jobs:
        typer.echo(f"no cron jobs ({table.path})")
        return
    now = estop.clock()
    for job in jobs:
        what = f"{job.schedule} ({job.timezone})" if job.schedule else f"once at {display_instant(job.at)}"
        last = f"{job.last.status} at {display_instant(job.last.finished_at)}" if job.last else "never run"
        if job.running(now):
            last += "; running now"
        who = f"owner {job.owner or '-'}, profile {job.profile or '-'}"
        typer.echo(printable(f"{job.name}: {what}; next {_when(job.next_run_at, now)}; {who}; last {last}"))
        typer.echo(printable(f"    $ {job.command}"))


@cron_app.command("remove")
def cron_remove(name: Annotated[str, typer.Argument(help="The job to remove.")]) -> None:
    """Remove a job (a run in flight finishes; its result is not recorded)."""
    job = CronTable.of(current_estop()).remove(name)
    typer.echo(f"removed cron job {job.name}")


@cron_app.command("tick")
def cron_tick(as_json: JsonOpt = False) -> None:
    """One tick now: run every due job the gate lets through, wait for them, record the results."""
    _emit_pass(CronRunner(current_estop()).tick(wait=True), as_json)


# -- kanban ----------------------------------------------------------------------------------

@kanban_app.command("add")
def kanban_add(
    title: Annotated[str, typer.Argument(help="What the card is.")],
    command: Annotated[str, typer.Option("--command", help="The shell command its worker runs.")],
    owner: OwnerOpt = None,
    profile: Annotated[str | None, typer.Option("--profile", help="The assignee profile.")] = None,
    ready: Annotated[bool, typer.Option("--ready", help="Ready for dispatch now (default: todo).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a card to the fleet's board."""
    estop = current_estop()
    card = Board(estop.layout.root, clock=estop.clock).add(title, command, owner=owner, profile=profile, ready=ready)
    if as_json:
        emit_json(card.to_json())
        return
    typer.echo(printable(f"added card #{card.id} ({card.status}): {card.title}"))


#: the largest card id (SQLite's INTEGER is 64-bit signed)
_MAX_CARD_ID = 2**63 - 1


@kanban_app.command("ready")
def kanban_ready(card_id: Annotated[int, typer.Argument(help="The card's id.")]) -> None:
    """Move a card (back) to ready."""
    if not 1 <= card_id <= _MAX_CARD_ID:  # bounded before SQLite sees it (a 64-bit INTEGER)
        raise InvalidArgument(f"invalid card id {card_id}: expected 1 to {_MAX_CARD_ID}")
    estop = current_estop()
    card = Board(estop.layout.root, clock=estop.clock).mark_ready(card_id)
    typer.echo(f"card #{card.id} is ready")


@kanban_app.command("list")
def kanban_list(
    status: Annotated[str | None, typer.Option("--status", help="Only cards in this status.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The cards on the fleet's board."""
    estop = current_estop()
    board = Board(estop.layout.root, clock=estop.clock)
    cards = board.cards(status) if board.exists() or status is not None else []
    if as_json:
        emit_json({"board": str(board.path), "cards": [card.to_json() for card in cards]})
        return
    if not cards:
        typer.echo(f"no cards ({board.path})")
        return
    for card in cards:
        result = f"; {card.detail}" if card.detail else ""
        typer.echo(printable(f"#{card.id} [{card.status}] {card.title} (owner {card.owner or '-'}, "
                             f"profile {card.profile or '-'}){result}"))


@kanban_app.command("dispatch")
def kanban_dispatch(
    max_cards: Annotated[int, typer.Option("--max", help="Spawn at most this many workers (1 to 256).")] = 4,
    timeout: TimeoutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One dispatch pass: claim the ready cards the gate admits, spawn their workers (up to --max),
    wait for them and record the results. Held cards stay ready."""
    if not 1 <= max_cards <= 256:
        raise InvalidArgument(f"invalid --max {max_cards}: expected 1 to 256")
    dispatcher = Dispatcher(current_estop(), max_workers=max_cards, timeout=timeout)
    _emit_pass(dispatcher.dispatch(limit=max_cards), as_json)


# -- gateway ---------------------------------------------------------------------------------

@gateway_app.command("serve")
def gateway_serve(
    port: Annotated[int, typer.Option("--port", help="TCP port (0: pick a free one).")],
    host: Annotated[str, typer.Option("--host", help="Address to bind; loopback unless you say otherwise.")] = "127.0.0.1",
    operator: Annotated[list[str] | None, typer.Option("--operator", help="A user id that may /pause and /resume (repeatable).")] = None,
) -> None:
    """Serve the turn gate: one `user_id profile text` line in, one reply line out (`-` = no profile).
    SIGINT or SIGTERM stops it (exit 0)."""
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"invalid port {port}: expected 0 to 65535 (0 picks a free one)")
    gateway = Gateway(current_estop(), operators=operator or ())
    try:
        server = LineServer(gateway, host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    bound_host, bound_port = server.address
    if not is_loopback(bound_host):
        typer.echo(f"hermes: warning: {bound_host} is not a loopback address; user ids on this socket are not "
                   "authenticated", err=True)
    ops = ", ".join(sorted(gateway.operators)) or "none"
    typer.echo(f"hermes gateway listening on {bound_host}:{bound_port} (operators: {ops})")
    serve_gateway(gateway, server)
    typer.echo("hermes gateway stopped")


def register(app: typer.Typer) -> None:
    """Add the consumers commands to `app` (and `hermes drain`, which waits for their work)."""
    drain.register(app)
    app.add_typer(cron_app, name="cron")
    app.add_typer(kanban_app, name="kanban")
    app.add_typer(gateway_app, name="gateway")
