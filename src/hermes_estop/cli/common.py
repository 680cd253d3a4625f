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
from ..gate import unreadable_cause
from ..hold import DEADLINE_UNREADABLE, Hold, HoldState, Reading
from ..text import one_line, printable
from ..timeutil import format_instant, format_relative
from .hot import EXIT_HELD, EXIT_OK, EXIT_USAGE

__all__ = [
    "EXIT_HELD",
    "EXIT_OK",
    "EXIT_USAGE",
    "HELP_OPTIONS",
    "current_estop",
    "describe_hold",
    "describe_reading",
    "emit_json",
    "fail",
    "hold_json",
    "new_app",
    "one_line",
    "printable",
    "reading_json",
    "standing_holds_line",
]


#: `-h` is `--help` everywhere (a sub-command's context inherits it from the root's)
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


def new_app(name: str, help_text: str, *, completion: bool = False) -> typer.Typer:
    """A Typer app or sub-app as every `hermes` command wants it: plain help text, `-h`, and
    errors left to `cli.main` (one line, an exit code). `completion` adds Typer's
    `--install-completion` / `--show-completion` (the root app only)."""
    return typer.Typer(name=name, help=help_text, no_args_is_help=True, add_completion=completion,
                       pretty_exceptions_enable=False, rich_markup_mode=None, context_settings=HELP_OPTIONS)


def current_estop() -> Estop:
    """The `Estop` this command acts on, from the environment (`--store` has set it)."""
    return Estop()


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
    data: dict[str, Any] = {"scope": reading.location.scope, "path": where, "state": reading.state.value}
    data.update(hold_json(reading.hold, now))
    data["problem"] = reading.problem
    return data


def describe_hold(hold: Hold, now: datetime) -> list[str]:
    """The detail lines of one readable hold, every value escaped (`printable`: a reason, an
    id or an actor is whatever a body says, and must never drive the terminal)."""
    lines = [f"generation {printable(hold.generation) if hold.generation else '(none: hand-written)'}"]
    lines.append(f"reason     {printable(hold.reason) if hold.reason else '(none)'}")
    if hold.expires_at is not None:
        lines.append(f"deadline   {format_instant(hold.expires_at)} ({format_relative(hold.expires_at, now)})")
    elif DEADLINE_UNREADABLE in hold.problems:
        lines.append("deadline   unreadable (held until `hermes resume`)")
    else:
        lines.append("deadline   none (held until `hermes resume`)")
    allow = hold.allow
    if allow.user_ids:
        users = ", ".join(printable(user) for user in sorted(allow.user_ids))
        profiles = f" on profiles {', '.join(printable(p) for p in sorted(allow.profiles))}" if allow.profiles else ""
        lines.append(f"allow      users {users}{profiles}")
    elif not allow.valid:
        lines.append("allow      (malformed: admits nobody)")
    else:
        lines.append("allow      nobody")
    if hold.armed_by:
        lines.append(f"armed by   {printable(hold.armed_by)}")
    if hold.problems:  # said in the body's own words too: "deadline unreadable: held until resumed"
        lines.append(f"problem    {'; '.join(printable(p) for p in hold.problems)}")
    return lines


def describe_reading(reading: Reading, now: datetime, location: str) -> list[str]:
    """A heading line and indented detail lines for one present reading; `location` is
    `store.where(...)` of its location. An unreadable hold names its cause and what will lift
    it (`gate.unreadable_cause`)."""
    where = f"{printable(reading.location.describe())} ({printable(location)})"
    if reading.state is HoldState.UNREADABLE:
        return [f"HELD  {where}", f"      unreadable: {unreadable_cause(reading)} (held, admits nobody)"]
    if reading.state is HoldState.EXPIRED:
        return [f"lifted {where}: expired at {format_instant(reading.hold.expires_at) if reading.hold else '?'}"]
    assert reading.hold is not None
    return [f"HELD  {where}"] + [f"      {line}" for line in describe_hold(reading.hold, now)]


def standing_holds_line(estop: Estop) -> str:
    """One line naming the holds a stopping process leaves standing and when each lifts (its
    deadman, or only by `hermes resume`): a `hermes serve` stopped inside a window leaves the
    window's hold to its deadman, and the operator reading its log must be told. Never raises."""
    try:
        snapshot = estop.snapshot()
    except Exception as exc:  # noqa: BLE001 - a shutdown line must not fail the shutdown
        return f"holds left standing unknown ({one_line(exc)})"
    active = snapshot.active
    if not active:
        return "no hold left standing"
    parts = []
    for reading in active:
        hold = reading.hold
        who = f" armed by {printable(hold.armed_by)}" if hold is not None and hold.armed_by else ""
        if hold is not None and hold.expires_at is not None:
            lifts = f"lifts at {format_instant(hold.expires_at)} ({format_relative(hold.expires_at, snapshot.now)})"
        elif reading.state is HoldState.UNREADABLE:
            lifts = "unreadable: held until removed"
        else:
            lifts = "held until `hermes resume`"
        parts.append(f"{printable(reading.location.describe())}{who} {lifts}")
    return f"leaving {len(active)} hold(s) standing: " + "; ".join(parts)
