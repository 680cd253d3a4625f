"""`hermes windows skip | unskip | explain`: the commands about one occurrence of a window (the
ledger's entry for it, and why it does or does not hold at an instant)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from hermes_estop.cli.api_client import remote_skip, unskipped_line
from hermes_estop.cli.command_io import current_estop, emit_json, operator_time
from hermes_estop.cli.served import remote_if_named
from hermes_estop.cli.windows_app import JsonOpt, file, window_named, windows_app
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import parse_instant
from hermes_estop.windows.explain import explain as explain_window
from hermes_estop.windows.forecast import ahead
from hermes_estop.windows.ledger import open_ledger
from hermes_estop.windows.schedule import schedule_of
from hermes_estop.windows.skips import pick, skip_occurrence, skipped_line, unskip_occurrence

if TYPE_CHECKING:
    from hermes_estop.fleet.fleet import Fleet
    from hermes_estop.windows.ledger import OccurrenceLedger
    from hermes_estop.windows.model import Occurrence, Window

__all__ = ["explain", "skip", "unskip"]


def _skip_target(name: str, on: str | None, occurrence: str | None,
                 next_: bool) -> tuple[Fleet, OccurrenceLedger, Window, Occurrence, datetime]:
    """The fleet, its ledger, the window and the occurrence a skip/unskip names."""
    if sum((on is not None, occurrence is not None, next_)) > 1:
        raise InvalidArgument("give one of --next, --on DATE or --occurrence START")
    day = None
    if on is not None:
        try:
            day = date.fromisoformat(on)
        except ValueError:
            raise InvalidArgument(f"invalid --on {on!r}: expected a date, YYYY-MM-DD") from None
    start = parse_instant(occurrence, what="--occurrence time") if occurrence is not None else None
    _, window = window_named(name)
    fleet = current_estop().fleet
    now = fleet.clock()
    return fleet, open_ledger(fleet), window, pick(window, now, on=day, start=start), now


SkipOn = Annotated[str | None, typer.Option("--on", help="The occurrence starting on this local date (YYYY-MM-DD, the window's timezone).")]
SkipAt = Annotated[str | None, typer.Option("--occurrence", help="The occurrence starting at this ISO-8601 instant.")]
SkipNext = Annotated[bool, typer.Option("--next", help="The next occurrence that has not started (the default).")]


@windows_app.command("skip")
def skip(name: Annotated[str, typer.Argument(help="The window.")], next_: SkipNext = False, on: SkipOn = None,
         occurrence: SkipAt = None, as_json: JsonOpt = False) -> None:
    """Skip one occurrence ahead of time: it will not arm (recorded in the ledger, audited)."""
    remote = remote_if_named()
    if remote is not None:
        if next_ and (on is not None or occurrence is not None):
            raise InvalidArgument("give one of --next, --on DATE or --occurrence START")
        remote_skip(remote, name, on=on, occurrence=occurrence, as_json=as_json)
    fleet, _, window, target, now = _skip_target(name, on, occurrence, next_)
    skip_occurrence(fleet, window, target, now)
    if as_json:
        emit_json({"skipped": target.to_json(now, window.zone_of(target))})
        return
    typer.echo(skipped_line(window.name, target.start, window.zone_of(target)))



@windows_app.command("unskip")
def unskip(name: Annotated[str, typer.Argument(help="The window.")], next_: SkipNext = False, on: SkipOn = None,
           occurrence: SkipAt = None, as_json: JsonOpt = False) -> None:
    """Undo a skip: the occurrence arms again at its start."""
    remote = remote_if_named()
    if remote is not None:
        if next_ and (on is not None or occurrence is not None):
            raise InvalidArgument("give one of --next, --on DATE or --occurrence START")
        remote_skip(remote, name, on=on, occurrence=occurrence, as_json=as_json, undo=True)
    fleet, _, window, target, now = _skip_target(name, on, occurrence, next_)
    unskip_occurrence(fleet, window, target, now)
    if as_json:
        emit_json({"unskipped": target.to_json(now, window.zone_of(target))})
        return
    typer.echo(unskipped_line(window.name, target.start))


@windows_app.command("explain")
def explain(
    name: Annotated[str, typer.Argument(help="The window.")],
    at: Annotated[str | None, typer.Option("--at", help="The instant to explain: 15:00, tomorrow 03:00 (local time unless a zone follows), ISO-8601 (default: now).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Why a window does or does not hold at an instant: its schedule, bounds, the occurrence
    covering the instant (drain lead included), what the ledger says of it, and the exclusions
    before the next occurrence. Exit 0 either way; 2 for an unknown window or a bad time."""
    fleet = current_estop().fleet
    now = fleet.clock()
    instant = operator_time("--at", at, now) if at is not None else now
    windows_file = file()
    schedule = schedule_of(windows_file, now)
    found = ahead(schedule, schedule.item_named(name, windows_file.path), instant)
    result = explain_window(found, instant, open_ledger(fleet).load())
    if as_json:
        emit_json(result.to_json())
        return
    for fact in result.facts:
        typer.echo(f"  {printable(fact)}")
