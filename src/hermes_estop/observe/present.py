"""What covers now, and an instant as the people it concerns read it: the status page and its
timeline name each occurrence covering now with its end, and put every occurrence's times in UTC
and in its window's own zone (a window defined in America/New_York is read there).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from .fleetview import Bar, FleetView, Lane

__all__ = ["covering", "in_zones", "short_utc", "utc", "zones"]


def utc(when: datetime) -> str:
    """An instant in UTC, to the second."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def short_utc(when: datetime) -> str:
    """An instant in UTC to the minute with its weekday: short enough for a timeline label."""
    return when.astimezone(UTC).strftime("%a %d %b %H:%M UTC")


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


def zones(view: FleetView) -> dict[str, tzinfo]:
    """Each window's zone, by window name."""
    return {state.window.name: state.window.tz for state in view.windows}


def covering(lane: Lane, now: datetime) -> list[Bar]:
    """The lane's occurrences covering `now` (drain lead included), by end: each window's are
    its first bars, so only those are looked at."""
    found = []
    for piece in lane.slices:
        for bar in piece.bars:
            if (bar.drain_from or bar.start) > now:
                break
            if bar.state == "active":
                found.append(bar)
    return sorted(found, key=lambda bar: (bar.end, bar.window))
