"""What covers now, and an instant as the people it concerns read it: the status page and its
timeline name each occurrence covering now with its end, and put every occurrence's times in UTC
and in its window's own zone (a window defined in America/New_York is read there).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, tzinfo
from typing import TYPE_CHECKING

from hermes_estop.observe.fleetview import Bar, FleetView

if TYPE_CHECKING:
    from hermes_estop.windows.model import Window

__all__ = ["covering_now", "in_zones", "span_in_zones", "utc", "windows_named"]


def utc(when: datetime) -> str:
    """An instant in UTC, to the second."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def in_zones(when: datetime, zone: tzinfo | None) -> str:
    """`when` in UTC and, for a window read in another zone, in that zone with its abbreviation
    and name: `2026-12-04 01:00:00 UTC = 2026-12-03 20:00:00 EST (America/New_York)`."""
    text = utc(when)
    if zone is None or _is_utc(zone):
        return text
    local = when.astimezone(zone)
    return f"{text} = {local:%Y-%m-%d %H:%M:%S} {local.tzname()} ({getattr(zone, 'key', str(zone))})"


def _is_utc(zone: tzinfo) -> bool:
    return getattr(zone, "key", None) in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Zulu", "Etc/Zulu") or zone is UTC


def span_in_zones(start: datetime, end: datetime, zone: tzinfo | None) -> str:
    """An occurrence's start and end, to the minute, in UTC and, for a window read in another
    zone, in that zone (its date only where it differs from the UTC one):
    `2026-06-02 12:00-14:00 UTC = 08:00-10:00 EDT (America/New_York)`. Short and ASCII: it is
    the tooltip of each of thousands of bars (one character beyond Latin-1 would make Python
    widen the whole page while joining it)."""
    first, last = start.astimezone(UTC), end.astimezone(UTC)
    text = _span(first, last, "UTC", "UTC", None)
    if zone is None or _is_utc(zone):
        return text
    local_first, local_last = start.astimezone(zone), end.astimezone(zone)
    local = _span(local_first, local_last, local_first.tzname() or "", local_last.tzname() or "", first.date())
    return f"{text} = {local} ({getattr(zone, 'key', str(zone))})"


def _span(first: datetime, last: datetime, first_name: str, last_name: str, shown: date | None) -> str:
    """`first`-`last` with the dates not already `shown`, and the zone's abbreviation (both
    when they differ: a span across a DST change)."""
    begin = f"{first:%H:%M}" if first.date() == shown else f"{first:%Y-%m-%d %H:%M}"
    if first_name != last_name:
        begin += f" {first_name}"
    until = f"{last:%H:%M}" if last.date() == first.date() else f"{last:%Y-%m-%d %H:%M}"
    return f"{begin}-{until} {last_name}"


def windows_named(view: FleetView, names: set[str]) -> dict[str, Window]:
    """The view's windows of these names, by name (a window's zone is `.tz`)."""
    return {state.window.name: state.window for state in view.windows if state.window.name in names}


def covering_now(view: FleetView) -> dict[str, list[tuple[Bar, Window]]]:
    """Per scope, the occurrences covering now (drain lead included) with their windows, by
    end. Only the windows the view says are active are looked at, and of each only its first
    bars (a page of 1,000 windows pays for the few that cover now)."""
    active = [state.window for state in view.windows if state.active]
    if not active:
        return {}
    lanes = {lane.scope: lane for lane in view.lanes}
    found: dict[str, list[tuple[Bar, Window]]] = {}
    for window in active:
        lane = lanes.get(window.scope)
        piece = next((s for s in lane.slices if s.window is window), None) if lane is not None else None
        for bar in piece.bars if piece is not None else ():
            if (bar.drain_from or bar.start) > view.now:
                break
            if bar.state == "active":
                found.setdefault(window.scope, []).append((bar, window))
    for pairs in found.values():
        pairs.sort(key=lambda pair: (pair[0].end, pair[0].window))
    return found
