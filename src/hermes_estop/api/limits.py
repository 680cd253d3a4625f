"""Rate limits of the write API: a token bucket per key (a remote address's failed sign-ins, a
token's writes), on an injected monotonic clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """At most `burst` events at once per key, refilled at `per_second`; `allow(key)` spends one."""

    def __init__(self, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 10_000) -> None:
        self.per_second = per_second
        self.burst = burst
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _level(self, key: str, now: float) -> float:
        level, then = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), level + (now - then) * self.per_second)

    def allow(self, key: str) -> bool:
        with self._lock:
            now = self.clock()
            level = self._level(key, now)
            if len(self._buckets) >= self.max_keys and key not in self._buckets:
                self._buckets.clear()  # bounded memory; forgetting only ever lets a key start full
            allowed = level >= 1.0
            self._buckets[key] = (level - 1.0 if allowed else level, now)
            return allowed

    def exhausted(self, key: str) -> bool:
        """Whether `key` has no event left now (spends nothing)."""
        with self._lock:
            return key in self._buckets and self._level(key, self.clock()) < 1.0
