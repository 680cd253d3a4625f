"""What the windows hold ahead, as `WindowSource`: the `hermes_estop.hold_sources` entry point
`Estop.forecast` finds (the core never imports windows).

An occurrence is planned as the hold the scheduler would arm (docs/design.md §6): `[arm_at, end)`
at the window's scope with its allowlist; one the ledger closed is not armed again and does not
count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import replace
from datetime import datetime
from itertools import islice

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant
from hermes_estop.process.forecast import EstopView, PlannedHold
from hermes_estop.windows.ledger import CLOSED, LedgerEntry, open_ledger
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import occurrences
from hermes_estop.windows.plan import ARMED_BY_PREFIX
from hermes_estop.windows.schedule import Schedule, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["MAX_OCCURRENCES", "WindowSource", "ahead", "enabled", "ledger_entries", "ledger_state", "planned_holds", "window_ahead"]

#: past this many occurrences of one window (a minutely window: about a week) the rest of the range
#: is assumed held by it, with a note, rather than computing a minutely window over a year
MAX_OCCURRENCES = 10_000

Ahead = tuple[Callable[[], Window], Iterator[Occurrence]]


def window_ahead(window: Window, t: datetime) -> Ahead:
    """`ahead` of a `Window` held as it is (the status page's last valid ones), by the exact functions."""
    return (lambda: window), (o for o in occurrences(window, t - window.duration) if not o.ended(t))


def ahead(schedule: Schedule, item: int, t: datetime) -> Ahead:
    """The `Window` of `item` (a row of `schedule`: built when asked, so each consumer asks once)
    and its occurrences not ended at `t`, in order: what holds from `t` on."""
    return functools.partial(schedule.window, item), schedule.not_ended(item, t)


def enabled(schedule: Schedule, scopes: set[str] | None = None) -> list[int]:
    return [item for item in range(len(schedule))
            if schedule.enabled[item] and (scopes is None or schedule.scopes[item] in scopes)]


def planned_holds(found: Ahead, end: datetime, entries: Mapping[str, LedgerEntry] | None = None, *,
                  limit: int = MAX_OCCURRENCES, note: str | None = None) -> list[PlannedHold]:
    """The planned holds of `found` (`ahead` / `window_ahead` at the range's start) active before
    `end`, in order, less those `entries` closed; `note` goes on every hold. Past `limit`
    occurrences, one hold from the next one's arm time to `end` stands for the rest, with a note."""
    window_of, following = found
    out: list[PlannedHold] = []
    window: Window | None = None
    for seen, occurrence in enumerate(islice(following, limit + 1), start=1):
        if occurrence.arm_at >= end:
            break
        window = window if window is not None else window_of()
        if seen > limit:  # the last: the hold standing for the rest, to `end`, with the window's own reason
            note = (f"forecast of window {window.name} stopped after {limit} occurrences: assumed held by it "
                    f"from {display_instant(occurrence.arm_at)} to the end of the range")
            occurrence = replace(occurrence, end=end, reason=None)
        elif ledger_state(entries, occurrence) in CLOSED:
            continue
        out.append(PlannedHold(window.scope, occurrence.arm_at, occurrence.end, window.hold_allow,
                               window.reason_for(occurrence.reason), f"{ARMED_BY_PREFIX}{window.name}",
                               occurrence.ident, note=note, selector=window.selector))
    return out


class WindowSource:
    """The windows of the fleet's `windows.toml` as a `forecast.HoldSource`."""

    def planned(self, estop: EstopView, start: datetime, end: datetime) -> list[PlannedHold]:
        """Raises `InvalidWindow` / `StoreError` (one line naming the file) when `windows.toml`
        cannot be used (never "no window")."""
        schedule = schedule_of(WindowsFile(estop.layout.root), estop.clock())
        items = enabled(schedule, {location.scope for location in estop.locations})
        if not items:
            return []
        entries, problem = ledger_entries(estop.fleet)
        note = f"the windows ledger cannot be read ({problem}): skipped occurrences counted as held" if problem else None
        return [hold for item in items
                for hold in planned_holds(ahead(schedule, item, start), end, entries, note=note)]


def ledger_entries(fleet: Fleet) -> tuple[dict[str, LedgerEntry], str | None]:
    """The ledger's entries, or none and the one-line problem (a read never raises: every
    occurrence then counts, held is the safe side)."""
    try:
        with closing(open_ledger(fleet)) as ledger:
            return ledger.load(), None
    except (EstopError, OSError) as exc:
        return {}, one_line(exc)


def ledger_state(entries: Mapping[str, LedgerEntry] | None, occurrence: Occurrence | None) -> str | None:
    """What the ledger says of `occurrence` (its key is made only when there is a ledger)."""
    entry = entries.get(occurrence.key) if occurrence is not None and entries else None
    return entry.state if entry is not None else None
