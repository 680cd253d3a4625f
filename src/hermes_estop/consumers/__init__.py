"""The consumers: adapters that gate new work on the one shared predicate (docs/design.md §7) and never
keep their own copy of the pause state.

This package is the public home of what a consumer or an integrator uses (`__all__`, listed in
docs/python-api.md): `ConsumerReporter` (a loop's reports to the consumer registry),
`gate_scheduler` and `gated` (a user's own APScheduler 3 scheduler), `WsgiGate`, `AsgiGate`,
`Work` and `refusal` (HTTP-triggered work), and `CronService`, `KanbanService` and
`GatewayService` (the loops `hermes serve` runs). Each name loads its module on first use
(PEP 562: croniter, sqlite3 and apscheduler stay unloaded until used).

The modules:
- `cron` (the tick) and `crontable` (a job table per home, its rows and claims).
- `kanban` (the dispatcher) and `board` (the fleet's SQLite board, claimed atomically).
- `gateway`: the chat turn gate, its control commands, and a loopback line server; `turns`:
  its turns in flight, visible to other processes.
- `scheduling`: gating for a user's own APScheduler 3 scheduler; `http_gate`: for WSGI/ASGI apps.
- `loops`: the cron ticker, kanban dispatcher and gateway as loop services for `hermes serve`.
- `inflight`: the work in flight on what a hold covers (`hermes drain`, `hermes status`).
- What they share: `validate` (names, owners, profiles, timeouts), `passgate` (the gate question
  for owned work, and its per-pass form), `worker` (the worker subprocesses), `pass_report` (the
  shape of a pass's report).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - names for type checkers; at run time __getattr__ loads them
    from hermes_estop.consumers.http_gate import AsgiGate, Work, WsgiGate, refusal
    from hermes_estop.consumers.loops import CronService, GatewayService, KanbanService
    from hermes_estop.consumers.reporter import ConsumerReporter
    from hermes_estop.consumers.scheduling import gate_scheduler, gated

__all__ = [
    "AsgiGate",
    "ConsumerReporter",
    "CronService",
    "GatewayService",
    "KanbanService",
    "Work",
    "WsgiGate",
    "gate_scheduler",
    "gated",
    "refusal",
]

# public name -> the module that defines it
_LAZY = {
    "AsgiGate": "hermes_estop.consumers.http_gate",
    "Work": "hermes_estop.consumers.http_gate", "WsgiGate": "hermes_estop.consumers.http_gate",
    "refusal": "hermes_estop.consumers.http_gate",
    "CronService": "hermes_estop.consumers.loops", "GatewayService": "hermes_estop.consumers.loops",
    "KanbanService": "hermes_estop.consumers.loops",
    "gate_scheduler": "hermes_estop.consumers.scheduling", "gated": "hermes_estop.consumers.scheduling",
    "ConsumerReporter": "hermes_estop.consumers.reporter",
}


def __getattr__(name: str) -> Any:
    """PEP 562: load a public name's module on first use, then keep the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(module)
    value = getattr(sys.modules[module], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
