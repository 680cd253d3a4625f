"""The audit trail of a PostgreSQL store: the `audit` table of its schema, one row per event,
appended in the same transaction as the hold change it records (engage, retire, release), so the
trail and the holds can never disagree after a crash."""

from __future__ import annotations

from typing import Any

import psycopg

from ..audit import AuditEvent
from ..timeutil import to_utc
from .pg_backend import Backend

__all__ = ["append_event", "read_events"]

_FIELDS = "time, event, location, generation, actor, reason, deadline, detail"


def append_event(conn: psycopg.Connection, schema: str, event: AuditEvent) -> None:
    """Insert `event` on `conn`, inside the caller's transaction; `schema` is quoted."""
    conn.execute(
        f"INSERT INTO {schema}.audit ({_FIELDS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        [event.time, event.event, event.location, event.generation, event.actor, event.reason, event.deadline,
         event.detail],
    )


def read_events(backend: Backend, limit: int | None = None) -> list[AuditEvent]:
    """Audit events, oldest first; with `limit`, only the newest `limit`."""
    sql = f"SELECT {_FIELDS} FROM {backend.s}.audit ORDER BY id DESC"
    params: list[Any] = []
    if limit:
        sql += " LIMIT %s"
        params.append(int(limit))
    rows = backend.run(lambda conn: conn.execute(sql, params).fetchall(), what="read the audit trail")
    return [
        AuditEvent(to_utc(time), event, location, generation, actor, reason, to_utc(deadline) if deadline else None, detail)
        for time, event, location, generation, actor, reason, deadline, detail in reversed(rows)
    ]
