"""The audit trail of a PostgreSQL store: the `audit` table of its schema, one row per event,
appended in the same transaction as the hold change it records (engage, retire, release), so the
trail and the holds can never disagree after a crash."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from hermes_estop.model.audit_event import AuditEntry, AuditEvent
from hermes_estop.model.timeutil import to_utc
from hermes_estop.stores.pg_backend import Backend

__all__ = ["append_event", "read_after", "read_events", "read_head"]

_FIELDS = "time, event, location, generation, actor, reason, deadline, detail"


def append_event(conn: psycopg.Connection, schema: str, event: AuditEvent) -> None:
    """Insert `event` on `conn`, inside the caller's transaction; `schema` is quoted."""
    conn.execute(
        f"INSERT INTO {schema}.audit ({_FIELDS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        [event.time, event.event, event.location, event.generation, event.actor, event.reason, event.deadline,
         event.detail],
    )


def read_events(backend: Backend, limit: int | None = None, since: datetime | None = None) -> list[AuditEvent]:
    """Audit events, oldest first; with `limit`, only the newest `limit`; with `since`, only
    those at or after it."""
    sql = f"SELECT {_FIELDS} FROM {backend.s}.audit"
    params: list[Any] = []
    if since is not None:
        sql += " WHERE time >= %s"
        params.append(since)
    sql += " ORDER BY id DESC"
    if limit:
        sql += " LIMIT %s"
        params.append(int(limit))
    rows = backend.run(lambda conn: conn.execute(sql, params).fetchall(), what="read the audit trail")
    return [_event(row) for row in reversed(rows)]


def _event(row: TupleRow) -> AuditEvent:
    time, event, location, generation, actor, reason, deadline, detail = row
    return AuditEvent(to_utc(time), event, location, generation, actor, reason, to_utc(deadline) if deadline else None,
                      detail)


def read_head(backend: Backend) -> int:
    """The id of the newest audit row (0 when there is none)."""
    row = backend.run(lambda conn: conn.execute(f"SELECT coalesce(max(id), 0) FROM {backend.s}.audit").fetchone(),
                      what="read the audit trail")
    return int(row[0]) if row else 0


def read_after(backend: Backend, schema: str, position: int, limit: int) -> list[AuditEntry]:
    """At most `limit` rows with an id above `position`, oldest first; an entry's id names the
    schema and the row, stable across re-reads."""
    sql = f"SELECT id, {_FIELDS} FROM {backend.s}.audit WHERE id > %s ORDER BY id LIMIT %s"
    rows = backend.run(lambda conn: conn.execute(sql, [position, limit]).fetchall(), what="read the audit trail")
    return [AuditEntry(int(row[0]), f"audit-{schema}-{row[0]}", _event(row[1:])) for row in rows]
