"""Matching an occurrence's local start against a window's `exclude_cron` (croniter's `match`,
on the wall clock of the window's timezone, as every cron decision in this project is made)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from croniter import croniter

__all__ = ["cron_matches"]


@lru_cache(maxsize=4096)
def cron_matches(expr: str, wall: datetime) -> bool:
    """Whether the naive local `wall` time (seconds ignored) is one `expr` fires at."""
    return bool(croniter.match(expr, wall.replace(second=0, microsecond=0)))
