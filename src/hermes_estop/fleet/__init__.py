"""The fleet: every fleet-wide operation (the Fleet object, the deadman, leases, the consumer registry and
acknowledgements, the audit trail).

`from hermes_estop.fleet import Fleet` (the module `hermes_estop/fleet.py` of earlier releases)
still works for a deprecation period, with a `DeprecationWarning`: the class is in
`hermes_estop.fleet.fleet`.
"""

from __future__ import annotations

from typing import Any

#: the names of the earlier module `hermes_estop.fleet` (`hermes_estop.fleet.fleet` has them)
_OLD_MODULE_NAMES = frozenset({"LEDGER_FILE", "ConsumerTable", "Fleet", "RecordTable", "StateTable"})


def __getattr__(name: str) -> Any:
    """PEP 562: an old `from hermes_estop.fleet import Fleet`, with a `DeprecationWarning`."""
    if name not in _OLD_MODULE_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from hermes_estop.fleet import fleet

    warnings.warn(f"hermes_estop.fleet.{name} is deprecated and will be removed: import it from hermes_estop.fleet.fleet",
                  DeprecationWarning, stacklevel=2)
    value = getattr(fleet, name)
    globals()[name] = value  # warned once
    return value
