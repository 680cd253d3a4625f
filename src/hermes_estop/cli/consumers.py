"""`hermes consumers`: every registered process that starts work, and what it last saw.

(The cron, kanban and gateway command groups live in `cli/cron_kanban_gateway.py`; this top-level
command is the registry of their processes, `fleet/registry/`.)
"""

from __future__ import annotations

from typing import Annotated

import typer

from hermes_estop.cli.command_io import EXIT_HELD, current_estop, emit_json
from hermes_estop.fleet.registry.roster import read_roster
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant

__all__ = ["consumers", "register"]


def consumers(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """One row per registered consumer (cron ticker, kanban dispatcher, gateway, APScheduler
    adapter, user loops): component, host, pid, profile, last report, the holds it observed,
    whether it acknowledged the holds standing now, lag, state (live, stalled, lost). Exits 1
    when the registry cannot be read (an empty table would say "none registered")."""
    roster = read_roster(current_estop().fleet)
    if as_json:
        emit_json(roster.to_json())
        _exit_on_problem(roster.problem)
        return
    header = ("COMPONENT", "HOST", "PID", "PROFILE", "LAST REPORT", "OBSERVED", "ACK", "LAG", "STATE")
    table = [header]
    for row in roster.rows:
        e = row.entry
        observed = ",".join(f"{s}:{g[:8]}" for s, g in e.observed) or "none"
        table.append((e.component, e.host, str(e.pid), e.profile or "-", display_instant(e.reported_at) or "?",
                      observed, "yes" if row.acknowledged else "NO", f"{row.lag:.1f}s", row.state.value))
    if len(table) > 1:
        widths = [max(len(printable(r[i])) for r in table) for i in range(len(header))]
        for cells in table:
            typer.echo("  ".join(printable(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip())
    typer.echo(printable(roster.line()))
    _exit_on_problem(roster.problem)


def _exit_on_problem(problem: str | None) -> None:
    if problem is not None:
        raise typer.Exit(EXIT_HELD)


def register(app: typer.Typer) -> None:
    app.command("consumers")(consumers)
