"""The consumers: adapters that gate new work on the one shared predicate (DESIGN 7) and never
keep their own copy of the pause state.

- `cron`: a job table per home and a tick that runs the due jobs the gate admits.
- `kanban`: the fleet's SQLite board and a dispatcher that claims ready cards atomically.
- `gateway`: the chat turn gate, its control commands, and a loopback line server.
- `scheduling`: gating for a user's own APScheduler 3 scheduler.
- `service`: the cron ticker, kanban dispatcher and gateway as loop services for `hermes serve`.

The submodules are imported on demand (croniter, sqlite3 and apscheduler stay unloaded until
used), so this package imports nothing itself.
"""

from __future__ import annotations

__all__ = ["cron", "kanban", "gateway", "scheduling", "service", "common"]
