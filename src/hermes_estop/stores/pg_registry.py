"""`stores.registry.ConsumerTable` on a table of the PostgreSQL store's schema (`consumers`: the key and
the entry as `jsonb`, made by `hermes store init`: `pg_schema`); each consumer upserts only its
own row."""

from __future__ import annotations

import json
from collections.abc import Callable

from hermes_estop.stores.pg_backend import Backend
from hermes_estop.stores.registry import ConsumerEntry, ConsumerTable

__all__ = ["PgConsumerTable"]

TABLE = "consumers"


class PgConsumerTable(ConsumerTable):
    name = "postgresql"

    def __init__(self, backend: Callable[[], Backend], schema: str) -> None:
        self._backend = backend
        self.schema = schema

    def put(self, entry: ConsumerEntry) -> None:
        backend = self._backend()
        payload = json.dumps(entry.to_json())
        backend.run(lambda conn: conn.execute(
            f"INSERT INTO {backend.s}.{TABLE} (key, entry) VALUES (%s, %s::jsonb) "
            "ON CONFLICT (key) DO UPDATE SET entry = EXCLUDED.entry, updated_at = clock_timestamp()",
            [entry.key, payload]), what=f"report to {TABLE}")

    def remove(self, key: str) -> None:
        backend = self._backend()
        backend.run(lambda conn: conn.execute(f"DELETE FROM {backend.s}.{TABLE} WHERE key = %s", [key]),
                    what=f"deregister from {TABLE}")

    def entries(self) -> list[ConsumerEntry]:
        backend = self._backend()
        rows = backend.run(lambda conn: conn.execute(f"SELECT key, entry FROM {backend.s}.{TABLE} ORDER BY key")
                           .fetchall(), what=f"read {TABLE}")
        found = []
        for key, data in rows:
            entry = ConsumerEntry.from_json(data)
            if entry is not None and entry.key == key:
                found.append(entry)
        return found
