"""hermes-estop: stop all NEW work in an agent fleet for maintenance, and get it back reliably.

The module-level functions are a drop-in for hermes-agent's `agent/estop.py`: they resolve the
process's homes and store from the environment (`HERMES_HOME`, `HERMES_ROOT`,
`HERMES_ESTOP_STORE`) at call time. `Estop(home=..., root=..., clock=...)` does the same
operations without environment lookups.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Mapping

from .audit import AuditEvent
from .config import STORE_ENV
from .durations import MAX_DURATION, format_duration, parse_duration
from .errors import (
    EstopError,
    HoldConflict,
    InvalidArgument,
    InvalidDuration,
    InvalidInstant,
    StoreError,
    StoreUnavailable,
)
from .estop import Estop
from .gate import Snapshot, Verdict
from .hold import VACANT, Allow, Fence, Hold, HoldState, Reading
from .homes import FLEET, SENTINEL_NAME, Layout, Location, resolve_layout
from .stores import FileStore, HoldStore, open_store
from .stores.unavailable import UnavailableStore
from .timeutil import Clock, in_interval, utc_now

__version__ = "0.1.0"

__all__ = [
    # the drop-in functions (hermes-agent's agent/estop.py)
    "is_engaged",
    "is_allowed",
    "engage",
    "disengage",
    "get_state",
    "paused_reply",
    "check_paused",
    "sentinel_path",
    # and the rest of the module-level surface
    "retire",
    "holds",
    "gate",
    "current",
    # objects
    "Estop",
    "Verdict",
    "Snapshot",
    "Hold",
    "Allow",
    "Reading",
    "HoldState",
    "Fence",
    "Location",
    "Layout",
    "AuditEvent",
    "HoldStore",
    "FileStore",
    "UnavailableStore",
    "open_store",
    "resolve_layout",
    "VACANT",
    "FLEET",
    "SENTINEL_NAME",
    "MAX_DURATION",
    "parse_duration",
    "format_duration",
    "in_interval",
    "utc_now",
    "Clock",
    # errors
    "EstopError",
    "InvalidDuration",
    "InvalidInstant",
    "InvalidArgument",
    "HoldConflict",
    "StoreError",
    "StoreUnavailable",
]

_ENV_KEYS = ("HERMES_HOME", "HERMES_ROOT", STORE_ENV, "HOME")
_instances: dict[tuple[str | None, ...], Estop] = {}
_instances_lock = threading.Lock()


def current() -> Estop:
    """The `Estop` of this process as its environment says now. A store that cannot be opened
    yields one whose every location reads as unreadable: held, never silently free."""
    env = os.environ
    key = tuple(env.get(name) for name in _ENV_KEYS)
    estop = _instances.get(key)
    if estop is None:
        with _instances_lock:
            estop = _instances.get(key)
            if estop is None:
                try:
                    estop = Estop()
                except EstopError as exc:
                    estop = Estop(layout=resolve_layout(), store=UnavailableStore(str(exc)))
                _instances[key] = estop
    return estop


def is_engaged() -> bool:
    """True when any candidate location holds (an unreadable hold holds)."""
    return current().is_engaged()


def is_allowed(user_id: Any = None, profile: Any = None) -> bool:
    """True when at least one hold is active and every active hold admits this principal."""
    return current().is_allowed(user_id, profile)


def gate(user_id: Any = None, profile: Any = None) -> Verdict:
    """One snapshot -> a verdict, truthy when work may proceed, carrying the notice."""
    return current().gate(user_id, profile)


def holds() -> tuple[Reading, ...]:
    """The active holds on the candidate locations."""
    return current().holds()


def engage(
    reason: str | None = None,
    allow: Allow | Mapping[str, Any] | None = None,
    ttl: Any = None,
    expires_at: Any = None,
    replace: bool = False,
) -> Hold:
    """Arm or re-arm (non-destructively) the hold of this home; returns the hold written."""
    return current().engage(reason=reason, allow=allow, ttl=ttl, expires_at=expires_at, replace=replace)


def disengage() -> bool:
    """Remove every visible hold (this home and the fleet root)."""
    return current().disengage()


def retire(generation: str) -> bool:
    """Remove the hold carrying `generation`, never a successor."""
    return current().retire(generation)


def get_state() -> dict[str, Any] | None:
    return current().get_state()


def paused_reply() -> str | None:
    return current().paused_reply()


def check_paused(component: str, logger: logging.Logger | None = None) -> bool:
    return current().check_paused(component, logger)


def sentinel_path() -> Path:
    return current().sentinel_path()
