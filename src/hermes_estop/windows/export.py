"""The schedule as an iCalendar feed (issue 27): `hermes windows export --ics` and `GET
/calendar.ics` of `hermes serve --http`. One VEVENT per occurrence of the next `days`, its UID
from the occurrence's key so a subscription updates in place; a skipped one is CANCELLED. Read
back as a `[[calendars]]` source, the export gives the same occurrences.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from hermes_estop.model.text import printable
from hermes_estop.windows.forecast import Ahead, ahead, enabled, window_ahead
from hermes_estop.windows.ledger import SKIPPED, LedgerEntry
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import Occurrence
from hermes_estop.windows.schedule import Schedule

__all__ = ["MAX_EXPORT_DAYS", "export_ics", "export_uid", "ics_of", "planned", "planned_rows"]

MAX_EXPORT_DAYS = 366
#: at most this many events in one export (a minutely window would otherwise fill it)
MAX_EXPORT_EVENTS = 20_000
_PRODID = "-//hermes-estop//maintenance windows//EN"


def export_uid(occurrence: Occurrence) -> str:
    """Stable across exports and processes: from `<scope>/<window>@<occurrence>`."""
    return hashlib.sha256(occurrence.key.encode("utf-8")).hexdigest()[:32] + "@hermes-estop"


def planned(windows: Iterable[Window], now: datetime, days: int) -> list[tuple[Window, Occurrence]]:
    """The occurrences of the enabled `windows` not ended at `now` that arm before `now + days`."""
    return _planned((window_ahead(window, now) for window in windows if window.enabled), now, days)


def planned_rows(schedule: Schedule, now: datetime, days: int) -> list[tuple[Window, Occurrence]]:
    """`planned` of the windows of `schedule`, a `Window` built only for a row with an
    occurrence in the range."""
    return _planned((ahead(schedule, item, now) for item in enabled(schedule)), now, days)


def _planned(windows: Iterable[Ahead], now: datetime, days: int) -> list[tuple[Window, Occurrence]]:
    out: list[tuple[Window, Occurrence]] = []
    until = now + timedelta(days=days)
    for window_of, following in windows:
        for occurrence in following:
            if occurrence.arm_at >= until or len(out) >= MAX_EXPORT_EVENTS:
                break
            out.append((window_of(), occurrence))
    return sorted(out, key=lambda pair: (pair[1].start, pair[1].window, pair[1].ident))


def export_ics(windows: Iterable[Window], entries: Mapping[str, LedgerEntry], now: datetime, days: int,
               name: str = "hermes-estop maintenance") -> bytes:
    return ics_of(planned(windows, now, days), entries, now, name)


def ics_of(events: Iterable[tuple[Window, Occurrence]], entries: Mapping[str, LedgerEntry], now: datetime,
           name: str = "hermes-estop maintenance") -> bytes:
    """The feed of the planned occurrences `events` (`planned`, `planned_rows`)."""
    import icalendar

    calendar = icalendar.Calendar()
    calendar.add("PRODID", _PRODID)
    calendar.add("VERSION", "2.0")
    calendar.add("CALSCALE", "GREGORIAN")
    calendar.add("X-WR-CALNAME", name)
    for window, occurrence in events:
        event = icalendar.Event()
        event.add("UID", export_uid(occurrence))
        event.add("DTSTAMP", now)
        event.add("DTSTART", occurrence.start)
        event.add("DTEND", occurrence.end)
        event.add("SUMMARY", printable(window.reason_for(occurrence.reason)))
        lines = [f"window {window.name} at {window.scope}", f"occurrence {occurrence.ident}"]
        if occurrence.lead:
            lines.append(f"the fleet drains from {occurrence.arm_at.isoformat()}")
        event.add("DESCRIPTION", printable("; ".join(lines)))
        event.add("CATEGORIES", ["maintenance", window.scope])
        event.add("X-HERMES-KEY", occurrence.key)
        entry = entries.get(occurrence.key)
        event.add("STATUS", "CANCELLED" if entry is not None and entry.state == SKIPPED else "CONFIRMED")
        calendar.add_component(event)
    data: bytes = calendar.to_ical()
    return data
