"""`hermes drain`: arm (or re-arm, non-destructively) the hold like `pause`, then wait until no
work is in flight on the locations it covers: cron jobs whose claim's pid is alive, running
kanban cards, gateway turns (issue 11 section 1).

Exit 0 when quiet; 75 when `--timeout` passes first, listing what still runs. With
`--terminate-after DUR`, running workers are sent SIGTERM after DUR (then SIGKILL after a grace),
by process group, and their runs recorded `failed` with the reason "terminated by drain";
nothing is killed without that flag. A dead pid never keeps the drain waiting.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer

from hermes_estop.cli.command_io import current_estop, duration_option, emit_json, refuse_blank
from hermes_estop.cli.wait import ack_lines, wait_with_progress
from hermes_estop.consumers.drainer import wait_until_quiet
from hermes_estop.fleet.registry.acks import ack_for_hold
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import Allow
from hermes_estop.model.homes import Layout, Location
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant
from hermes_estop.observe.status import lift_command

__all__ = ["EXIT_TIMEOUT", "drain", "register"]

#: EX_TEMPFAIL: the drain timed out with work still in flight; try again later
EXIT_TIMEOUT = 75


class _Progress:
    """The live line on stderr: rich when it is installed and stderr is a terminal, else one
    plain line each time what is running changes."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last: str | None = None
        self._live: Any = None
        if enabled and sys.stderr.isatty():
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:
                pass
            else:
                self._live = Live(console=Console(stderr=True), transient=True, auto_refresh=False)
                self._live.start()

    def show(self, text: str, key: str) -> None:
        """Show `text`; without a live terminal, only when `key` (what runs, not its ages) changed."""
        if not self.enabled:
            return
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(text), refresh=True)
        elif key != self._last:
            typer.echo(text, err=True)
        self._last = key

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


def _line(items: tuple[Any, ...], problems: tuple[str, ...], now: datetime, waited: float) -> str:
    running = "; ".join(item.describe(now) for item in items) or "nothing"
    extra = f"; cannot tell: {'; '.join(problems)}" if problems else ""
    return printable(f"draining ({waited:.0f}s): {len(items)} in flight: {running}{extra}")


def drain(
    fleet: Annotated[bool, typer.Option("--fleet", help="Drain the whole fleet (the fleet root's hold).")] = False,
    timeout: Annotated[str, typer.Option("--timeout", metavar="DUR", help="Give up after this long: exit 75 with what still runs.")] = "10m",
    terminate_after: Annotated[str | None, typer.Option("--terminate-after", metavar="DUR", help="After this long, SIGTERM (then SIGKILL) what still runs, by process group.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why; shown to refused users (default: keep the standing reason).")] = None,
    allow_user: Annotated[list[str] | None, typer.Option("--allow-user", metavar="ID", help="A user id that keeps working (repeatable).")] = None,
    allow_profile: Annotated[list[str] | None, typer.Option("--allow-profile", metavar="NAME", help="Narrow the allowed users to these profiles (repeatable).")] = None,
    ttl: Annotated[str | None, typer.Option("--ttl", metavar="DUR", help="Deadman of the hold: lift after this long.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final state as JSON (no progress line).")] = False,
) -> None:
    """Pause (or re-arm the pause), wait until every registered consumer it covers acknowledged
    it, then until no cron job, kanban card or gateway turn is in flight on what the hold covers.
    Exit 0 when both, 75 at --timeout (one budget for the two waits)."""
    refuse_blank("--ttl", ttl)
    if ttl is not None:
        duration_option("--ttl", ttl)
    limit = duration_option("--timeout", timeout).total_seconds()
    kill_at = duration_option("--terminate-after", terminate_after).total_seconds() if terminate_after is not None else None
    if allow_profile and not allow_user:
        raise InvalidArgument(f"--allow-profile {' '.join(allow_profile)} without --allow-user: "
                              "a profile never grants on its own")
    allow = Allow.of(allow_user, allow_profile or ()) if allow_user else None
    estop = current_estop()
    hold = estop.engage(reason=reason, allow=allow, ttl=ttl, fleet=fleet)
    location = estop.location(fleet=fleet)
    # first every consumer the hold covers has seen it (no new work), then nothing is in flight
    acked = wait_with_progress(estop.fleet, ack_for_hold(location.scope, hold), limit, show=not as_json)
    limit = max(0.0, limit - acked.waited)
    progress = _Progress(not as_json)

    def show(found: Any, now: datetime, waited: float) -> None:
        key = repr(sorted((i.consumer, i.name, i.token or "") for i in found.items)) + repr(found.problems)
        progress.show(_line(found.items, found.problems, now, waited), key)

    try:
        result = wait_until_quiet(estop, fleet=fleet, timeout=limit, terminate_after=kill_at, on_progress=show)
    finally:
        progress.close()
    found = result.last
    if as_json:
        now = result.now
        emit_json({"scope": location.scope, "generation": hold.generation, "quiet": found.quiet,
                   "timed_out": not found.quiet, "waited_seconds": round(result.waited, 3),
                   "counts": found.counts(), "in_flight": [item.to_json(now) for item in found.items],
                   "terminated": [item.to_json(now) for item in result.terminated], "problems": list(found.problems),
                   "acknowledgement": acked.to_json()})
    else:
        _tell(result, acked, location, estop.layout, hold.engaged_at, timeout)
    raise typer.Exit(0 if found.quiet and acked.done else EXIT_TIMEOUT)


def _tell(result: Any, acked: Any, location: Location, layout: Layout, engaged_at: datetime | None, timeout: str) -> None:
    """The lines of a drain for a person: what was terminated, who acknowledged, quiet or not."""
    found, now = result.last, result.now
    for item in result.terminated:
        typer.echo(printable(f"terminated {item.describe(now)}: recorded failed (terminated by drain)"))
    out, err = ack_lines(acked, verb="stopped")
    for line in out:
        typer.echo(line)
    for line in err:
        typer.echo(line, err=True)
    if found.quiet:
        lift = lift_command(location, layout)
        typer.echo(f"drained {location.describe()}: nothing in flight (held since "
                   f"{display_instant(engaged_at)}; `{lift}` to lift)")
        return
    typer.echo(f"drain of {location.describe()} timed out after {timeout}: "
               f"{len(found.items)} still in flight", err=True)
    for item in found.items:
        typer.echo(printable(f"  {item.consumer}: {item.describe(now)}"), err=True)
    for problem in found.problems:
        typer.echo(printable(f"  cannot tell: {problem}"), err=True)


def register(app: typer.Typer) -> None:
    """Add `hermes drain` to `app`."""
    app.command("drain")(drain)
