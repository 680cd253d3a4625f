"""The window scheduler's ledger in PostgreSQL: the `occurrences` table of the store's schema
(`stores.pg_schema`, version 2), so every scheduler of a fleet, on any host, shares one memory
of what was armed, released, skipped and ended.

`commit` is one transaction on the store's writer connection (upserts, then the prune), so
`load` never sees half of it; a connection found dead before the commit is replaced and the
commit retried once, as for every write of the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..errors import StoreError
from ..stores.postgresql import PostgresStore
from ..timeutil import to_utc
from .ledger import STATES, LedgerEntry, OccurrenceLedger

__all__ = ["PostgresLedger"]

_COLUMNS = "key, window_name, occurrence, scope, ends_at, state, generation, updated_at, detail"


class PostgresLedger(OccurrenceLedger):
    """`OccurrenceLedger` on the `occurrences` table of `store`'s schema."""

    name = "postgresql"

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def describe(self) -> str:
        return f"{self.store.url.display} ({self.store.schema}.occurrences)"

    def load(self) -> dict[str, LedgerEntry]:
        backend = self.store.backend
        rows = backend.run(
            lambda conn: conn.execute(f"SELECT {_COLUMNS} FROM {backend.s}.occurrences").fetchall(),
            what="read the window ledger",
        )
        entries = {}
        for key, window, occurrence, scope, ends_at, state, generation, updated_at, detail in rows:
            if state not in STATES:
                raise StoreError(f"the window ledger {self.describe()} is unreadable: entry {key!r}: unknown state {state!r}")
            entries[key] = LedgerEntry(key=key, window=window, occurrence=occurrence, scope=scope, end=to_utc(ends_at),
                                       state=state, generation=generation or None,
                                       updated_at=to_utc(updated_at) if updated_at else None, detail=detail)
        return entries

    def commit(self, changes: Iterable[LedgerEntry], *, prune_before: datetime | None = None,
               remove: Iterable[str] = ()) -> None:
        rows = [(e.key, e.window, e.occurrence, e.scope, e.end, e.state, e.generation, e.updated_at, e.detail)
                for e in changes]
        gone = list(remove)
        if not rows and not gone and prune_before is None:
            return
        backend = self.store.backend
        upsert = (
            f"INSERT INTO {backend.s}.occurrences ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET window_name = EXCLUDED.window_name, occurrence = EXCLUDED.occurrence, "
            "scope = EXCLUDED.scope, ends_at = EXCLUDED.ends_at, state = EXCLUDED.state, "
            "generation = EXCLUDED.generation, updated_at = EXCLUDED.updated_at, detail = EXCLUDED.detail"
        )

        def work(conn: Any) -> None:
            if gone:
                conn.execute(f"DELETE FROM {backend.s}.occurrences WHERE key = ANY(%s)", [gone])
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(upsert, rows)
            if prune_before is not None:
                conn.execute(f"DELETE FROM {backend.s}.occurrences WHERE ends_at < %s", [prune_before])

        backend.run(work, what="commit the window ledger")
