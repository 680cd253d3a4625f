"""The database's clock as this process sees it, without a round trip per reading: deadlines on
a PostgreSQL store are judged by the server's `clock_timestamp()` (`PostgresStore.default_clock`),
so hosts with skewed wall clocks agree on when a hold lifts. The listener (`pg_cache`) measures it
at every (re)connect and every `CLOCK_REFRESH` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from hermes_estop.model.timeutil import to_utc, utc_now

__all__ = ["CLOCK_REFRESH", "DbClock"]

#: seconds between re-measurements of the database's clock
CLOCK_REFRESH = 60.0


class DbClock:
    """The database's `clock_timestamp()` as seen from here: this process's monotonic time plus
    an offset measured at (re)connect and refreshed every `CLOCK_REFRESH` seconds. Hosts with
    skewed wall clocks therefore agree on when a hold lifts. Before the first measurement it is
    this host's clock (and the store reads everything as unreachable anyway)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._sample: tuple[datetime, float] | None = None

    @property
    def monotonic(self) -> Callable[[], float]:
        """The monotonic source this clock (and every timer of its listener) reads."""
        return self._monotonic

    @property
    def measured(self) -> bool:
        return self._sample is not None

    def measure(self, db_time: datetime, sent: float, received: float) -> None:
        """Take `db_time`, answered by a query sent at monotonic `sent` and answered at
        `received`, as the database's time at the midpoint."""
        self._sample = (to_utc(db_time), (sent + received) / 2)

    def at(self, monotonic: float) -> datetime:
        sample = self._sample
        if sample is None:
            return utc_now() - timedelta(seconds=self._monotonic() - monotonic)
        base, mono = sample
        return base + timedelta(seconds=monotonic - mono)

    def __call__(self) -> datetime:
        return self.at(self._monotonic())

    def offset(self) -> timedelta | None:
        """Database clock minus this host's wall clock (what `hermes store status` shows)."""
        return self() - utc_now() if self._sample is not None else None
