"""`base.RecordTable` on a table of the PostgreSQL store's schema: each record field is a
column (instants are `timestamptz`), so the table stays queryable from psql and keeps the shape
its migration created (`pg_schema`, version 2 for the window ledger's `occurrences`).

`update` is one transaction on the store's writer connection (deletes, upserts, then the
prune), so `load` never sees half of it; a connection found dead before the commit is replaced
and the update retried once, as for every write of the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from hermes_estop.model.timeutil import format_instant, parse_stamp, to_utc
from hermes_estop.stores.base import LEDGER, RecordTable
from hermes_estop.stores.pg_backend import Backend

if TYPE_CHECKING:
    import psycopg

    from hermes_estop.stores.base import Check, JsonRecord

__all__ = ["OCCURRENCES", "PgRecordLayout", "PgRecordTable"]


@dataclass(frozen=True)
class PgRecordLayout:
    """Where a record table's fields live: `table` keyed on column `key`, each record field in
    a column (`columns`: (field, column) pairs), the `instants` among the fields, and the
    field by which records are pruned (`expiry`, an instant)."""

    table: str
    key: str
    columns: tuple[tuple[str, str], ...]
    instants: frozenset[str]
    expiry: str
    what: str

    def column(self, field: str) -> str:
        return dict(self.columns)[field]


#: the window scheduler's ledger (`pg_schema` migration 2)
OCCURRENCES = PgRecordLayout(
    table="occurrences",
    key="key",
    columns=(("window", "window_name"), ("occurrence", "occurrence"), ("scope", "scope"), ("end", "ends_at"),
             ("state", "state"), ("generation", "generation"), ("updated_at", "updated_at"), ("detail", "detail")),
    instants=frozenset({"end", "updated_at"}),
    expiry="end",
    what=LEDGER,
)


class PgRecordTable(RecordTable):
    """Records in `layout.table` of the store's schema. `backend` returns this process's
    backend (a fresh one after a fork); `display` is the store's URL without its password."""

    name = "postgresql"

    def __init__(self, backend: Callable[[], Backend], display: str, schema: str, layout: PgRecordLayout) -> None:
        super().__init__(layout.what, layout.expiry)
        self._backend = backend
        self.layout = layout
        self._where = f"{display} ({schema}.{layout.table})"
        self._names = ", ".join([layout.key, *(column for _, column in layout.columns)])

    def describe(self) -> str:
        return self._where

    def load(self) -> dict[str, JsonRecord]:
        backend = self._backend()
        rows = backend.run(
            lambda conn: conn.execute(f"SELECT {self._names} FROM {backend.s}.{self.layout.table}").fetchall(),
            what=f"read {self.what}",
        )
        return {row[0]: {field: self._from_column(field, value) for (field, _), value in zip(self.layout.columns, row[1:], strict=False)}
                for row in rows}

    def _from_column(self, field: str, value: object) -> object:
        if field in self.layout.instants and isinstance(value, datetime):
            return format_instant(to_utc(value))
        return value

    def _to_column(self, field: str, value: object) -> object:
        return parse_stamp(value) if field in self.layout.instants else value

    def update(self, upserts: Mapping[str, JsonRecord], *, remove: Iterable[str] = (),
               prune_before: datetime | None = None, check: Check | None = None) -> None:
        layout = self.layout
        rows = [(key, *(self._to_column(field, record.get(field)) for field, _ in layout.columns))
                for key, record in upserts.items()]
        gone = list(remove)
        if not rows and not gone and prune_before is None:
            return
        backend = self._backend()
        table = f"{backend.s}.{layout.table}"
        values = ", ".join(["%s"] * (len(layout.columns) + 1))
        assignments = ", ".join(f"{column} = EXCLUDED.{column}" for _, column in layout.columns)
        upsert = (f"INSERT INTO {table} ({self._names}) VALUES ({values}) "
                  f"ON CONFLICT ({layout.key}) DO UPDATE SET {assignments}")

        def work(conn: psycopg.Connection) -> None:
            if gone:
                conn.execute(f"DELETE FROM {table} WHERE {layout.key} = ANY(%s)", [gone])
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(upsert, rows)
            if prune_before is not None:
                conn.execute(f"DELETE FROM {table} WHERE {layout.column(layout.expiry)} < %s", [prune_before])

        backend.run(work, what=f"commit {self.what}")
