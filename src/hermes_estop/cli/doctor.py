"""`hermes doctor`: the coverage audit (`consumers.coverage`). An acknowledged stop proves the
registered consumers saw the hold; this looks for work started around them."""

from __future__ import annotations

from typing import Annotated

import typer

from ..text import printable
from .common import current_estop, emit_json

__all__ = ["doctor", "register"]


def doctor(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Flag (a) work that started while a hold covering it stood and did not admit it (cron runs,
    kanban claims, gateway turns), (b) work claimed by a process that is not a registered
    consumer, (c) consumers lost or stalled. Exit 1 when anything is flagged, else 0."""
    from ..consumers.coverage import audit_coverage

    findings, roster = audit_coverage(current_estop())
    if as_json:
        emit_json({"ok": not findings, "findings": [f.to_json() for f in findings],
                   "consumers": roster.to_json()})
    else:
        for finding in findings:
            typer.echo(printable(finding.text))
        typer.echo(printable(roster.line()))
        typer.echo(f"{len(findings)} problem(s) found" if findings else "no problem found")
    raise typer.Exit(1 if findings else 0)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
