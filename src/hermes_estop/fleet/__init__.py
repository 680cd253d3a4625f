"""The fleet: every fleet-wide operation (the Fleet object, the deadman, leases, the consumer registry and
acknowledgements, the audit trail).

`from hermes_estop.fleet import Fleet` (the module `hermes_estop/fleet.py` of earlier releases)
still works for a deprecation period, with a `DeprecationWarning`: the class is in
`hermes_estop.fleet.fleet`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check --json` imports this package
if TYPE_CHECKING:
    from typing import Any

#: the names of the earlier module `hermes_estop.fleet`, and the module that has each now
_OLD_MODULE_NAMES = {"Fleet": "fleet", "LEDGER_FILE": "tables", "ConsumerTable": "tables", "RecordTable": "tables",
                     "StateTable": "tables"}


def __getattr__(name: str) -> Any:
    """PEP 562: an old `from hermes_estop.fleet import Fleet`, with a `DeprecationWarning`."""
    if name not in _OLD_MODULE_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    home = f"hermes_estop.fleet.{_OLD_MODULE_NAMES[name]}"
    warnings.warn(f"hermes_estop.fleet.{name} is deprecated and will be removed: import it from {home}",
                  DeprecationWarning, stacklevel=2)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # warned once
    return value
