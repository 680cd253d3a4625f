"""The consumers: adapters that gate new work on the one shared predicate (docs/design.md §7) and never
keep their own copy of the pause state.

- `cron` (the tick) and `crontable` (a job table per home, its rows and claims).
- `kanban` (the dispatcher) and `board` (the fleet's SQLite board, claimed atomically).
- `gateway`: the chat turn gate, its control commands, and a loopback line server; `turns`:
  its turns in flight, visible to other processes.
- `scheduling`: gating for a user's own APScheduler 3 scheduler.
- `loops`: the cron ticker, kanban dispatcher and gateway as loop services for `hermes serve`.
- `inflight`: the work in flight on what a hold covers (`hermes drain`, `hermes status`).
- What they share: `validate` (names, owners, profiles, timeouts), `passgate` (the gate question
  for owned work, and its per-pass form), `worker` (the worker subprocesses), `pass_report` (the
  shape of a pass's report). `common` gathers those names for older imports.

The submodules are imported on demand (croniter, sqlite3 and apscheduler stay unloaded until
used), so this package imports nothing itself.
"""

from __future__ import annotations

__all__ = [
    "board",
    "common",
    "cron",
    "crontable",
    "gateway",
    "inflight",
    "kanban",
    "passgate",
    "pass_report",
    "scheduling",
    "loops",
    "turns",
    "validate",
    "worker",
]
