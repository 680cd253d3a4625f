"""The tables of the fleet's shared state, as the levels above the fleet name them (the window
scheduler's ledger, a service's named states, the consumer registry): `Fleet.ledger()`,
`Fleet.state()` and `Fleet.consumers()` open them; only `fleet/` and `stores/` import a store."""

from __future__ import annotations

from hermes_estop.stores.base import LEDGER_FILE, RecordTable
from hermes_estop.stores.registry import ConsumerTable
from hermes_estop.stores.state import StateTable

__all__ = ["LEDGER_FILE", "ConsumerTable", "RecordTable", "StateTable"]
