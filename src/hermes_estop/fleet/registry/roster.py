"""The consumer registry as an operator sees it (`hermes consumers`, `hermes status`, the page,
/metrics, `hermes doctor`): each registered consumer with its state, whether it has seen the
holds standing now, and how old its view is. Reading it prunes entries lost for a day.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.registry.entries import ConsumerState, consumer_state, covers, is_alive, observed_holds, prunable, this_host
from hermes_estop.model.hold import Snapshot
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.stores.registry import ConsumerEntry

__all__ = ["ConsumerRow", "Roster", "consumers_section", "read_roster", "roster_of"]


@dataclass(frozen=True)
class ConsumerRow:
    entry: ConsumerEntry
    state: ConsumerState
    #: it saw exactly the holds that cover it now (every arm and every release)
    acknowledged: bool
    #: seconds since its last report: how old its view of the holds may be
    lag: float

    def describe(self) -> str:
        return self.entry.describe()

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"component": e.component, "host": e.host, "pid": e.pid, "profile": e.profile, "home": e.home,
                "scopes": list(e.scopes), "version": e.version, "interval": e.interval, "state": self.state.value,
                "registered_at": format_instant(e.registered_at), "last_report": format_instant(e.reported_at),
                "observed": [{"scope": s, "generation": g} for s, g in e.observed], "verdict": e.verdict,
                "acknowledged": self.acknowledged, "lag_seconds": round(self.lag, 3)}


@dataclass(frozen=True)
class Roster:
    now: datetime
    rows: tuple[ConsumerRow, ...] = ()
    problem: str | None = None

    def counts(self) -> dict[str, int]:
        """Consumers per state (live, stalled, lost)."""
        found = {state.value: 0 for state in ConsumerState}
        for row in self.rows:
            found[row.state.value] += 1
        return found

    def line(self) -> str:
        """`acknowledged by 6 of 7 consumers; 1 lost: kanban@host-b pid 4411` (lost ones are not
        counted among those that should acknowledge)."""
        if self.problem is not None:
            return f"consumers: cannot read the registry: {self.problem}"
        if not self.rows:
            return "consumers: none registered"
        counted = [r for r in self.rows if r.state is not ConsumerState.LOST]
        acked = sum(1 for r in counted if r.acknowledged)
        parts = [f"acknowledged by {acked} of {len(counted)} consumers"]
        stalled = [r.describe() for r in counted if r.state is ConsumerState.STALLED]
        lost = [r.describe() for r in self.rows if r.state is ConsumerState.LOST]
        if stalled:
            parts.append(f"{len(stalled)} stalled: {', '.join(stalled)}")
        if lost:
            parts.append(f"{len(lost)} lost: {', '.join(lost)}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"now": format_instant(self.now), "problem": self.problem, "counts": self.counts(),
                "consumers": [row.to_json() for row in self.rows]}


def roster_of(entries: list[ConsumerEntry], snapshot: Snapshot, alive: Callable[[ConsumerEntry], bool | None]) -> Roster:
    """Pure but for `alive(entry)`: each entry's state, acknowledgement of `snapshot`'s holds
    (every scope of the fleet, read once), and lag."""
    now = snapshot.now
    standing = observed_holds(snapshot)
    rows = []
    for entry in sorted(entries, key=lambda e: (e.component, e.host, e.pid)):
        state = consumer_state(entry, now, alive(entry))
        expected = {(scope, gen) for scope, gen in standing if covers(entry, scope)}
        seen = {(scope, gen) for scope, gen in entry.observed if covers(entry, scope)}
        rows.append(ConsumerRow(entry, state, expected == seen, max(0.0, (now - entry.reported_at).total_seconds())))
    return Roster(now, tuple(rows))


def read_roster(fleet: Fleet, *, prune: bool = True, snapshot: Snapshot | None = None) -> Roster:
    """The roster against `snapshot` (default: a fresh read of every scope); entries lost for a
    day are removed (with `prune`). Never raises: a registry that cannot be read is the
    roster's `problem`."""
    snapshot = fleet.read() if snapshot is None else snapshot
    host = this_host()
    try:
        table = fleet.consumers()
        entries = table.entries()
    except Exception as exc:  # noqa: BLE001 - a status read never raises
        return Roster(snapshot.now, problem=one_line(exc))
    roster = roster_of(entries, snapshot, lambda entry: is_alive(entry, host))
    if prune:
        kept = []
        for row in roster.rows:
            if prunable(row.entry, roster.now, row.state):
                try:
                    table.remove(row.entry.key)
                    continue
                except Exception:  # noqa: BLE001, S110 - pruned next time
                    pass
            kept.append(row)
        roster = Roster(roster.now, tuple(kept))
    return roster


def consumers_section(roster: Roster) -> dict[str, Any]:
    """The consumers' part of the status document: one line (`hermes status`), the roster
    (/api/status)."""
    return {"json": {"consumers": roster.to_json()}, "lines": [roster.line()]}
