"""Maintenance windows (docs/design.md §6): scheduled holds whose deadman is the window's end.

`WindowService` and `TickReport` are imported on first use (they pull in APScheduler).
"""

from __future__ import annotations

from typing import Any

from hermes_estop.model.cronspec import wall_to_instant
from hermes_estop.windows.ledger import JsonFileLedger, LedgerEntry, OccurrenceLedger, open_ledger
from hermes_estop.windows.model import WINDOWS_FILE, InvalidWindow, Window, WindowAllow, json_schema
from hermes_estop.windows.occurrences import Occurrence, covering, next_start, occurrences, upcoming
from hermes_estop.windows.windows_file import WindowsFile

__all__ = [
    "WINDOWS_FILE",
    "InvalidWindow",
    "JsonFileLedger",
    "LedgerEntry",
    "Occurrence",
    "OccurrenceLedger",
    "TickReport",
    "Window",
    "WindowAllow",
    "WindowService",
    "WindowsFile",
    "covering",
    "json_schema",
    "next_start",
    "occurrences",
    "open_ledger",
    "upcoming",
    "wall_to_instant",
]

_LAZY = {"WindowService", "TickReport"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from hermes_estop.windows import scheduler

        return getattr(scheduler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
