"""The gate question for a piece of owned work (a cron job, a kanban card, a chat turn), and
the cached form a pass over many items asks it in.

Work is gated on EVERY location it will run under (docs/design.md §2, §4; issue 9 item 6): the candidate
locations of the process that starts it (`estop`: its home and the fleet root) and, when the work
names another profile, that profile's candidates too (its home and the fleet root). Deny wins
across all of them, exactly as across one process's candidates. The locations come from the
core's one builder (`Layout.candidates` through `Estop.for_profile`); nothing here lists them
by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hermes_estop.process.check import Snapshot, Verdict, decide
from hermes_estop.process.estop import Estop

__all__ = ["PASS_SNAPSHOT_AGE", "PassGate", "gate_work", "work_snapshot", "work_views"]

#: how old (seconds) the snapshot a pass decides an item from may be: how late a hold engaged
#: mid-pass may be seen by the rest of that pass
PASS_SNAPSHOT_AGE = 0.005


def work_views(estop: Estop, profile: str | None) -> tuple[Estop, ...]:
    """The views of the fleet work assigned to `profile` and started by `estop`'s process is
    gated through: `estop` itself, plus `estop.for_profile(profile)` when that names another
    profile. `InvalidArgument` for a profile name that is not one (a hand-edited row)."""
    if profile is None or profile == estop.layout.profile:
        return (estop,)
    return (estop, estop.for_profile(profile))


def work_snapshot(views: tuple[Estop, ...]) -> Snapshot:
    """One snapshot over the union of the views' candidate locations (each location once, in
    order), so `decide` applies deny-wins across all of them."""
    if len(views) == 1:
        return views[0].snapshot()
    seen: set[Any] = set()
    readings = []
    now = None
    for view in views:
        snapshot = view.snapshot()
        now = snapshot.now if now is None else now
        for reading in snapshot.readings:
            if reading.location not in seen:
                seen.add(reading.location)
                readings.append(reading)
    assert now is not None
    return Snapshot(tuple(readings), now)


def gate_work(estop: Estop, owner: object, profile: str | None, component: str | None = None, job: Any = None) -> Verdict:
    """The gate for one piece of work owned by `owner`, assigned to `profile` and started by
    `estop`'s process (a chat turn, a scheduled call); `component` and `job` say what the work
    is, for scoped holds. A pass over many items uses a `PassGate`."""
    return decide(work_snapshot(work_views(estop, profile)), owner, profile, component, job)


class PassGate:
    """The gate for one pass over many items (a cron tick, a kanban dispatch pass).

    Asking the store for every item costs more than the rest of a 10,000-item pass
    (bench/consumers.py). A pass instead decides its items from snapshots at most `max_age`
    seconds old, one per set of views it needs (see `work_views`), all read again once older:
    every decision still comes from ONE snapshot, and a hold engaged mid-pass still stops the
    rest of the pass within `max_age`. `decide` is pure, so the verdict for an (owner, profile),
    and the pause notice, are worked out once and reused for as long as the reads find the same
    readings. One `PassGate` per pass: it is not thread-safe and keeps what it read until dropped.

    `component` is what the pass's consumer gates as (`cron`, `kanban`); each item says its name
    (`job`). While no scoped hold stands the name cannot change a verdict, so verdicts are shared
    across names and a pass of 10,000 distinct jobs still decides once per (owner, profile)."""

    def __init__(self, estop: Estop, *, max_age: float = PASS_SNAPSHOT_AGE,
                 monotonic: Callable[[], float] = time.monotonic, component: str | None = None) -> None:
        self.estop = estop
        self.component = component
        self._scoped = False
        self.max_age = max_age
        self._monotonic = monotonic
        self._own = estop.layout.profile
        self._views: dict[str | None, tuple[Estop, ...]] = {}
        self._snapshots: dict[str | None, Snapshot] = {}
        self._verdicts: dict[tuple[Any, Any, Any], Verdict] = {}
        self._stale_at = float("-inf")
        self._notices: dict[int, tuple[Snapshot, str | None]] = {}

    def __call__(self, owner: object, profile: str | None, job: Any = None) -> Verdict:
        """The verdict for work owned by `owner`, assigned to `profile` and named `job` (a name,
        or several); `InvalidArgument` for a profile name that is not one."""
        if self._monotonic() >= self._stale_at:
            self._refresh()
        try:
            return self._verdicts[owner, profile, job if self._scoped else None]
        except KeyError:
            pass
        except TypeError:  # an unhashable owner or profile (a hand-edited row): asked directly
            return gate_work(self.estop, owner, profile, self.component, job)
        key = None if profile is None or profile == self._own else profile
        snapshot = self._snapshots.get(key)
        if snapshot is None:
            views = self._views.get(key)
            if views is None:
                views = self._views[key] = work_views(self.estop, key)
            snapshot = self._snapshots[key] = work_snapshot(views)
            self._note_scoped(snapshot)
        verdict = self._verdicts[owner, profile, job if self._scoped else None] = decide(
            snapshot, owner, profile, self.component, job)
        return verdict

    def _note_scoped(self, snapshot: Snapshot) -> None:
        if not self._scoped and any(reading.scoped for reading in snapshot.readings):
            self._scoped = True
            self._verdicts.clear()

    def _refresh(self) -> None:
        """Read every view used so far again; forget the verdicts if any reading changed."""
        self._stale_at = self._monotonic() + self.max_age
        changed = False
        for key, views in self._views.items():
            old = self._snapshots.get(key)
            new = work_snapshot(views)
            if old is None or old.readings != new.readings:
                self._snapshots[key] = new
                self._note_scoped(new)
                changed = True
        if changed:
            self._verdicts.clear()

    def notice(self, verdict: Verdict) -> str | None:
        """`verdict.notice`, worked out once per snapshot."""
        if verdict:
            return None
        snapshot = verdict.snapshot
        memo = self._notices.get(id(snapshot))
        if memo is None or memo[0] is not snapshot:
            memo = self._notices[id(snapshot)] = (snapshot, verdict.notice)
        return memo[1]
