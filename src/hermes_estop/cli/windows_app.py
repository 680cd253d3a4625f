"""The `hermes windows` sub-app and what its command modules share: the fleet's windows file, a
window by name, and now by the fleet's clock."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hermes_estop.cli.command_io import JsonOpt, current_estop, new_app
from hermes_estop.model.homes import resolve_layout
from hermes_estop.windows.schedule import schedule_of
from hermes_estop.windows.windows_file import WindowsFile

if TYPE_CHECKING:
    from hermes_estop.windows.model import Window
    from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["JsonOpt", "file", "now", "window_named", "windows_app"]

windows_app = new_app("windows", "Maintenance windows: scheduled holds whose deadman is the window's end (run by `hermes serve`).")



def file() -> WindowsFile:
    """This process's fleet's `windows.toml`."""
    return WindowsFile(resolve_layout().root)


def window_named(name: str) -> tuple[WindowsFile, Window]:
    """The windows file and its window `name` (from its compiled schedule: the one window
    validated); `InvalidArgument` naming both when there is none."""
    windows_file = file()
    schedule = schedule_of(windows_file, now())
    return windows_file, schedule.window(schedule.item_named(name, windows_file.path))


def now() -> datetime:
    """Now by the fleet's clock: the store's (the database's on PostgreSQL), never this host's
    wall clock read ad hoc."""
    return current_estop().clock()
