"""`hermes store init | status`: which store this fleet uses, and its schema.

`init` is idempotent: it creates or upgrades the PostgreSQL schema (stores also do it on first
use) and has nothing to do for the file store. `status` exits 0 when the store answers and 1
when it does not (a PostgreSQL store that cannot be reached: the fleet reads as held).
"""

from __future__ import annotations

from typing import Any

import typer

from hermes_estop.cli.command_io import EXIT_HELD, JsonOpt, current_estop, emit_json, new_app, printable

__all__ = ["register"]



def init(as_json: JsonOpt = False) -> None:
    """Create (or upgrade) the store's schema; safe to run again and from several hosts at once."""
    fleet = current_estop().fleet
    version, applied = fleet.init_schema()
    info = {**fleet.schema_info(), "version": version, "applied": applied, "created": bool(applied)}
    if as_json:
        emit_json(info)
    elif version == 0:
        typer.echo(f"{fleet.store_name} store: nothing to create (holds are sentinel files in each home)")
    elif applied:
        typer.echo(f"schema {info['schema']} in {info['url']}: now at version {version} "
                   f"(applied {', '.join(str(v) for v in applied)})")
    else:
        typer.echo(f"schema {info['schema']} in {info['url']}: already at version {version}, nothing to do")


def _lines(info: dict[str, Any]) -> list[str]:
    if info.get("backend") != "postgresql":
        return [f"{key:<12} {printable(value)}" for key, value in info.items()]
    lines = [f"backend      postgresql {info['url']}", f"schema       {info['schema']}"]
    if not info.get("reachable"):
        # the server answering but refusing (a missing privilege) is not an outage: say which
        word = "REFUSED     " if info.get("answers") else "UNREACHABLE "
        lines.append(f"{word} {info.get('problem')}")
        lines.append(f"             every location reads as held (after a {info['grace_seconds']:g}s grace on the last known state)")
    else:
        lines[-1] += f" (version {info['schema_version']}; this hermes-estop supports {info['supported_schema_version']})"
        lines.append(f"server       PostgreSQL {info['server_version']}, database {info['database']}, time {info['server_time']}")
        lines.append(f"rows         {info['holds']} hold(s), {info['audit_events']} audit event(s)")
    for missing in info.get("missing_privileges") or []:
        lines.append(f"MISSING      {missing}")
    listener = info["listener"]
    state = "connected" if listener["connected"] else "disconnected"
    pid = f", backend pid {listener['backend_pid']}" if listener["backend_pid"] else ""
    lines.append(f"listener     {state}{pid}, last contact {listener['last_contact'] or 'never'}")
    if listener["problem"]:
        lines.append(f"             {listener['problem']}")
    if listener["clock_offset_ms"] is not None:
        lines.append(f"clock        deadlines judged by the database's clock ({listener['clock_offset_ms']:+.3f} ms from this host's)")
    lines.append(f"grace        {info['grace_seconds']:g}s without the database, then the fleet is held")
    return lines


def status(as_json: JsonOpt = False) -> None:
    """Say what the store is and whether it answers (exit 1 when it does not)."""
    info = current_estop().fleet.describe_store()
    # an UnavailableStore (the configuration could not be read or opened) answers nothing
    reachable = info.get("reachable", info.get("backend") != "unavailable")
    if as_json:
        emit_json(info)
    else:
        for line in _lines(info):
            typer.echo(line)
    if not reachable:
        raise typer.Exit(EXIT_HELD)


def check(as_json: JsonOpt = False) -> None:
    """Can this role do what `store init` and the daemons need? Names each missing privilege with
    the GRANT that gives it (exit 1 when one is missing or the server does not answer)."""
    info = current_estop().fleet.describe_store()
    missing = info.get("missing_privileges")
    ok = info.get("backend") != "unavailable" and (info.get("backend") != "postgresql" or missing == [])
    if as_json:
        emit_json({"backend": info.get("backend"), "ok": ok, "answers": info.get("answers"), "missing_privileges": missing,
                   **({"refused": info["refused"]} if info.get("refused") else {})})
    elif info.get("backend") != "postgresql":
        typer.echo(f"{printable(info.get('backend'))} store: no privileges to check" if ok
                   else f"store unavailable: {printable(info.get('problem'))}")
    elif info.get("refused"):
        typer.echo(f"REFUSED  {printable(info['refused'])}")
    elif missing is None:
        typer.echo(f"UNREACHABLE  {printable(info.get('problem') or info['listener']['problem'])}")
    elif missing:
        for line in missing:
            typer.echo(f"MISSING  {printable(line)}")
    else:
        typer.echo(f"ok: this role has every privilege the store needs in {printable(info['url'])}")
    if not ok:
        raise typer.Exit(EXIT_HELD)


def register(app: typer.Typer) -> None:
    """Add the store commands to `app`."""
    store_app = new_app("store", "The hold store: what it is, and its schema.")
    store_app.command("init")(init)
    store_app.command("status")(status)
    store_app.command("check")(check)
    app.add_typer(store_app, name="store")
