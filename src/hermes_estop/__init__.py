"""hermes-estop: stop all NEW work in an agent fleet for maintenance, and get it back reliably.

The module-level functions are a drop-in for hermes-agent's `agent/estop.py` (same names, same
returns; the intended differences are listed in docs/python-api.md): they resolve the
process's homes and store from the environment (`HERMES_HOME`, `HERMES_ROOT`,
`HERMES_ESTOP_STORE`) at call time. `Estop(home=..., root=..., clock=...)` does the same
operations without environment lookups, and returns richer results (`Estop.engage` returns the
`Hold` written, where the module-level `engage` returns the sentinel `Path` as upstream does).

The top level is lazy (PEP 562): `import hermes_estop` loads nothing but this file; each public
name loads its module on first use, so `hermes check` pays only for what one read needs.
"""

from __future__ import annotations

import os
import sys
from _thread import allocate_lock

# Not `typing.TYPE_CHECKING`: importing `typing` alone costs about as much as the interpreter's
# start-up, and `import hermes_estop` must stay cheap. Type checkers treat this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - names for type checkers; at run time __getattr__ loads them
    import logging
    from pathlib import Path
    from typing import Any

    from hermes_estop.model.audit_event import AuditEvent
    from hermes_estop.model.durations import MAX_DURATION, format_duration, parse_duration, parse_ttl
    from hermes_estop.model.errors import (
        EstopError,
        HoldConflict,
        InvalidArgument,
        InvalidDuration,
        InvalidInstant,
        StoreError,
        StoreRefused,
        StoreUnavailable,
    )
    from hermes_estop.model.hold import GENERATION_FIELD, VACANT, Allow, Fence, Hold, HoldState, Reading
    from hermes_estop.model.homes import FLEET, SENTINEL_NAME, Layout, Location, resolve_layout
    from hermes_estop.model.policy import PolicyRefused
    from hermes_estop.model.timeutil import Clock, in_interval, utc_now
    from hermes_estop.process.check import Snapshot, Verdict
    from hermes_estop.process.estop import Estop
    from hermes_estop.process.forecast import Forecast, HoldSource, PlannedHold
    from hermes_estop.stores import FileStore, HoldStore, open_store
    from hermes_estop.stores.unavailable import UnavailableStore

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
    "parse_duration",
    "GENERATION_FIELD",
    "SENTINEL_NAME",
    # and the rest of the module-level surface
    "retire",
    "holds",
    "gate",
    "current",
    "close",
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
    "MAX_DURATION",
    "parse_ttl",
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
    "StoreRefused",
    "PolicyRefused",
    # a hold source of your own (`hermes check --at` counts what it plans)
    "HoldSource",
    "PlannedHold",
    "Forecast",
]

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "AuditEvent": "model.audit_event",
    "MAX_DURATION": "model.durations", "format_duration": "model.durations", "parse_duration": "model.durations",
    "parse_ttl": "model.durations",
    "EstopError": "model.errors", "HoldConflict": "model.errors", "InvalidArgument": "model.errors", "InvalidDuration": "model.errors",
    "InvalidInstant": "model.errors", "StoreError": "model.errors", "StoreUnavailable": "model.errors",
    "StoreRefused": "model.errors", "PolicyRefused": "model.policy",
    "Forecast": "process.forecast", "HoldSource": "process.forecast", "PlannedHold": "process.forecast",
    "Estop": "process.estop",
    "Snapshot": "process.check", "Verdict": "process.check",
    "GENERATION_FIELD": "model.hold", "VACANT": "model.hold", "Allow": "model.hold", "Fence": "model.hold", "Hold": "model.hold",
    "HoldState": "model.hold", "Reading": "model.hold",
    "FLEET": "model.homes", "SENTINEL_NAME": "model.homes", "Layout": "model.homes", "Location": "model.homes",
    "resolve_layout": "model.homes",
    "FileStore": "stores", "HoldStore": "stores", "open_store": "stores",
    "UnavailableStore": "stores.unavailable",
    "Clock": "model.timeutil", "in_interval": "model.timeutil", "utc_now": "model.timeutil",
}


def __getattr__(name: str) -> Any:
    """PEP 562: load a public name's module on first use, then keep the name here."""
    if name == "logger":  # upstream's module logger: the one hermes-estop logs to
        import logging

        return logging.getLogger("hermes_estop")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    qualified = f"{__name__}.{module}"
    __import__(qualified)
    value = getattr(sys.modules[qualified], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from types import ModuleType as _ModuleType
else:
    _ModuleType = type(sys)  # `types.ModuleType`, without importing `types`


class _Package(_ModuleType):
    """This package, guarding one name: the import system binds a loaded submodule to its
    package's attribute, so a submodule `hermes_estop.gate` would replace the function
    `hermes_estop.gate()`. The predicate module is `hermes_estop.process.check` now, and the
    levels are named so that none is a public name (tests/test_layout.py); the guard stays for
    whatever still loads a module by the old name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "gate" and isinstance(value, _ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


# Module paths of earlier releases (before the package-per-level layout) -> (the module that
# holds the code now, the public home to import from instead or None). Importing an old path
# still works for a deprecation period and warns (`DeprecationWarning`) naming the new one; no
# file stands at the old path: `_MovedModules` answers only for a name no file matches.
_MOVED = {
    "hermes_estop.acks": ("hermes_estop.fleet.registry.acks", None),
    "hermes_estop.allow": ("hermes_estop.model.hold", None),
    "hermes_estop.audit": ("hermes_estop.model.audit_event", None),
    "hermes_estop.audit_files": ("hermes_estop.stores.audit_log", None),
    "hermes_estop.config": ("hermes_estop.process.fleet_config", None),
    "hermes_estop.cronspec": ("hermes_estop.model.cronspec", None),
    "hermes_estop.deadman": ("hermes_estop.fleet.deadman", None),
    "hermes_estop.demo": ("hermes_estop.daemon.demo_fleet", None),
    "hermes_estop.describe": ("hermes_estop.process.describe", None),
    "hermes_estop.durations": ("hermes_estop.model.durations", "hermes_estop"),
    "hermes_estop.errors": ("hermes_estop.model.errors", "hermes_estop"),
    "hermes_estop.estop": ("hermes_estop.process.estop", "hermes_estop"),
    "hermes_estop.forecast": ("hermes_estop.process.forecast", None),
    "hermes_estop.fsread": ("hermes_estop.system.fsread", None),
    "hermes_estop.fsutil": ("hermes_estop.system.fsutil", None),
    "hermes_estop.gate": ("hermes_estop.process.check", "hermes_estop"),
    "hermes_estop.hold": ("hermes_estop.model.hold", "hermes_estop"),
    "hermes_estop.homes": ("hermes_estop.model.homes", "hermes_estop"),
    "hermes_estop.lease": ("hermes_estop.fleet.lease", None),
    "hermes_estop.netaddr": ("hermes_estop.model.netaddr", None),
    "hermes_estop.processes": ("hermes_estop.system.processes", None),
    "hermes_estop.record": ("hermes_estop.model.record", None),
    "hermes_estop.registry": ("hermes_estop.fleet.registry.entries", None),
    "hermes_estop.reporter": ("hermes_estop.consumers.reporter", "hermes_estop.consumers"),
    "hermes_estop.fleet.registry.reporter": ("hermes_estop.consumers.reporter", "hermes_estop.consumers"),
    "hermes_estop.roster": ("hermes_estop.fleet.registry.roster", None),
    "hermes_estop.selector": ("hermes_estop.model.selector", None),
    "hermes_estop.text": ("hermes_estop.model.text", None),
    "hermes_estop.timeutil": ("hermes_estop.model.timeutil", "hermes_estop"),
    "hermes_estop.consumers.service": ("hermes_estop.consumers.loops", "hermes_estop.consumers"),
    "hermes_estop.consumers.report": ("hermes_estop.consumers.pass_report", None),
    "hermes_estop.notify.service": ("hermes_estop.notify.notifier", "hermes_estop.notify"),
    "hermes_estop.notify.worker": ("hermes_estop.notify.target", "hermes_estop.notify"),
    "hermes_estop.windows.service": ("hermes_estop.windows.scheduler", None),
    "hermes_estop.fleet.audit": ("hermes_estop.model.audit_event", None),
    "hermes_estop.stores.audit_files": ("hermes_estop.stores.audit_log", None),
    "hermes_estop.model.allow": ("hermes_estop.model.hold", None),
    "hermes_estop.model.snapshot": ("hermes_estop.model.hold", None),
    "hermes_estop.stores.records": ("hermes_estop.stores.base", None),
    "hermes_estop.windows.field_types": ("hermes_estop.windows.model", None),
    "hermes_estop.windows.invalid": ("hermes_estop.windows.model", None),
    "hermes_estop.windows.policy_check": ("hermes_estop.windows.model", None),
}


class _MovedModules:
    """A meta path finder, last on `sys.meta_path`: an old module path (`_MOVED`) imports the
    module that holds its code now, with a `DeprecationWarning` naming where to import from."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _MOVED:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(fullname, cls)  # type: ignore[arg-type]  # the class itself is the loader (static methods)

    @staticmethod
    def create_module(spec: Any) -> Any:
        import warnings

        new, home = _MOVED[spec.name]
        instead = f"import from {home} ({new} holds it now)" if home is not None else f"it is {new} now"
        warnings.warn(f"{spec.name} is deprecated and will be removed: {instead}", DeprecationWarning, stacklevel=2)
        __import__(new)
        return sys.modules[new]

    @staticmethod
    def exec_module(module: Any) -> None:
        """The module was loaded at its new path already."""


if not any(getattr(finder, "__name__", None) == "_MovedModules" for finder in sys.meta_path):  # once, reloads too
    sys.meta_path.append(_MovedModules)


_ENV_KEYS = ("HERMES_HOME", "HERMES_ROOT", "HERMES_ESTOP_STORE", "HOME")
# On POSIX `os.environ` keeps its values in `_data`, keyed by bytes: reading those four keys
# there costs a tenth of `os.environ.get` (no encode/decode per key), on every module-level call.
_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
_ENV_BYTE_KEYS = tuple(name.encode() for name in _ENV_KEYS)
#: at most this many environments keep an `Estop` (and its store's connections) cached
_MAX_INSTANCES = 8
_instances: dict[tuple[Any, ...], Estop] = {}
_instances_lock = allocate_lock()


def _build() -> Estop:
    from hermes_estop.model.errors import EstopError
    from hermes_estop.model.homes import resolve_layout
    from hermes_estop.process.estop import Estop
    from hermes_estop.stores.unavailable import UnavailableStore

    try:
        return Estop()
    except EstopError as exc:
        return Estop(layout=resolve_layout(), store=UnavailableStore(str(exc)))


def current() -> Estop:
    """The `Estop` of this process as its environment says now, cached per environment (at
    most `_MAX_INSTANCES`; the least recently built is closed when a new one is needed). A
    store that cannot be opened yields one whose every location reads as unreadable: held,
    never silently free."""
    data = _ENV_DATA
    if isinstance(data, dict):
        key: tuple[Any, ...] = (data.get(_ENV_BYTE_KEYS[0]), data.get(_ENV_BYTE_KEYS[1]),
                                data.get(_ENV_BYTE_KEYS[2]), data.get(_ENV_BYTE_KEYS[3]))
    else:
        key = tuple(os.environ.get(name) for name in _ENV_KEYS)
    estop = _instances.get(key)
    if estop is not None:
        return estop
    evicted = []
    with _instances_lock:
        estop = _instances.get(key)
        if estop is None:
            estop = _build()
            while len(_instances) >= _MAX_INSTANCES:
                evicted.append(_instances.pop(next(iter(_instances))))
            _instances[key] = estop
    for old in evicted:
        _close_quietly(old)
    return estop


def _close_quietly(estop: Estop) -> None:
    try:  # noqa: SIM105 - see below
        estop.close()
    except Exception:  # noqa: BLE001, S110 - best effort: a store already gone is closed (no contextlib on the facade's import)
        pass


def close() -> None:
    """Close every `Estop` `current()` has cached (their stores' connections and threads) and
    forget them; the next module-level call builds afresh. For an orderly shutdown and tests."""
    with _instances_lock:
        cached = list(_instances.values())
        _instances.clear()
    for estop in cached:
        _close_quietly(estop)


def is_engaged() -> bool:
    """True when any candidate location holds (an unreadable hold holds)."""
    return current().is_engaged()


def is_allowed(user_id: Any = None, profile: Any = None) -> bool:
    """True when at least one hold is active and every active hold admits this principal."""
    return current().is_allowed(user_id, profile)


def gate(user_id: Any = None, profile: Any = None, component: str | None = None, job: Any = None) -> Verdict:
    """One snapshot -> a verdict, truthy when work may proceed, carrying the notice."""
    return current().gate(user_id, profile, component, job)


def holds() -> tuple[Reading, ...]:
    """The active holds on the candidate locations."""
    return current().holds()


def engage(
    reason: str | None = None,
    allow: Any = None,
    ttl: Any = None,
    expires_at: Any = None,
    replace: bool = False,
    *,
    only: Any = None,
    jobs: Any = None,
) -> Path:
    """Arm or re-arm (non-destructively) the hold of this home; returns the sentinel's `Path`,
    as hermes-agent's `engage` does (`Estop.engage` returns the `Hold` written; on the PostgreSQL
    store the hold is a row and the path names its home). Refuses a bad TTL or expiry before
    writing anything (`InvalidDuration`, `InvalidInstant`). A write the fleet's arming policy
    refuses does not raise (upstream's `engage` never fails its caller): it is logged as a
    WARNING on the `hermes_estop` logger, nothing is written, and the path is returned."""
    from hermes_estop.model.policy import PolicyRefused

    estop = current()
    try:
        estop.engage(reason=reason, allow=allow, ttl=ttl, expires_at=expires_at, replace=replace, only=only, jobs=jobs)
    except PolicyRefused as exc:
        import logging

        logging.getLogger("hermes_estop").warning("estop: engage failed: %s", exc)
    return estop.sentinel_path()


def disengage() -> bool:
    """Remove every visible hold (this home and the fleet root). A lift the fleet's policy
    refuses does not raise (upstream's `disengage` never fails its caller): it is logged as one
    WARNING line on the `hermes_estop` logger, nothing is removed, and False is returned."""
    from hermes_estop.model.policy import PolicyRefused

    try:
        return current().disengage()
    except PolicyRefused as exc:
        import logging

        logging.getLogger("hermes_estop").warning("estop: disengage refused: %s", exc)
        return False


def retire(generation: str) -> bool:
    """Remove the hold carrying `generation`, never a successor. Retiring a generation before
    its deadman is a lift: judged by the fleet's policy (`PolicyRefused`, nothing removed)."""
    return current().retire(generation)


def get_state() -> dict[str, Any] | None:
    """hermes-agent's shape: `{"reason", "engaged_at", "expires_at", "allow"}` (plus `scope`,
    `generation`) of the first active hold, or None when not engaged."""
    return current().get_state()


def paused_reply() -> str | None:
    """The gateway's notice ("⏸️ Hermes is paused ..."), or None when not paused."""
    return current().paused_reply()


def check_paused(component: str, logger: logging.Logger | None = None) -> bool:
    """True when engaged; logs once per engagement per component."""
    return current().check_paused(component, logger)


def sentinel_path() -> Path:
    """The sentinel `hermes pause` writes for this process (its own home)."""
    return current().sentinel_path()
