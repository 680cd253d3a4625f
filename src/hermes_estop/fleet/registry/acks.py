"""Waiting for an acknowledged stop (`hermes pause --wait`, `resume --wait`, `drain`): know, not
hope, that every consumer a hold covers has seen it.

`owes` is THE rule every wait follows (`pause --wait`, `resume --wait`, `drain`, `hermes run
--wait`): an acknowledgement is owed by every registered consumer the hold covers (its scope,
and its selector's components and jobs), and by no other. `survey` is pure: which registered
consumers owe it, and of those which acknowledged, which are lost (never waited for; listed)
and which are still awaited (live or stalled). `wait_for_acks` polls the registry through the
fleet until none is awaited or the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.registry.entries import Ack, ConsumerState, acknowledges, consumer_state, covers, is_alive, this_host
from hermes_estop.model.hold import ALL_WORK, Hold, covers as covers_text
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.stores.registry import ConsumerEntry

if TYPE_CHECKING:
    from hermes_estop.model.selector import Selector

__all__ = ["AckSurvey", "Awaited", "ack_for_hold", "ack_for_release", "owes", "survey", "wait_for_acks"]

#: seconds between reads of the registry while waiting
POLL = 0.05


@dataclass(frozen=True)
class Awaited:
    """A consumer the hold covers that has not acknowledged it yet, and its state."""

    entry: ConsumerEntry
    state: ConsumerState

    def describe(self, now: datetime) -> str:
        seen = (now - self.entry.reported_at).total_seconds()
        return (f"{self.entry.describe()} ({self.state.value}; last seen {display_instant(self.entry.reported_at)}, "
                f"{seen:.1f}s ago)")


@dataclass(frozen=True)
class AckSurvey:
    """One look at the registry for `ack`."""

    now: datetime
    acknowledged: tuple[ConsumerEntry, ...] = ()
    awaited: tuple[Awaited, ...] = ()
    lost: tuple[ConsumerEntry, ...] = ()
    #: why the registry could not be read (awaited consumers cannot be known)
    problem: str | None = None
    waited: float = 0.0
    #: (consumer key -> seconds from the write to its acknowledgement, as far as the waiter saw)
    latencies: dict[str, float] = field(default_factory=dict)
    #: registered consumers the hold does not cover: no acknowledgement is owed by them
    not_owed: tuple[ConsumerEntry, ...] = ()
    #: what the hold covers, as `describe.covers` says it ("all", "kanban", "cron:nightly-*")
    covers: str = ALL_WORK

    @property
    def owed(self) -> tuple[ConsumerEntry, ...]:
        """The consumers that owe an acknowledgement and are not lost, in key order."""
        return tuple(sorted((*self.acknowledged, *(a.entry for a in self.awaited)), key=lambda e: e.key))

    @property
    def done(self) -> bool:
        return self.problem is None and not self.awaited

    @property
    def covered(self) -> int:
        return len(self.acknowledged) + len(self.awaited)

    def to_json(self) -> dict[str, Any]:
        def row(entry: ConsumerEntry) -> dict[str, Any]:
            return {"component": entry.component, "host": entry.host, "pid": entry.pid,
                    "last_seen": format_instant(entry.reported_at)}

        return {"acknowledged": len(self.acknowledged), "covered": self.covered, "done": self.done,
                "waited_seconds": round(self.waited, 3), "problem": self.problem,
                "awaited": [row(a.entry) | {"state": a.state.value} for a in self.awaited],
                "lost": [row(e) for e in self.lost], "covers": self.covers,
                "owed": [row(e) for e in self.owed], "not_owed": [row(e) for e in self.not_owed]}


def owes(entry: ConsumerEntry, ack: Ack) -> bool:
    """Whether `entry` owes an acknowledgement of `ack`: it honours the hold's scope, and the
    hold's selector covers its component. A consumer does not say which jobs it runs, so any
    consumer of a covered component may run a covered job: a job glob never excuses one (a wait
    never asks less than the hold holds)."""
    if not covers(entry, ack.scope):
        return False
    return ack.selector is None or ack.selector.covers(entry.component, None)


def ack_for_hold(scope: str, hold: Hold) -> Ack:
    """The acknowledgement of `hold`, just written at `scope`: owed by the consumers its
    selector covers."""
    return Ack(scope, hold.generation or "?", engaged=True, selector=hold.selector)


def survey(entries: list[ConsumerEntry], ack: Ack, now: datetime,
           alive: Callable[[ConsumerEntry], bool | None]) -> AckSurvey:
    """Sort the consumers that `ack`'s scope covers: acknowledged, awaited, lost. Pure but for
    `alive` (same host: its pid and start time still match)."""
    done, awaited, lost, not_owed = [], [], [], []
    for entry in sorted(entries, key=lambda e: e.key):
        if not owes(entry, ack):
            not_owed.append(entry)
            continue
        state = consumer_state(entry, now, alive(entry))
        if state is ConsumerState.LOST:
            lost.append(entry)
        elif acknowledges(entry, ack):
            done.append(entry)
        else:
            awaited.append(Awaited(entry, state))
    return AckSurvey(now, tuple(done), tuple(awaited), tuple(lost), not_owed=tuple(not_owed),
                     covers=covers_text(ack.selector))


def ack_for_release(fleet: Fleet, scope: str, generation: str, selector: Selector | None = None) -> Ack:
    """The acknowledgement a release of `generation` at `scope` (a hold covering `selector`)
    waits for, taken BEFORE the release: each consumer's report number now, so only a later
    report can acknowledge it."""
    try:
        seqs = {entry.key: entry.seq for entry in fleet.consumers().entries()}
    except Exception:  # noqa: BLE001 - an unreadable registry is reported by the wait itself
        seqs = {}
    return Ack(scope, generation, engaged=False, after_seq=seqs, selector=selector)


def wait_for_acks(fleet: Fleet, ack: Ack, *, timeout: float,
                  on_progress: Callable[[AckSurvey], None] | None = None, poll: float = POLL,
                  monotonic: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> AckSurvey:
    """Read the registry every `poll` seconds until every consumer `ack` covers acknowledged it
    or is lost, or `timeout` seconds passed; the last survey (with `waited` and, per consumer,
    when its acknowledgement was first seen). A registry that cannot be read is retried, and
    named in the survey's `problem` if it still cannot be at the end."""
    host = this_host()
    start = monotonic()
    latencies: dict[str, float] = {}
    while True:
        now = fleet.clock()
        waited = monotonic() - start
        try:
            entries = fleet.consumers().entries()
        except Exception as exc:  # noqa: BLE001 - retried until the timeout, then named
            found = AckSurvey(now, problem=f"cannot read the consumer registry: {one_line(exc)}", waited=waited,
                              covers=covers_text(ack.selector))
        else:
            found = survey(entries, ack, now, lambda entry: is_alive(entry, host))
            for entry in found.acknowledged:
                latencies.setdefault(entry.key, waited)
            found = replace(found, waited=waited, latencies=dict(latencies))
        if on_progress is not None:
            on_progress(found)
        if found.done or waited >= timeout:
            return found
        sleep(min(poll, max(0.0, timeout - waited)))
