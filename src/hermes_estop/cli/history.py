"""`hermes history`: the audit trail, newest events last, without the CLI framework.

`history --limit N` and `--since TIME` read the trail backwards from its end, only as far as the
answer needs (issue 24), so what is left of their cost is the process's start; building the
Typer app (a pydantic adapter per option, from typer 0.29) was most of it. `cli.fast_path` therefore
sends a well-formed invocation straight here, as it does `check` and `gate`; the Typer command
calls the same `run_history`, so both paths print the same.
"""

from __future__ import annotations

import json
import sys

from hermes_estop.cli.served import remote_if_named
from hermes_estop.model.errors import InvalidArgument, InvalidDuration, InvalidInstant
from hermes_estop.model.text import printable
from hermes_estop.process.describe import event_covers, event_json
from hermes_estop.process.estop import Estop

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module stays cheap to import
if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime


__all__ = ["aligned", "run_history", "since_instant"]


def run_history(limit: int, since: str | None, as_json: bool) -> int:
    """Print the newest `limit` events (at or after `since`: an ISO-8601 time or a duration
    ago); exit code 0. A bad `since` raises `InvalidArgument` naming it."""
    remote = remote_if_named()
    if remote is not None:  # the server's trail (`--server`)
        from hermes_estop.cli.api_client import remote_history
        from hermes_estop.model.timeutil import utc_now

        start = None if since is None else since_instant(since, utc_now())
        events, corrupt = remote_history(remote, limit, start)
    else:
        estop = Estop()
        start = None if since is None else since_instant(since, estop.clock())
        events, corrupt = estop.fleet.history(limit, start)
    skipped = f"{corrupt} corrupt audit line(s) skipped" if corrupt else None
    out = sys.stdout
    if as_json:
        out.write(json.dumps([event_json(event) for event in events], indent=2, sort_keys=False, default=str)
                  + "\n")
        if skipped:  # the JSON stays a list of events; the count goes where a person sees it
            print(f"hermes: {skipped}", file=sys.stderr)
        return 0
    if not events:
        out.write("no events\n")
    from hermes_estop.model.audit_event import coalesce_renewals
    from hermes_estop.model.timeutil import display_instant

    rows = []
    for event, count in coalesce_renewals(events):
        name = f"rearm x{count}" if count > 1 else event.event
        rest = []
        if event.actor:
            rest.append(f"by={printable(event.actor)}")
        if event.reason:
            rest.append(f"reason='{printable(event.reason)}'")
        if event.deadline:
            rest.append(f"deadline={display_instant(event.deadline)}")
        covered = event_covers(event.event, event.detail)
        if covered is not None:
            rest.append(f"covers={covered}")
        if event.detail:
            rest.append(printable(event.detail))
        if count > 1:
            rest.append(f"({count} renewals in a row; the last shown)")
        rows.append(([display_instant(event.time) or "?", printable(name), printable(event.location),
                      f"gen={printable(event.generation)}" if event.generation else "-"], rest))
    lines = aligned(rows)
    if lines:
        out.write("\n".join(lines) + "\n")
    if skipped:
        out.write(skipped + "\n")
    out.flush()
    return 0


def aligned(rows: list[tuple[list[str], list[str]]]) -> list[str]:
    """Each row's leading columns padded to the widest of their column, then its free-form rest:
    the history reads as a table however long a scope or an event name is."""
    widths = [max((len(lead[i]) for lead, _ in rows), default=0) for i in range(len(rows[0][0]))] if rows else []
    lines = []
    for lead, rest in rows:
        cells = [cell.ljust(width) for cell, width in zip(lead, widths, strict=True)] + rest
        lines.append("  ".join(cells).rstrip())
    return lines


def since_instant(value: str, now: datetime) -> datetime:
    """`--since`: an ISO-8601 time, or a duration meaning that long before `now`."""
    from hermes_estop.model.durations import parse_with_unit
    from hermes_estop.model.timeutil import parse_instant

    try:
        return parse_instant(value, what="--since time")
    except InvalidInstant:
        pass
    try:
        return now - parse_with_unit(value)
    except InvalidDuration:
        raise InvalidArgument(f"invalid --since {value!r}: expected an ISO-8601 time such as "
                              "2026-12-02T18:00:00Z or a duration such as 2h") from None
