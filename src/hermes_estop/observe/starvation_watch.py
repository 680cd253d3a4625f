"""`hermes serve`'s starvation watch (issue 47 item 3): a cron job every run of which within the
schedule's horizon falls inside the windows' holds never runs on its schedule (only late, once
after each lift). The watch looks every `INTERVAL` seconds (the elected scheduler only, so a
fleet of servers says it once) and logs each starving job once when it starts starving and once
when it clears; nothing while it lasts. Reads only: it takes no lock a tick or a pass needs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from hermes_estop.consumers.impact import starving_line
from hermes_estop.consumers.loops import LoopService
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import printable
from hermes_estop.observe.impact_preview import starving
from hermes_estop.process.estop import Estop
from hermes_estop.windows.kept_files import HORIZON

__all__ = ["INTERVAL", "StarvationWatch"]

#: seconds between two looks (the horizon is days: a job found starving a few minutes late is fine)
INTERVAL = 600.0

logger = logging.getLogger("hermes_estop.serve")


class StarvationWatch(LoopService):
    """Logs the cron jobs the windows starve, once when each starts and once when it clears."""

    def __init__(self, estop: Estop, *, interval: float = INTERVAL, is_leader: Callable[[], bool] | None = None,
                 log: logging.Logger | None = None) -> None:
        self._estop = estop  # not `estop`: a LoopService with one registers as a consumer, and this starts no work
        self._is_leader = is_leader
        #: the starving jobs' lines, by (home, job)
        self.starving: dict[tuple[str, str], str] = {}
        super().__init__("starvation", self._look, interval=interval, clock=estop.clock, log=log or logger)

    def _look(self, now: datetime) -> dict[tuple[str, str], str] | None:
        if self._is_leader is not None and not self._is_leader():
            return None
        try:
            jobs, _ = starving(self._estop, now)
        except EstopError:
            return None  # a windows.toml that cannot be used: the scheduler says so, once
        current = {(job.home, job.name): starving_line(job, HORIZON) for job in jobs}
        for key, line in current.items():
            if key not in self.starving:
                self.log.warning("%s: %s", self.name, printable(line))
        for home, name in sorted(self.starving.keys() - current.keys()):
            self.log.info("%s: cron job %s (home %s) runs on its schedule again within the next %s", self.name,
                          printable(name), printable(home), format_duration(HORIZON))
        self.starving = current
        return current
