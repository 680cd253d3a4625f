"""The window scheduler's ledger on a PostgreSQL store, by name: `OccurrenceLedger` over the
store's `occurrences` table (`PostgresStore.open_ledger()`, `stores.pg_records`), so every
scheduler of a fleet, on any host, shares one memory of what was armed, released, skipped and
ended. `open_ledger(root, store)` gives the same ledger for any store; this name is for callers
that hold a PostgreSQL store and want to say so.
"""

from __future__ import annotations

from ..stores.base import HoldStore
from .ledger import OccurrenceLedger

__all__ = ["PostgresLedger"]


class PostgresLedger(OccurrenceLedger):
    """`OccurrenceLedger` on the `occurrences` table of `store`'s schema."""

    def __init__(self, store: HoldStore) -> None:
        super().__init__(store.open_ledger())
        self.store = store
