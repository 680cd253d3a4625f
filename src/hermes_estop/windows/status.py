"""The windows section of `hermes status`: each window's next occurrence and whether one covers
now, its drain lead included (and what the scheduler did about it). Never raises: a bad
`windows.toml` or ledger is one line in the status, not a broken status."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant, format_relative
from hermes_estop.windows.forecast import ledger_entries, ledger_state
from hermes_estop.windows.ledger import SKIPPED
from hermes_estop.windows.model import Occurrence
from hermes_estop.windows.schedule import Row, Schedule, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["windows_section"]


def windows_section(fleet: Fleet, now: datetime, *, as_json: bool | None = None,
                    schedule: Schedule | None = None) -> dict[str, Any]:
    """`{"json": {"windows": [...]}, "lines": [...]}` for `hermes status` at `now`; with
    `as_json` True only the JSON, False only the lines (with 10,000 windows, building the
    rendering nobody reads is a fifth of the command). `schedule`: the file's, when the caller
    has read it already (at 100,000 windows a second read is a second 60 MB)."""
    try:
        windows_file = WindowsFile(fleet.root)
        schedule = schedule if schedule is not None else schedule_of(windows_file, now)
        if not len(schedule):
            return {"json": {"windows": []}, "lines": []}
        entries, problem = ledger_entries(fleet)
        data: dict[str, Any] = {"windows": []}
        lines = [f"windows ({len(schedule)} in {windows_file.path}):"]
        for item in range(len(schedule)):
            window = schedule.row(item)
            following = schedule.not_ended(item, now)
            current = next(following, None)
            if current is None or not current.covers(now):
                current, upcoming = None, current
            else:  # the second occurrence asked only when the first covers `now` (issue 24)
                upcoming = next(following, None)
                upcoming = upcoming if upcoming is not None and not upcoming.covers(now) else None
            state, skipped = ledger_state(entries, current), ledger_state(entries, upcoming) == SKIPPED
            if as_json is not False:
                data["windows"].append({
                    "name": window.name,
                    "scope": window.scope,
                    "enabled": window.enabled,
                    "schedule": window.schedule,
                    "duration": window.duration,
                    "drain": window.drain,
                    "active": current is not None and window.enabled,
                    "current": current.to_json(now, window.zone_of(current)) | {"state": state} if current is not None else None,
                    "next": upcoming.to_json(now, window.zone_of(upcoming)) | {"skipped": skipped} if upcoming is not None else None,
                })
            if as_json is not True:
                lines.extend(_row_lines(window, current, upcoming, now, state, skipped))
        if problem:
            lines.append(f"  windows ledger: {problem}")
            data["windows_error"] = problem
        return {"json": data if as_json is not False else {}, "lines": lines if as_json is not True else []}
    except (EstopError, OSError) as exc:  # a bad windows.toml or ledger: an outage, one line
        message = one_line(exc)
    except Exception as exc:  # a bug: logged with its traceback, and status still answers
        logging.getLogger("hermes_estop.windows").exception("status: the windows section failed")
        message = f"internal error: {one_line(exc)}"
    return {"json": {"windows": [], "windows_error": message}, "lines": [f"windows: {message}"]}


def _row_lines(window: Row, current: Occurrence | None, upcoming: Occurrence | None, now: datetime,
               state: str | None, skipped: bool) -> Iterator[str]:
    ahead = f", draining {window.drain} ahead" if window.drain else ""
    head = f"  {window.name}: {window.describe_schedule()} for {window.duration}{ahead}, {window.scope}"
    yield head if window.enabled else head + " (disabled)"
    if current is not None:
        what = f"; scheduler: {state}" if state else ""
        if current.draining(now):
            yield (f"    DRAINING now, the window starts {display_instant(current.start)} "
                   f"({format_relative(current.start, now)}), until {display_instant(current.end)}{what}")
        else:
            yield f"    ACTIVE now, until {display_instant(current.end)} ({format_relative(current.end, now)}){what}"
    if upcoming is not None:
        lead = f", drain from {display_instant(upcoming.arm_at)}" if upcoming.lead else ""
        yield (f"    next {display_instant(upcoming.start)} ({format_relative(upcoming.start, now)})"
               f"{lead}{' (skipped)' if skipped else ''}")
    elif current is None:
        yield "    no further occurrence"
