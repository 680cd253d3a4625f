"""`registry.ConsumerTable` on a table of the PostgreSQL store's schema (`consumers`: the key and
the entry as `jsonb`), created on first use; each consumer upserts only its own row."""

from __future__ import annotations

import json
from collections.abc import Callable

from ..registry import ConsumerEntry
from .pg_backend import Backend
from .pg_schema import create_table_once
from .registry import ConsumerTable

__all__ = ["PgConsumerTable"]

TABLE = "consumers"
_COLUMNS = "key text PRIMARY KEY, entry jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp()"


class PgConsumerTable(ConsumerTable):
    name = "postgresql"

    def __init__(self, backend: Callable[[], Backend], schema: str) -> None:
        self._backend = backend
        self.schema = schema
        self._ready = False

    def _ensure(self, backend: Backend) -> None:
        if self._ready:
            return
        backend.run(lambda conn: create_table_once(conn, self.schema, TABLE, _COLUMNS), what=f"create the {TABLE} table")
        self._ready = True

    def put(self, entry: ConsumerEntry) -> None:
        backend = self._backend()
        self._ensure(backend)
        payload = json.dumps(entry.to_json())
        backend.run(lambda conn: conn.execute(
            f"INSERT INTO {backend.s}.{TABLE} (key, entry) VALUES (%s, %s::jsonb) "
            "ON CONFLICT (key) DO UPDATE SET entry = EXCLUDED.entry, updated_at = clock_timestamp()",
            [entry.key, payload]), what=f"report to {TABLE}")

    def remove(self, key: str) -> None:
        backend = self._backend()
        self._ensure(backend)
        backend.run(lambda conn: conn.execute(f"DELETE FROM {backend.s}.{TABLE} WHERE key = %s", [key]),
                    what=f"deregister from {TABLE}")

    def entries(self) -> list[ConsumerEntry]:
        backend = self._backend()
        self._ensure(backend)
        rows = backend.run(lambda conn: conn.execute(f"SELECT key, entry FROM {backend.s}.{TABLE} ORDER BY key")
                           .fetchall(), what=f"read {TABLE}")
        found = []
        for key, data in rows:
            entry = ConsumerEntry.from_json(data)
            if entry is not None and entry.key == key:
                found.append(entry)
        return found
