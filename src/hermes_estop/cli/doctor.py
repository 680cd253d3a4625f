"""`hermes doctor`: the coverage audit (`consumers.coverage`). An acknowledged stop proves the
registered consumers saw the hold; this looks for work started around them."""

from __future__ import annotations

from typing import Annotated

import typer

from hermes_estop.cli.command_io import current_estop, emit_json
from hermes_estop.consumers.coverage import Finding, audit_coverage
from hermes_estop.model.text import printable
from hermes_estop.observe.hold_provenance import on_record
from hermes_estop.observe.status import flat
from hermes_estop.process.estop import Estop

__all__ = ["NOTHING_REGISTERED", "doctor", "register"]

#: what `hermes doctor` says instead of "no problem found" when no consumer is registered
NOTHING_REGISTERED = ("nothing is registered: no consumer reports to this fleet's consumer registry, so no "
                      "hold has been acknowledged by anything and `--wait` has nobody to wait for; this audit "
                      "only sees the work on record. Start the consumers with `hermes serve` (or register a "
                      "loop with `hermes_estop.consumers.reporter.ConsumerReporter`), then run `hermes doctor` again")


def doctor(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Flag (a) work that started while a hold covering it stood and did not admit it (cron runs,
    kanban claims, gateway turns), (b) work claimed by a process that is not a registered
    consumer, (c) consumers lost or stalled, (d) holds written
    outside hermes. Exit 1 when anything is flagged, else 0."""
    estop = current_estop()
    findings, roster = audit_coverage(estop)
    findings += _written_outside(estop)
    nothing = not roster.rows and roster.problem is None
    if as_json:
        emit_json({"ok": not findings, "findings": [f.to_json() for f in findings],
                   "consumers": roster.to_json(), "registered": len(roster.rows),
                   "note": NOTHING_REGISTERED if nothing else None})
    else:
        for finding in findings:
            typer.echo(printable(finding.text))
        typer.echo(printable(roster.line()))
        if nothing:
            typer.echo(NOTHING_REGISTERED)
        if findings:
            typer.echo(f"{len(findings)} problem(s) found")
        elif not nothing:
            typer.echo("no problem found")
    raise typer.Exit(1 if findings else 0)


def _written_outside(estop: Estop) -> list[Finding]:
    """(d) Holds no hermes write is on the audit trail for: a sentinel (or a row) written by
    hand, around the fleet's arming policy. Honoured all the same; flagged here (issue 37)."""
    snapshot = estop.fleet.read()
    record = on_record(estop.fleet, flat(snapshot.readings), snapshot.now)
    return [Finding("outside", f"WRITTEN OUTSIDE HERMES: the hold at {scope}"
                               + (f" (generation {generation})" if generation else " (no generation)")
                               + " has no write of it on the audit trail: it is honoured, but no policy judged it")
            for scope, generation in record.outside]


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
