"""`state.StateTable` on a table of the PostgreSQL store's schema (`<service>_cursors`: the name
and a `jsonb` state), created on first use; written only by the elected process of the service."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .pg_backend import Backend
from .pg_schema import create_table_once
from .state import StateTable

__all__ = ["PgStateTable"]

_COLUMNS = "target text PRIMARY KEY, state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp()"


class PgStateTable(StateTable):
    name = "postgresql"

    def __init__(self, backend: Callable[[], Backend], schema: str, service: str) -> None:
        if not service.isidentifier():
            raise ValueError(f"invalid service name {service!r}")
        self._backend = backend
        self.schema = schema
        self.table = f"{service}_cursors"
        self._ready = False

    def _ensure(self, backend: Backend) -> None:
        if self._ready:
            return
        backend.run(lambda conn: create_table_once(conn, self.schema, self.table, _COLUMNS),
                    what=f"create the {self.table} table")
        self._ready = True

    def load(self) -> dict[str, Any]:
        backend = self._backend()
        self._ensure(backend)
        rows = backend.run(lambda conn: conn.execute(f"SELECT target, state FROM {backend.s}.{self.table}").fetchall(),
                           what=f"read {self.table}")
        return dict(rows)

    def save(self, name: str, state: dict[str, Any]) -> None:
        backend = self._backend()
        self._ensure(backend)
        payload = json.dumps(state)
        backend.run(lambda conn: conn.execute(
            f"INSERT INTO {backend.s}.{self.table} (target, state) VALUES (%s, %s::jsonb) "
            "ON CONFLICT (target) DO UPDATE SET state = EXCLUDED.state, updated_at = clock_timestamp()",
            [name, payload]), what=f"save {self.table}")
