"""`hermes windows add | list | remove | next | validate | schema`: the maintenance windows in
`<fleet root>/windows.toml`. `hermes serve` arms and lifts them.

Imports only typer and the core at module level; the window model (pydantic, croniter) is
imported inside the commands."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import InvalidArgument
from ..homes import FLEET, resolve_layout
from ..timeutil import format_instant, format_relative, utc_now
from .common import emit_json, new_app

__all__ = ["register", "windows_app"]

windows_app = new_app("windows", "Maintenance windows: scheduled holds whose deadman is the window's end (run by `hermes serve`).")

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _file():
    from ..windows.model import WindowsFile

    return WindowsFile(resolve_layout().root)


@windows_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The window's name (lowercase letters, digits, '-', '_').")],
    cron: Annotated[Optional[str], typer.Option("--cron", help="Recurring: a 5-field crontab expression, e.g. '30 2 * * 0'.")] = None,
    tz: Annotated[Optional[str], typer.Option("--tz", help="IANA timezone the cron expression is read in (default UTC).")] = None,
    at: Annotated[Optional[str], typer.Option("--at", help="One-shot: the ISO-8601 start time (naive = UTC).")] = None,
    duration: Annotated[Optional[str], typer.Option("--duration", help="How long each occurrence holds (45m, 2h, PT2H).")] = None,
    reason: Annotated[Optional[str], typer.Option("--reason", help="Shown to refused users while the window holds.")] = None,
    allow_user: Annotated[Optional[list[str]], typer.Option("--allow-user", help="A user id that keeps working (repeatable).")] = None,
    allow_profile: Annotated[Optional[list[str]], typer.Option("--allow-profile", help="Narrow the allowed users to these profiles (repeatable).")] = None,
    profile: Annotated[Optional[str], typer.Option("--profile", help="Hold only this profile (default: the whole fleet).")] = None,
    not_before: Annotated[Optional[str], typer.Option("--not-before", help="No occurrence starts before this ISO-8601 time.")] = None,
    not_after: Annotated[Optional[str], typer.Option("--not-after", help="No occurrence starts at or after this ISO-8601 time.")] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Add it switched off (enabled = false).")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a window of the same name.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a window: `--cron EXPR [--tz ZONE]` or `--at TIME`, with `--duration DUR`."""
    from ..windows.model import InvalidWindow, Window
    from ..windows.occurrences import upcoming

    if (cron is None) == (at is None):
        raise InvalidArgument("give exactly one of --cron EXPR (recurring) or --at TIME (one-shot)")
    if tz is not None and cron is None:
        raise InvalidArgument("--tz applies to --cron windows only; give --at with its offset")
    if duration is None:
        raise InvalidArgument("--duration is required (e.g. --duration 2h)")
    if allow_profile and not allow_user:
        raise InvalidArgument(
            f"--allow-profile {' '.join(allow_profile)} without --allow-user: a profile never grants on its own"
        )
    data: dict[str, object] = {"name": name, "duration": duration, "scope": profile if profile is not None else FLEET}
    if cron is not None:
        data["cron"] = cron
        data["timezone"] = tz if tz is not None else "UTC"
    else:
        data["at"] = at
    for key, value in (("reason", reason), ("not_before", not_before), ("not_after", not_after)):
        if value is not None:
            data[key] = value
    if allow_user:
        data["allow"] = {"user_ids": list(allow_user), "profiles": list(allow_profile or [])}
    if disabled:
        data["enabled"] = False
    window = Window.parse(data)
    now = utc_now()
    following = upcoming(window, now, 1)
    if window.at is not None and not following:
        raise InvalidWindow(f"is already over (it ended at {format_instant(window.at + window.duration)})",
                            window=repr(window.name), field="at")
    windows_file = _file()
    windows_file.add(window, replace=replace)
    if as_json:
        emit_json({"path": str(windows_file.path), "window": window.to_json(),
                   "next": following[0].to_json(now, window.tz) if following else None})
        return
    typer.echo(f"added window {window.name} to {windows_file.path}: {window.describe_schedule()} for "
               f"{window.to_json()['duration']}, {window.scope}")
    if following:
        typer.echo(f"  next: {format_instant(following[0].start)} ({format_relative(following[0].start, now)})")
    else:
        typer.echo("  no occurrence ahead")
    typer.echo("  `hermes serve` arms it (a running one picks the change up by itself)")


@windows_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """Every window in windows.toml."""
    windows_file = _file()
    windows = windows_file.load()
    if as_json:
        emit_json({"path": str(windows_file.path), "windows": [w.to_json() for w in windows]})
        return
    if not windows:
        typer.echo(f"no windows ({windows_file.path})")
        return
    for window in windows:
        flags = "" if window.enabled else "  (disabled)"
        typer.echo(f"{window.name}  {window.describe_schedule()}  for {window.to_json()['duration']}  "
                   f"{window.scope}{flags}")
        if window.reason:
            typer.echo(f"    reason  {window.reason}")
        if window.allow.user_ids:
            narrowed = f" on profiles {', '.join(window.allow.profiles)}" if window.allow.profiles else ""
            typer.echo(f"    allow   users {', '.join(window.allow.user_ids)}{narrowed}")
        if window.not_before or window.not_after:
            typer.echo(f"    bounds  {format_instant(window.not_before) or '-'} .. {format_instant(window.not_after) or '-'}")


@windows_app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The window to remove.")], as_json: JsonOpt = False) -> None:
    """Remove a window. A running `hermes serve` stops scheduling it and retires a hold it armed."""
    windows_file = _file()
    window = windows_file.remove(name)
    if as_json:
        emit_json({"path": str(windows_file.path), "removed": window.to_json()})
        return
    typer.echo(f"removed window {window.name} from {windows_file.path}")


@windows_app.command("next")
def next_(
    name: Annotated[Optional[str], typer.Argument(help="Only this window.")] = None,
    count: Annotated[int, typer.Option("--count", "-n", min=1, max=1000, help="Occurrences per window.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """The next occurrences (one covering now first), in UTC and in the window's timezone."""
    from ..windows.occurrences import upcoming

    windows_file = _file()
    windows = windows_file.load()
    if name is not None:
        windows = [w for w in windows if w.name == name]
        if not windows:
            raise InvalidArgument(f"no window named {name!r} in {windows_file.path}")
    now = utc_now()
    rows = []
    for window in windows:
        for occurrence in upcoming(window, now, count):
            rows.append((window, occurrence))
    if as_json:
        emit_json({"now": format_instant(now),
                   "occurrences": [o.to_json(now, w.tz) | {"enabled": w.enabled} for w, o in rows]})
        return
    if not rows:
        typer.echo("no occurrences ahead")
    for window, occurrence in rows:
        local = occurrence.start.astimezone(window.tz).strftime("%Y-%m-%d %H:%M %Z")
        state = "ACTIVE until " + format_instant(occurrence.end) if occurrence.covers(now) else \
            f"{format_relative(occurrence.start, now)}, until {format_instant(occurrence.end)}"
        off = "  (disabled)" if not window.enabled else ""
        typer.echo(f"{window.name}  {format_instant(occurrence.start)}  ({local})  {state}  {window.scope}{off}")


@windows_app.command("validate")
def validate(as_json: JsonOpt = False) -> None:
    """Check windows.toml: exit 0 when it validates, 2 with the file, window and field otherwise."""
    windows_file = _file()
    windows = windows_file.load()
    if as_json:
        emit_json({"path": str(windows_file.path), "valid": True, "windows": len(windows)})
        return
    if not windows and windows_file.identity() is None:
        typer.echo(f"ok: no windows file at {windows_file.path} (no windows)")
    else:
        typer.echo(f"ok: {len(windows)} window(s) in {windows_file.path}")


@windows_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of windows.toml."""
    from ..windows.model import json_schema

    emit_json(json_schema())


def register(app: typer.Typer) -> None:
    """Add `hermes windows ...` to `app`."""
    app.add_typer(windows_app, name="windows")
