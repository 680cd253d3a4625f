"""Maintenance windows (DESIGN 6): scheduled holds whose deadman is the window's end.

- `model`: `Window` (pydantic v2) and `WindowsFile` (`<fleet root>/windows.toml`);
- `occurrences`: pure functions from a window and an instant to its occurrences (the cron math
  and its DST rule are `hermes_estop.cronspec`'s; `wall_to_instant` is re-exported from there);
- `ledger`: what the scheduler remembers about occurrences across restarts;
- `reconcile`: the pure decision of what should stand at a scope at `now`;
- `service`: `WindowService`, the scheduler (`hermes serve`): APScheduler wake-ups around `tick`;
- `status`: the windows section of `hermes status`.

`WindowService` and `TickReport` are imported on first use (they pull in APScheduler).
"""

from __future__ import annotations

from typing import Any

from ..cronspec import wall_to_instant
from .ledger import JsonFileLedger, LedgerEntry, OccurrenceLedger, open_ledger
from .model import WINDOWS_FILE, InvalidWindow, Window, WindowAllow, WindowsFile, json_schema
from .occurrences import Occurrence, covering, next_start, occurrences, upcoming

__all__ = [
    "WINDOWS_FILE",
    "InvalidWindow",
    "Window",
    "WindowAllow",
    "WindowsFile",
    "json_schema",
    "Occurrence",
    "occurrences",
    "upcoming",
    "covering",
    "next_start",
    "wall_to_instant",
    "LedgerEntry",
    "OccurrenceLedger",
    "JsonFileLedger",
    "open_ledger",
    "WindowService",
    "TickReport",
]

_LAZY = {"WindowService", "TickReport"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
