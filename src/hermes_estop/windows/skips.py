"""Skipping one occurrence ahead of time (`hermes windows skip` / `unskip`, issue 11 section 2):
a ledger entry in state `skipped`, which the scheduler never arms; an unskip deletes it. Only an
occurrence that has not started: one that holds now is ended by `hermes resume`.
"""

from __future__ import annotations

from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

from hermes_estop.model.cronspec import wall_to_instant
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.windows.ledger import SKIPPED, entry_for, open_ledger, skipped_keys
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import occurrences

__all__ = ["pick", "skip_occurrence", "skipped_line", "unskip_occurrence"]

if TYPE_CHECKING:
    from hermes_estop.fleet.fleet import Fleet


def pick(window: Window, now: datetime, *, on: date | None = None, start: datetime | None = None) -> Occurrence:
    """The occurrence of `window` starting on local date `on`, at `start`, or else the next one;
    `InvalidArgument` when there is none, or it has already started."""
    if on is not None:
        midnight = wall_to_instant(datetime(on.year, on.month, on.day), window.tz)
        found = next(iter(occurrences(window, midnight)), None)
        if found is None or found.start.astimezone(window.tz).date() != on:
            raise InvalidArgument(f"window {window.name} has no occurrence starting on {on.isoformat()} "
                                  f"({window.timezone})")
    elif start is not None:
        found = next(iter(occurrences(window, start)), None)
        if found is None or found.start != start:
            raise InvalidArgument(f"window {window.name} has no occurrence starting at {format_instant(start)}")
    else:
        found = next((o for o in occurrences(window, now) if o.arm_at > now), None)
        if found is None:
            raise InvalidArgument(f"window {window.name} has no occurrence ahead")
    if found.arm_at <= now:  # started, or in its drain lead: its hold is armed
        raise InvalidArgument(f"window {window.name} occurrence {found.ident} has already started; "
                              "`hermes resume` releases a hold that stands")
    return found


def skip_occurrence(fleet: Fleet, window: Window, target: Occurrence, now: datetime) -> None:
    """Skip `target` for the fleet's actor: the ledger entry, then the audit line."""
    open_ledger(fleet).commit([entry_for(target, SKIPPED, now, None, f"skipped by the operator ({fleet.actor})")])
    fleet.record("skip", fleet.location(window.scope), reason=window.reason_for(None), deadline=target.end,
                 detail=f"window {window.name} occurrence {target.ident} skipped by the operator", now=now)


def unskip_occurrence(fleet: Fleet, window: Window, target: Occurrence, now: datetime) -> None:
    """Undo a skip of `target`; `InvalidArgument` when it is not skipped."""
    if target.key not in skipped_keys(fleet):
        raise InvalidArgument(f"window {window.name} occurrence {target.ident} is not skipped")
    open_ledger(fleet).commit([], remove=[target.key])
    fleet.record("unskip", fleet.location(window.scope), reason=window.reason_for(None), deadline=target.end,
                 detail=f"window {window.name} occurrence {target.ident} no longer skipped", now=now)


def skipped_line(name: str, start: datetime, zone: tzinfo) -> str:
    """What `windows skip` prints, here and over `--server`."""
    return (f"skipped window {printable(name)} occurrence {display_instant(start)} "
            f"({start.astimezone(zone).strftime('%Y-%m-%d %H:%M %Z')}): it will not arm")
