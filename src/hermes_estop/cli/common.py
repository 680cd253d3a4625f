"""What every CLI module shares: the process's `Estop`, one-line errors, rendering of holds.

CLI modules import only typer and the core at module level; heavy packages (pydantic, croniter,
apscheduler, psycopg) are imported inside the commands that need them, so `hermes check` stays
a cheap process to start.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, NoReturn

import typer

from ..estop import Estop
from ..hold import Hold, HoldState, Reading
from ..timeutil import format_instant, format_relative
from .hot import EXIT_HELD, EXIT_OK, EXIT_USAGE

__all__ = [
    "EXIT_OK",
    "EXIT_HELD",
    "EXIT_USAGE",
    "new_app",
    "current_estop",
    "fail",
    "emit_json",
    "hold_json",
    "reading_json",
    "describe_reading",
    "describe_hold",
]


def new_app(name: str, help_text: str) -> typer.Typer:
    """A Typer app or sub-app as every `hermes` command wants it: plain help text, no shell
    completion installer, and errors left to `cli.main` (one line, an exit code)."""
    return typer.Typer(name=name, help=help_text, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None)


def current_estop() -> Estop:
    """The `Estop` this command acts on, from the environment (`--store` has set it)."""
    return Estop()


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `hermes: error: <message>` as one line on stderr and exit with `code`."""
    typer.echo(f"hermes: error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def emit_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def hold_json(hold: Hold | None, now: datetime) -> dict[str, Any]:
    """A hold as scripts read it: the body's wire names (`expires_at`, `allow`) and the names
    an operator reads in `hermes status` (`deadline`, `deadline_in`, `allowlist`)."""
    expires_at = format_instant(hold.expires_at) if hold is not None else None
    expires_in = format_relative(hold.expires_at, now) if hold is not None and hold.expires_at else None
    allow = hold.allow.to_body() if hold is not None else {"user_ids": [], "profiles": []}
    return {
        "generation": hold.generation if hold else None,
        "reason": hold.reason if hold else None,
        "engaged_at": format_instant(hold.engaged_at) if hold else None,
        "expires_at": expires_at,
        "expires_in": expires_in,
        "deadline": expires_at,
        "deadline_in": expires_in,
        "allow": allow,
        "allowlist": allow,
        "armed_by": hold.armed_by if hold else None,
        "window": dict(hold.window) if hold is not None and hold.window else None,
    }


def reading_json(reading: Reading, now: datetime, where: str) -> dict[str, Any]:
    """One reading; `where` is `store.where(location)` (a sentinel path, a database row)."""
    data = {"scope": reading.location.scope, "path": where, "state": reading.state.value}
    data.update(hold_json(reading.hold, now))
    data["problem"] = reading.problem
    return data


def describe_hold(hold: Hold, now: datetime) -> list[str]:
    """The detail lines of one readable hold."""
    lines = [f"generation {hold.generation or '(none: hand-written)'}"]
    lines.append(f"reason     {hold.reason or '(none)'}")
    if hold.expires_at is not None:
        lines.append(f"deadline   {format_instant(hold.expires_at)} ({format_relative(hold.expires_at, now)})")
    else:
        lines.append("deadline   none (held until `hermes resume`)")
    allow = hold.allow
    if allow.user_ids:
        users = ", ".join(sorted(allow.user_ids))
        profiles = f" on profiles {', '.join(sorted(allow.profiles))}" if allow.profiles else ""
        lines.append(f"allow      users {users}{profiles}")
    elif not allow.valid:
        lines.append("allow      (malformed: admits nobody)")
    else:
        lines.append("allow      nobody")
    if hold.armed_by:
        lines.append(f"armed by   {hold.armed_by}")
    return lines


def describe_reading(reading: Reading, now: datetime, location: str) -> list[str]:
    """A heading line and indented detail lines for one present reading; `location` is
    `store.where(...)` of its location."""
    where = f"{reading.location.describe()} ({location})"
    if reading.state is HoldState.UNREADABLE:
        return [f"HELD  {where}", f"      unreadable: {reading.problem} (held, admits nobody)"]
    if reading.state is HoldState.EXPIRED:
        return [f"lifted {where}: expired at {format_instant(reading.hold.expires_at) if reading.hold else '?'}"]
    assert reading.hold is not None
    return [f"HELD  {where}"] + [f"      {line}" for line in describe_hold(reading.hold, now)]

