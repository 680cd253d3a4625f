"""The window occurrences a forecast counts (issue 11 section 3): `WindowSource`, the
`hermes_estop.hold_sources` entry point `Estop.forecast` finds (the core never imports windows).

Each occurrence of an enabled window at a scope the principal sees is one planned hold over
`[arm_at, end)` (`Occurrence.arm_at`: the start less the window's drain lead), at the window's
scope, with the window's allowlist: exactly the hold the scheduler would arm for it
(docs/design.md §6). An occurrence that starts before the range but still covers its first
instant counts. Exclusions (`exclude`, `exclude_cron`) are the occurrence functions' own; an
occurrence the ledger has closed (skipped by the operator or by the scheduler, released early,
ended) is not armed again and is not counted.

Fail safe: a `windows.toml` that cannot be read or does not validate raises (one line naming the
file: the CLI exits 2), never reads as "no window"; a ledger that cannot be read counts every
occurrence, skipped or not, with a note. The work is bounded: past `MAX_OCCURRENCES` occurrences
of one window the rest of the range is assumed held by that window (same scope and allowlist),
with a note saying so, rather than computing a minutely window over a year.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import cache, partial

from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant
from hermes_estop.process.forecast import EstopView, PlannedHold
from hermes_estop.windows.ledger import ENDED, RELEASED, SKIPPED, LedgerEntry, open_ledger
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import Occurrence, occurrences
from hermes_estop.windows.plan import ARMED_BY_PREFIX
from hermes_estop.windows.schedule import Item, Schedule, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["CLOSED", "MAX_OCCURRENCES", "WindowSource", "window_holds"]

#: at most this many occurrences of one window are computed per forecast (a minutely window:
#: about a week); the rest of the range is then assumed held by the window
MAX_OCCURRENCES = 10_000
#: ledger states of an occurrence that will not be armed (again)
CLOSED = frozenset({SKIPPED, RELEASED, ENDED})


def window_holds(window: Window, start: datetime, end: datetime, entries: Mapping[str, LedgerEntry] | None = None,
                 *, limit: int = MAX_OCCURRENCES, note: str | None = None) -> list[PlannedHold]:
    """The planned holds of `window`'s occurrences active at some instant of `[start, end)`, in
    order: those covering `start` (drain lead included) and those armed before `end`. Pure.
    `entries`: the ledger (an occurrence it has closed is left out); `note` goes on every hold
    (why it is uncertain). Past `limit` occurrences, one hold from the next one's arm time to
    `end` stands for the rest, with a note."""
    following = (o for o in occurrences(window, start - window.duration) if not o.ended(start))
    return _holds(partial(_same, window), following, end, entries or {}, limit, note)


def _same(window: Window) -> Window:
    return window


def _holds(window_of: Callable[[], Window], following: Iterator[Occurrence], end: datetime,
           closed: Mapping[str, LedgerEntry], limit: int, note: str | None) -> list[PlannedHold]:
    """`window_holds` of the occurrences `following` (one window's, not ended at the range's
    start, in order); `window_of()` is asked only when one of them is in the range."""
    out: list[PlannedHold] = []
    for seen, occurrence in enumerate(following, start=1):
        if occurrence.arm_at >= end:
            break
        window = window_of()
        if seen > limit:
            out.append(PlannedHold(
                window.scope, occurrence.arm_at, end, window.hold_allow, window.hold_reason,
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
        cannot be used. Answered from the file's compiled schedule (a `Window` built only for a
        row with an occurrence in the range; a calendar's window from its feed)."""
        scopes = {location.scope for location in estop.locations}
        schedule = schedule_of(WindowsFile(estop.layout.root), estop.clock())
        items = [item for item in schedule.in_file_order() if _armed_in(schedule, item, scopes)]
        if not items:
            return []
        entries, note = _ledger(estop)
        out: list[PlannedHold] = []
        for item in items:
            if isinstance(item, int):
                out.extend(_holds(cache(partial(schedule.window, item)), schedule.not_ended(item, start), end, entries,
                                  self.limit, note))
            else:
                out.extend(window_holds(item, start, end, entries, limit=self.limit, note=note))
        return out


def _armed_in(schedule: Schedule, item: Item, scopes: set[str]) -> bool:
    """Whether `item` (a row of `schedule`, or a bound window) is enabled, in one of `scopes`."""
    if isinstance(item, int):
        return schedule.enabled[item] and schedule.scopes[item] in scopes
    return item.enabled and item.scope in scopes


def _ledger(estop: EstopView) -> tuple[dict[str, LedgerEntry], str | None]:
    """The ledger's entries, or none and a note when it cannot be read (every occurrence then
    counts: held is the safe side)."""
    try:
        ledger = open_ledger(estop.fleet)
    except (EstopError, OSError) as exc:
        return {}, f"the windows ledger cannot be read ({one_line(exc)}): skipped occurrences counted as held"
    try:
        return ledger.load(), None
    except (EstopError, OSError) as exc:
        return {}, f"the windows ledger cannot be read ({one_line(exc)}): skipped occurrences counted as held"
    finally:
        ledger.close()
