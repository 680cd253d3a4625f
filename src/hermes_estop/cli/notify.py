"""`hermes notify test [NAME]` and `hermes notify status [--json]`: the `[[notify]]` targets of
`estop.toml`, as `hermes serve` delivers to them.

`test` sends one `test` event (id `test-<random>`) to every target, or to NAME, right now,
without touching any cursor: exit 0 when every one accepted it, 1 when one did not, 2 for a bad
configuration or an unknown NAME. `status` shows each target's cursor, its lag (wanted events
not yet delivered, and the age of the oldest) and its last error; exit 0.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from hermes_estop.cli.command_io import JsonOpt, current_estop, emit_json, new_app
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, format_relative, parse_stamp
from hermes_estop.notify.config import load_targets
from hermes_estop.notify.deliver import DeliveryFailed, deliver
from hermes_estop.notify.notifier import build_workers

__all__ = ["register"]



def _targets(estop: Any, name: str | None) -> list[Any]:
    targets = load_targets(estop.layout.root)
    if not targets:
        raise InvalidArgument(f"no [[notify]] targets in {printable(estop.layout.root / 'estop.toml')}")
    if name is not None:
        chosen = [t for t in targets if t.name == name]
        if not chosen:
            known = ", ".join(printable(t.name) for t in targets)
            raise InvalidArgument(f"no notify target named {printable(repr(name))} (known: {known})")
        return chosen
    return targets


def test(
    name: Annotated[str | None, typer.Argument(help="The target to send to (default: every target).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a test event to every target (or NAME) now; exit 1 when one did not accept it."""
    estop = current_estop()
    targets = _targets(estop, name)
    now = estop.clock()
    results = []
    for target in targets:
        event = {"id": f"test-{os.urandom(8).hex()}", "event": "test", "scope": None,
                 "fleet": str(estop.layout.root), "time": format_instant(now), "generation": None,
                 "actor": estop.actor, "reason": "hermes notify test", "deadline": None, "detail": None}
        try:
            deliver(target, event)
            results.append({"name": target.name, "ok": True, "id": event["id"], "error": None})
        except DeliveryFailed as exc:
            results.append({"name": target.name, "ok": False, "id": event["id"], "error": str(exc)})
    if as_json:
        emit_json(results)
    else:
        by_name = {t.name: t for t in targets}
        for result in results:
            what = by_name[result["name"]].describe()
            if result["ok"]:
                typer.echo(f"sent    {printable(result['name'])} ({what}): {result['id']}")
            else:
                typer.echo(f"FAILED  {printable(result['name'])} ({what}): {one_line(result['error'])}")
    if not all(r["ok"] for r in results):
        raise typer.Exit(1)


def status(as_json: JsonOpt = False) -> None:
    """Each target's cursor, lag (events not yet delivered) and last error."""
    estop = current_estop()
    now = estop.clock()
    rows = []
    for worker in build_workers(estop.fleet, _targets(estop, None)):
        state = worker.state
        try:
            lag, oldest = worker.pending()
            problem = None
        except Exception as exc:  # noqa: BLE001 - an unreadable trail is shown, not a traceback
            lag, oldest, problem = None, None, one_line(exc)
        rows.append({
            "name": worker.name, "type": worker.target.type, "target": worker.target.describe(),
            "events": list(worker.target.events), "scopes": list(worker.target.scopes or []) or None,
            "cursor": state.position, "source": state.source, "lag": lag,
            "lag_seconds": int((now - oldest).total_seconds()) if oldest is not None else 0 if lag == 0 else None,
            "delivered": state.delivered, "last_id": state.last_id, "last_success": state.last_success,
            "last_error": state.last_error, "failures": state.failures, "next_attempt": state.next_attempt,
            "trail_problem": problem,
        })
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        cursor = "not started" if row["cursor"] is None else f"{row['source']}:{row['cursor']}"
        typer.echo(f"{printable(row['name'])}  {printable(row['target'])}")
        typer.echo(f"  cursor      {cursor}, {row['delivered']} delivered"
                   + (f", last {printable(row['last_id'])}" if row["last_id"] else ""))
        if row["trail_problem"]:
            typer.echo(f"  lag         unknown: {row['trail_problem']}")
        else:
            age = f", oldest {row['lag_seconds']}s old" if row["lag"] else ""
            typer.echo(f"  lag         {row['lag']} event(s) pending{age}")
        if row["last_success"]:
            typer.echo(f"  last sent   {row['last_success']}")
        if row["last_error"]:
            typer.echo(f"  last error  {one_line(row['last_error'])} ({row['failures']} failure(s) in a row)")
            due = parse_stamp(row["next_attempt"])
            if due is not None:
                typer.echo(f"  next try    {display_instant(due)} ({format_relative(due, now)})")


def register(app: typer.Typer) -> None:
    """Add `hermes notify` to `app`."""
    notify_app = new_app("notify", "Notification targets ([[notify]] in estop.toml): test them, see their progress.")
    notify_app.command("test")(test)
    notify_app.command("status")(status)
    app.add_typer(notify_app, name="notify")
