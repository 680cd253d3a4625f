"""The daemon's deadman: while `hermes serve` runs, every expired hold of every scope is retired
within one interval of its deadman (sooner: the loop wakes at the soonest deadman it has seen),
so the `expire` audit line and notification go out on a quiet fleet too, with no other reader.

Why the daemon: a reader never retires (its clock decides for itself only, docs/design.md "Which
clock decides an expiry"), so without it the sentinel of a lapsed hold would stay and nobody
would be told it lifted. The predicate has reported it lifted since its deadman either way; this
is about the record. The store checks each deadline against the clock it trusts (the server's
`now()`, or the wall clock as the monotonic clock confirms it), so a daemon whose clock runs
ahead retires nothing early.

Each retire is fenced on the generation the expiry was read with (`Fleet.retire_expired`), so a
re-arm that lands between the read and the retire is never removed. `tick(now)` is the pure-ish
step (a fake clock drives it in tests); `run(stop)` is the thin loop around it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import format_instant

__all__ = ["DeadmanReport", "DeadmanService"]

logger = logging.getLogger("hermes_estop.deadman")

#: the longest the loop sleeps between passes, whatever `interval` says (a hold armed with a
#: short TTL between two passes is retired at most this late)
MAX_SLEEP = 1.0


@dataclass
class DeadmanReport:
    """One pass: the holds retired, and the soonest deadman still ahead (when to look next)."""

    now: datetime
    retired: list[Reading] = field(default_factory=list)
    next_deadline: datetime | None = None


class DeadmanService:
    """Retires the fleet's expired holds; `name` and `run(stop)` make it a `hermes serve` service."""

    name = "deadman"

    def __init__(self, fleet: Fleet, *, interval: float = MAX_SLEEP) -> None:
        self.fleet = fleet
        self.interval = min(float(interval), MAX_SLEEP)

    def tick(self, now: datetime | None = None) -> DeadmanReport:
        """Retire what has expired at `now` (default: the fleet's clock, read once)."""
        when = self.fleet.clock() if now is None else now
        snapshot = self.fleet.read(now=when)
        retired = self.fleet.retire_expired(when, snapshot)
        for reading in retired:
            hold = reading.hold
            logger.warning("deadman: the hold at %s (generation %s) expired at %s and was retired",
                           printable(reading.location.describe()),
                           printable(reading.fence.describe()) if reading.fence else "?",
                           format_instant(hold.expires_at) if hold is not None else "?")
        return DeadmanReport(when, retired, self.fleet.next_deadline(snapshot))

    def delay(self, report: DeadmanReport) -> float:
        """Seconds until the next pass: the interval, or less when a deadman falls sooner."""
        delay = self.interval
        if report.next_deadline is not None:
            delay = min(delay, max(0.0, (report.next_deadline - report.now).total_seconds()))
        return delay

    def run(self, stop: threading.Event) -> None:
        """Pass, sleep until the next deadman or the interval, again; returns once `stop` is set.
        A failed pass is logged and retried: this loop never stops serve."""
        while not stop.is_set():
            try:
                report = self.tick()
            except Exception:
                logger.exception("deadman: a pass failed; retried in %gs", self.interval)
                stop.wait(self.interval)
                continue
            stop.wait(self.delay(report) + 0.001)
