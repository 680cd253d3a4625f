"""`state.StateTable` on a table of the PostgreSQL store's schema (`<service>_cursors`: the name
and a `jsonb` state, made by `hermes store init`: `pg_schema`); written only by the elected
process of the service."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermes_estop.stores.pg_backend import Backend
from hermes_estop.stores.pg_schema import STATE_SERVICES
from hermes_estop.stores.state import StateTable

__all__ = ["PgStateTable"]


class PgStateTable(StateTable):
    name = "postgresql"

    def __init__(self, backend: Callable[[], Backend], schema: str, service: str) -> None:
        if service not in STATE_SERVICES:
            raise ValueError(f"invalid service name {service!r}: the schema has state tables for {STATE_SERVICES}")
        self._backend = backend
        self.schema = schema
        self.table = f"{service}_cursors"

    def load(self) -> dict[str, Any]:
        backend = self._backend()
        rows = backend.run(lambda conn: conn.execute(f"SELECT target, state FROM {backend.s}.{self.table}").fetchall(),
                           what=f"read {self.table}")
        return dict(rows)

    def save(self, name: str, state: dict[str, Any]) -> None:
        backend = self._backend()
        payload = json.dumps(state)
        backend.run(lambda conn: conn.execute(
            f"INSERT INTO {backend.s}.{self.table} (target, state) VALUES (%s, %s::jsonb) "
            "ON CONFLICT (target) DO UPDATE SET state = EXCLUDED.state, updated_at = clock_timestamp()",
            [name, payload]), what=f"save {self.table}")
