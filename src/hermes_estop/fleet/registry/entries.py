"""The consumer registry's model: who starts work in the fleet, what each last saw, and what
that proves (docs/design.md §8a "Acknowledged stops").

Every long-running process that starts work (the cron ticker, the kanban dispatcher, a gateway,
an APScheduler adapter, a user loop) keeps one `ConsumerEntry` in the store (`stores.registry`): who it is (component,
host, pid and the pid's start time, home, the scopes it honours) and, from its loop, the
engagement it last observed (scope and generation of each active hold) and its verdict.

The decisions are pure functions of (entry, now, is-alive), so they are tested with a fake clock:
`consumer_state` (live, stalled, lost, and when a lost entry is pruned) and `acknowledges` (has
this consumer seen that hold arrive, or that release?). An acknowledgement proves the consumer's
own loop read the hold after it was written and finished the pass it was in; it does not prove
that no other code path starts work (`hermes doctor` looks for those).
"""

from __future__ import annotations

import socket
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING

from hermes_estop.stores.registry import ConsumerEntry
from hermes_estop.system.processes import same_process, start_time

if TYPE_CHECKING:
    from hermes_estop.model.hold import Snapshot
    from hermes_estop.model.selector import Selector

__all__ = [
    "ALL_SCOPES",
    "LOST_AFTER_MISSED",
    "MIN_REPORT_INTERVAL",
    "PRUNE_AFTER",
    "Ack",
    "ConsumerEntry",
    "ConsumerState",
    "acknowledges",
    "consumer_state",
    "covers",
    "overdue_after",
    "prunable",
    "is_alive",
    "observed_holds",
    "this_host",
]

#: a consumer reports at most this often (seconds), besides whenever what it sees changes
MIN_REPORT_INTERVAL = 1.0
#: a consumer on another host is lost after this many reports missed in a row
LOST_AFTER_MISSED = 3
#: a lost entry is removed from the registry this long after its last report
PRUNE_AFTER = timedelta(days=1)
#: the scope a consumer lists when it honours every scope of the fleet (a kanban dispatcher)
ALL_SCOPES = "*"
#: how late a report may be, on top of one interval, before it counts as missed (a loaded host)
_SLACK = timedelta(seconds=1)


class ConsumerState(Enum):
    """`live`: reporting on time. `stalled`: late, while known (or not known not) to be alive —
    a SIGSTOPped or wedged loop. `lost`: known gone (same host: its pid ended or was reused), or
    `LOST_AFTER_MISSED` reports late on another host; a lost consumer never holds up a wait."""

    LIVE = "live"
    STALLED = "stalled"
    LOST = "lost"


def overdue_after(entry: ConsumerEntry) -> timedelta:
    """How long after its last report a consumer counts as late (one interval and a slack)."""
    return timedelta(seconds=entry.interval) + _SLACK


def consumer_state(entry: ConsumerEntry, now: datetime, alive: bool | None) -> ConsumerState:
    """The state of `entry` at `now`. `alive`: whether its pid still runs with its start time
    (None when that cannot be known: another host). A report dated in the future (a skewed
    clock) counts as on time."""
    if alive is False:
        return ConsumerState.LOST
    age = now - entry.reported_at
    if age <= overdue_after(entry):
        return ConsumerState.LIVE
    if alive is None and age > timedelta(seconds=entry.interval * LOST_AFTER_MISSED) + _SLACK:
        return ConsumerState.LOST
    return ConsumerState.STALLED


def prunable(entry: ConsumerEntry, now: datetime, state: ConsumerState) -> bool:
    """A lost entry is removed a day after its last report (kept that long for the incident)."""
    return state is ConsumerState.LOST and now - entry.reported_at > PRUNE_AFTER


def covers(entry: ConsumerEntry, scope: str) -> bool:
    """A hold at `scope` covers this consumer: it honours that scope (or every scope)."""
    return ALL_SCOPES in entry.scopes or scope in entry.scopes


@dataclass(frozen=True)
class Ack:
    """What a waiter waits for: the hold at `scope` with `generation` to be seen (`engaged`),
    or, after a release, to be seen gone by a report newer than `after_seq[key]`."""

    scope: str
    generation: str
    engaged: bool
    #: per consumer key, the last report number before the write (a release is acknowledged
    #: only by a later report)
    after_seq: dict[str, int] = field(default_factory=dict)
    #: other generations of the same hold (a lease's renewals re-arm it under new generations
    #: while the waiter waits); the set may grow during the wait
    also: Collection[str] = frozenset()
    #: what the hold covers (a scoped hold's `Selector`); None: everything
    selector: Selector | None = None


def acknowledges(entry: ConsumerEntry, ack: Ack) -> bool:
    """`entry`'s last report acknowledges `ack`: it saw that hold (engage; any of its
    generations), or a report made after the release no longer sees it."""
    seen = (ack.scope, ack.generation) in entry.observed or any((ack.scope, g) in entry.observed for g in tuple(ack.also))
    if ack.engaged:
        return seen
    return entry.seq > ack.after_seq.get(entry.key, -1) and not seen


def this_host() -> str:
    return socket.gethostname()


def is_alive(entry: ConsumerEntry, host: str | None = None) -> bool | None:
    """Whether `entry`'s process still runs (its pid with its start time), None when it is on
    another host and cannot be asked."""
    if entry.host != (host if host is not None else this_host()):
        return None
    if entry.pid_start is None:
        return start_time(entry.pid) is not None
    return same_process(entry.pid, entry.pid_start)


def observed_holds(snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """(scope, generation) of every active hold of `snapshot`, sorted ("?" where it has none:
    an unreadable or hand-written hold)."""
    return tuple(sorted({(r.location.scope, (r.fence.generation if r.fence is not None else None) or "?")
                         for r in snapshot.every_active}))
