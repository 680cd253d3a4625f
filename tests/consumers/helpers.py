"""Constants the consumer tests share (the fixtures are in conftest.py)."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["T0"]

#: where the fake clock starts in these tests: 10:00 UTC, so "*/5" occurrences fall at 10:05, 10:10 ...
T0 = datetime(2026, 6, 1, 10, 0, tzinfo=timezone.utc)
