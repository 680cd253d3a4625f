"""The wait of `hermes drain`: poll what is in flight until nothing is (or a timeout passes),
stopping what still runs after `terminate_after` when asked. Time is injected (the monotonic
source, the sleep), so the loop is testable without waiting; the CLI only arms the hold first
and prints the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from hermes_estop.consumers.inflight import InFlight, Survey, survey, terminate
from hermes_estop.process.estop import Estop

__all__ = ["POLL", "DrainResult", "wait_until_quiet"]

#: seconds between two looks at what is in flight
POLL = 0.2


@dataclass
class DrainResult:
    """How the wait ended: the last survey (`quiet` or not), what was terminated, how long."""

    last: Survey
    now: datetime
    waited: float
    terminated: list[InFlight] = field(default_factory=list)

    @property
    def quiet(self) -> bool:
        return self.last.quiet


def _key(item: InFlight) -> tuple[str, str, str]:
    return item.consumer, item.name, item.token or ""


def wait_until_quiet(estop: Estop, *, fleet: bool, timeout: float, terminate_after: float | None = None,
                     on_progress: Callable[[Survey, datetime, float], None] | None = None,
                     monotonic: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                     poll: float = POLL) -> DrainResult:
    """Survey every `poll` seconds until quiet or `timeout` seconds have passed. From
    `terminate_after` seconds on, each survey's stoppable work not yet stopped is terminated
    (so work whose worker was noted late is stopped too). Never kills without `terminate_after`."""
    start = monotonic()
    stopped: list[InFlight] = []
    while True:
        now = estop.clock()
        found = survey(estop, fleet=fleet, now=now)
        waited = monotonic() - start
        if found.quiet or waited >= timeout:
            return DrainResult(found, now, waited, stopped)
        if terminate_after is not None and waited >= terminate_after:
            done = {_key(item) for item in stopped}
            fresh = terminate(tuple(item for item in found.items if _key(item) not in done), now)
            stopped += fresh
            if fresh:
                continue
        if on_progress is not None:
            on_progress(found, now, waited)
        sleep(max(0.0, min(poll, timeout - (monotonic() - start))))
