"""What the windows hold ahead, from a `Schedule`: `ahead` (one window's occurrences from an
instant on, its `Window` built only when asked), which `status`, `explain` and `export` read too,
and `WindowSource`, the `hermes_estop.hold_sources` entry point `Estop.forecast` finds (the core
never imports windows).

An occurrence is planned as the hold the scheduler would arm (docs/design.md §6): `[arm_at, end)`
at the window's scope with its allowlist; one the ledger closed is not armed again and does not
count. A `windows.toml` that cannot be used raises (never "no window"); a ledger that cannot be
read counts every occurrence, with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant
from hermes_estop.process.forecast import EstopView, PlannedHold
from hermes_estop.windows.ledger import ENDED, RELEASED, SKIPPED, LedgerEntry, open_ledger
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import occurrences
from hermes_estop.windows.plan import ARMED_BY_PREFIX
from hermes_estop.windows.schedule import Item, Schedule, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

if TYPE_CHECKING:
    from hermes_estop.fleet.fleet import Fleet

__all__ = ["CLOSED", "MAX_OCCURRENCES", "WindowSource", "ahead", "enabled", "ledger_entries", "window_ahead",
           "window_holds"]

#: past this many occurrences of one window (a minutely window: about a week) the rest of the range
#: is assumed held by it, with a note, rather than computing a minutely window over a year
MAX_OCCURRENCES = 10_000
#: ledger states of an occurrence that will not be armed (again)
CLOSED = frozenset({SKIPPED, RELEASED, ENDED})

Ahead = tuple[Callable[[], Window], Iterator[Occurrence]]


def window_ahead(window: Window, t: datetime) -> Ahead:
    """`ahead` of a `Window` held as it is (the status page's last valid ones), by the exact functions."""
    return (lambda: window), (o for o in occurrences(window, t - window.duration) if not o.ended(t))


def ahead(schedule: Schedule, item: Item, t: datetime) -> Ahead:
    """The `Window` of `item` (a row of `schedule`: built once, only when asked) and its
    occurrences not ended at `t`, in order: what holds from `t` on."""
    built: list[Window] = []

    def window_of() -> Window:  # not `functools.cache`: making one costs 17 us, a tenth of `status`
        if not built:
            built.append(schedule.window(item))
        return built[0]

    return window_of, schedule.not_ended(item, t)


def enabled(schedule: Schedule, scopes: set[str] | None = None) -> list[Item]:
    """The enabled windows of `schedule` (at one of `scopes`, when given), in file order."""
    return [item for item in schedule.in_file_order()
            if schedule.enabled[item] and (scopes is None or schedule.scopes[item] in scopes)]


def window_holds(window: Window, start: datetime, end: datetime, entries: Mapping[str, LedgerEntry] | None = None,
                 *, limit: int = MAX_OCCURRENCES, note: str | None = None) -> list[PlannedHold]:
    """The planned holds of `window`'s occurrences active at some instant of `[start, end)`, in
    order (those covering `start`, drain lead included, and those armed before `end`), less
    those `entries` (the ledger) closed; `note` goes on every hold. Past `limit` occurrences,
    one hold from the next one's arm time to `end` stands for the rest, with a note."""
    return _holds(window_ahead(window, start), end, entries or {}, limit, note)


def _holds(found: Ahead, end: datetime, closed: Mapping[str, LedgerEntry], limit: int,
           note: str | None) -> list[PlannedHold]:
    window_of, following = found
    out: list[PlannedHold] = []
    for seen, occurrence in enumerate(following, start=1):
        if occurrence.arm_at >= end:
            break
        window = window_of()
        if seen > limit:
            out.append(PlannedHold(
                window.scope, occurrence.arm_at, end, window.hold_allow, window.reason_for(None),
                f"{ARMED_BY_PREFIX}{window.name}", occurrence.ident, selector=window.selector,
                note=(f"forecast of window {window.name} stopped after {limit} occurrences: assumed held by it "
                      f"from {display_instant(occurrence.arm_at)} to the end of the range"),
            ))
            break
        entry = closed.get(occurrence.key)
        if entry is not None and entry.state in CLOSED:
            continue
        out.append(PlannedHold(window.scope, occurrence.arm_at, occurrence.end, window.hold_allow,
                               window.reason_for(occurrence.reason), f"{ARMED_BY_PREFIX}{window.name}",
                               occurrence.ident, note=note, selector=window.selector))
    return out


class WindowSource:
    """The windows of the fleet's `windows.toml` as a `forecast.HoldSource`."""

    def __init__(self, limit: int = MAX_OCCURRENCES) -> None:
        self.limit = limit

    def planned(self, estop: EstopView, start: datetime, end: datetime) -> list[PlannedHold]:
        """Raises `InvalidWindow` / `StoreError` (one line naming the file) when `windows.toml`
        cannot be used."""
        schedule = schedule_of(WindowsFile(estop.layout.root), estop.clock())
        items = enabled(schedule, {location.scope for location in estop.locations})
        if not items:
            return []
        entries, problem = ledger_entries(estop.fleet)
        note = f"the windows ledger cannot be read ({problem}): skipped occurrences counted as held" if problem else None
        return [hold for item in items
                for hold in _holds(ahead(schedule, item, start), end, entries, self.limit, note)]


def ledger_entries(fleet: Fleet) -> tuple[dict[str, LedgerEntry], str | None]:
    """The ledger's entries, or none and the one-line problem (a read never raises: every
    occurrence then counts, held is the safe side)."""
    try:
        ledger = open_ledger(fleet)
        try:
            return ledger.load(), None
        finally:
            ledger.close()
    except (EstopError, OSError) as exc:
        return {}, one_line(exc)
