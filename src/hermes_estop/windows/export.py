"""The schedule as an iCalendar feed (issue 27): `hermes windows export --ics` and `GET
/calendar.ics` of `hermes serve --http`. One VEVENT per occurrence of the next `days`, its UID
from the occurrence's key so a subscription updates in place; a skipped one is CANCELLED. Read
back as a `[[calendars]]` source, the export gives the same occurrences.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from itertools import islice, takewhile

from hermes_estop.model.text import printable
from hermes_estop.windows.forecast import Ahead, ledger_state
from hermes_estop.windows.ledger import SKIPPED, LedgerEntry
from hermes_estop.windows.model import Occurrence, Window

__all__ = ["MAX_EXPORT_DAYS", "ics_of", "planned"]

MAX_EXPORT_DAYS = 366
#: at most this many events in one export (a minutely window would otherwise fill it)
MAX_EXPORT_EVENTS = 20_000


def planned(found: Iterable[Ahead], now: datetime, days: int) -> list[tuple[Window, Occurrence]]:
    """The occurrences of `found` (`forecast.ahead` of each enabled window) arming before `now + days`, by start."""
    out: list[tuple[Window, Occurrence]] = []
    until = now + timedelta(days=days)
    for window_of, following in found:
        room = islice(following, MAX_EXPORT_EVENTS - len(out))
        armed = list(takewhile(lambda occurrence: occurrence.arm_at < until, room))
        if armed:
            window = window_of()  # built only for a row with an occurrence to export
            out.extend((window, occurrence) for occurrence in armed)
    return sorted(out, key=lambda pair: (pair[1].start, pair[1].window, pair[1].ident))


def ics_of(events: Iterable[tuple[Window, Occurrence]], entries: Mapping[str, LedgerEntry], now: datetime) -> bytes:
    import icalendar

    calendar = icalendar.Calendar()
    calendar.add("PRODID", "-//hermes-estop//maintenance windows//EN")
    calendar.add("VERSION", "2.0")
    calendar.add("CALSCALE", "GREGORIAN")
    calendar.add("X-WR-CALNAME", "hermes-estop maintenance")
    for window, occurrence in events:
        event = icalendar.Event()
        # stable across exports and processes: from `<scope>/<window>@<occurrence>`
        event.add("UID", hashlib.sha256(occurrence.key.encode("utf-8")).hexdigest()[:32] + "@hermes-estop")
        event.add("DTSTAMP", now)
        event.add("DTSTART", occurrence.start)
        event.add("DTEND", occurrence.end)
        event.add("SUMMARY", printable(window.reason_for(occurrence.reason)))
        drains = f"; the fleet drains from {occurrence.arm_at.isoformat()}" if occurrence.lead else ""
        event.add("DESCRIPTION", printable(f"window {window.name} at {window.scope}; occurrence {occurrence.ident}{drains}"))
        event.add("CATEGORIES", ["maintenance", window.scope])
        event.add("X-HERMES-KEY", occurrence.key)
        event.add("STATUS", "CANCELLED" if ledger_state(entries, occurrence) == SKIPPED else "CONFIRMED")
        calendar.add_component(event)
    return bytes(calendar.to_ical())
