"""Why a window does or does not hold at an instant (`hermes windows explain`, issue 11 §3): the
chain of facts the scheduler goes by, in the order it applies them. Pure: no file or ledger read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import islice, takewhile
from typing import Any

from hermes_estop.model.cronspec import starts as cron_starts
from hermes_estop.model.durations import format_duration
from hermes_estop.model.timeutil import display_instant, format_instant, in_interval
from hermes_estop.windows.forecast import Ahead, ledger_state
from hermes_estop.windows.ledger import ARMED, RELEASED, SKIPPED, WITHDRAWN, LedgerEntry
from hermes_estop.windows.model import Occurrence

__all__ = ["MAX_EXCLUDED_SHOWN", "Explanation", "explain"]

#: at most this many excluded starts are listed between the instant and the next occurrence
MAX_EXCLUDED_SHOWN = 10

#: what the ledger's state says, where its name alone does not
_LEDGER_SAYS = {
    SKIPPED: "skipped: it does not arm",
    RELEASED: "released early by the operator: it is not re-armed",
    WITHDRAWN: "withdrawn (its window was removed, disabled or moved while it held)",
}


@dataclass(frozen=True)
class Explanation:
    """`holds`: the window's hold stands at `at`; `facts`: why, in the order the scheduler applies them."""

    window: str
    scope: str
    at: datetime
    holds: bool
    facts: tuple[str, ...]
    covering: Occurrence | None
    next: Occurrence | None
    excluded: tuple[datetime, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "scope": self.scope,
            "at": format_instant(self.at),
            "holds": self.holds,
            "facts": list(self.facts),
            "covering": _occurrence_json(self.covering),
            "next": _occurrence_json(self.next),
            "excluded": [format_instant(s) for s in self.excluded],
        }


def _occurrence_json(occurrence: Occurrence | None) -> dict[str, Any] | None:
    if occurrence is None:
        return None
    return {"occurrence": occurrence.ident, "start": format_instant(occurrence.start),
            "end": format_instant(occurrence.end), "arm_at": format_instant(occurrence.arm_at)}


def explain(found: Ahead, at: datetime, entries: Mapping[str, LedgerEntry]) -> Explanation:
    """The facts that decide whether the window of `found` (its occurrences not ended at `at`)
    holds its scope at `at`."""
    window_of, following = found
    window = window_of()
    span = "each event as long as it lasts" if window.feed is not None else f"{window.describe_duration()} long"
    if window.drain:
        span += f"{', each' if window.feed is not None else ''} after a {format_duration(window.drain)} drain lead"
    facts = [f"schedule: {window.describe_schedule()}, {span}, scope {window.scope}"]
    if not window.enabled:
        facts.append("disabled (enabled = false): it arms nothing")
    if window.not_after is not None and not in_interval(at, None, window.not_after):
        facts.append(f"not_after {display_instant(window.not_after)} has passed: no occurrence starts any more")
    elif window.not_before is not None and in_interval(at, None, window.not_before):
        facts.append(f"not_before {display_instant(window.not_before)}: no occurrence starts before it")
    current = upcoming = None
    for occurrence in following:  # those covering `at` come first
        if not occurrence.covers(at):
            upcoming = occurrence
            break
        current = occurrence
    holds = False
    if current is not None:
        entry = entries.get(current.key)
        holds = window.enabled and (entry is None or entry.state == ARMED)
        part = "its drain lead" if at < current.start else "it"
        facts.append(f"occurrence {current.ident} covers {display_instant(at)} ({part}): held from "
                     f"{display_instant(current.arm_at)} until {display_instant(current.end)} (the deadman)")
        if current.uid is not None:
            facts.append(f"from calendar {window.name}: event UID {current.uid!r}, {current.reason!r}")
        if entry is None:
            facts.append("the scheduler has not recorded it yet: it arms it at its first pass")
        else:
            said = _LEDGER_SAYS.get(entry.state, entry.state)
            generation = f" as generation {entry.generation}" if entry.generation and entry.state == ARMED else ""
            detail = f" ({entry.detail})" if entry.detail else ""
            facts.append(f"the ledger says: {said}{generation}{detail}")
    excluded: list[datetime] = []
    if window.cron is not None and (window.exclude or window.exclude_cron or window.exclude_calendar):
        starts = islice(cron_starts(window.cron, window.tz, at), 10 * MAX_EXCLUDED_SHOWN + 1)
        before = takewhile(lambda start: upcoming is None or start < upcoming.start, starts)
        excluded = list(islice(filter(window.excludes, before), MAX_EXCLUDED_SHOWN))
    if excluded:
        shown = ", ".join(display_instant(s) or "" for s in excluded)
        facts.append(f"excluded start(s) (exclude / exclude_cron / exclude_calendar): {shown}")
    if upcoming is not None:
        skipped = " (skipped)" if ledger_state(entries, upcoming) == SKIPPED else ""
        event = f" (event UID {upcoming.uid!r}, {upcoming.reason!r})" if upcoming.uid is not None else ""
        facts.append(f"next occurrence: {upcoming.ident}{event}, held from {display_instant(upcoming.arm_at)} "
                     f"until {display_instant(upcoming.end)}{skipped}")
    elif current is None:
        facts.append("no occurrence ahead")
    verdict = f"holds {window.scope} at {display_instant(at)}" if holds else f"does not hold at {display_instant(at)}"
    facts.append(f"so window {window.name} {verdict}")
    return Explanation(window.name, window.scope, at, holds, tuple(facts), current, upcoming, tuple(excluded))
