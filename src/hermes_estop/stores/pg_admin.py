"""What the operator's commands ask of a PostgreSQL store, apart from holds: `hermes store init`
(create or upgrade the schema, on a connection of its own) and `hermes store status` (the
server, the row counts, and what this process's listener knows). Both take round trips, so
neither is ever on the hot path; they are kept out of `postgresql`, which is the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg

from hermes_estop.model.errors import StoreError, StoreRefused
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.stores.pg_backend import Backend
from hermes_estop.stores.pg_schema import SCHEMA_VERSION, TABLES, ensure_schema, schema_version
from hermes_estop.stores.pg_url import StoreURL, connect_error

__all__ = ["create_schema", "missing_privileges", "store_status"]


def create_schema(url: StoreURL) -> tuple[int, list[int]]:
    """`hermes store init`: create or upgrade the schema of `url`; (version, versions applied)."""
    try:
        conn = psycopg.connect(url.conninfo, autocommit=True, application_name=f"hermes-estop init {os.getpid()}")
    except psycopg.Error as exc:
        raise connect_error(url, exc) from None
    try:
        with conn:
            return ensure_schema(conn, url.schema)
    except psycopg.Error as exc:
        raise StoreError(f"cannot create the schema {url.schema} in {url.display}: {one_line(exc)}") from None


def _probe(backend: Backend) -> dict[str, Any]:
    def probe(conn: psycopg.Connection) -> dict[str, Any]:
        s = backend.s
        row = conn.execute(
            f"SELECT clock_timestamp(), current_setting('server_version'), current_database(), "
            f"(SELECT count(*) FROM {s}.holds), (SELECT count(*) FROM {s}.audit)"
        ).fetchone()
        assert row is not None  # a SELECT without FROM always returns its one row
        return {"server_time": format_instant(row[0]), "server_version": row[1], "database": row[2],
                "holds": int(row[3]), "audit_events": int(row[4]), "schema_version": schema_version(conn, backend.schema)}

    return backend.run(probe, what="describe the store")


#: what each table needs, for the daemons and the commands (`store init` needs more: it owns the
#: schema): holds and audit are written by every command that writes, consumers by every consumer
#: and pruned by `hermes status`, notify_cursors and occurrences by `hermes serve`
_TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


def missing_privileges(url: StoreURL) -> list[str]:
    """What this role lacks of what `hermes store init` and the daemons need, each named with the
    GRANT that gives it; [] when nothing is missing. Raises `StoreUnavailable` when the server
    does not answer, `StoreRefused` when it refuses the role's password."""
    try:
        conn = psycopg.connect(url.conninfo, autocommit=True, application_name=f"hermes-estop check {os.getpid()}")
    except psycopg.Error as exc:
        raise connect_error(url, exc) from None

    with conn:
        database, role = conn.execute("SELECT current_database(), current_user").fetchone() or ("?", "?")
        schema = url.schema
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None
        if not exists:
            if not _yes(conn, "SELECT has_database_privilege(current_database(), 'CREATE')"):
                return [f"CREATE on database {database}: `hermes store init` creates the schema {schema} "
                        f"(GRANT CREATE ON DATABASE {database} TO {role};)"]
            return []
        if not _yes(conn, "SELECT has_schema_privilege(%s, 'USAGE')", schema):
            return [f"USAGE on schema {schema} (GRANT USAGE ON SCHEMA {schema} TO {role};)"]
        return [*_missing_on_tables(conn, schema, role), *_missing_on_routines(conn, schema, role)]


def _yes(conn: psycopg.Connection, sql: str, *params: str) -> bool:
    row = conn.execute(sql, params).fetchone()
    return bool(row and row[0])


def _missing_on_tables(conn: psycopg.Connection, schema: str, role: str) -> list[str]:
    """The tables of this version that are absent, and the privileges lacking on those present."""
    missing = []
    tables = [row[0] for row in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,))]
    absent = [table for table in TABLES if table not in tables]
    if absent:
        missing.append(f"table(s) {', '.join(f'{schema}.{t}' for t in absent)}: this hermes-estop needs schema "
                       f"version {SCHEMA_VERSION}; run `hermes store init` as the schema's owner, then grant "
                       f"(GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};)")
    for table in tables:
        lacking = [p for p in _TABLE_PRIVILEGES if not _yes(conn, "SELECT has_table_privilege(%s, %s)", f'"{schema}"."{table}"', p)]
        if lacking:
            missing.append(f"{', '.join(lacking)} on {schema}.{table} "
                           f"(GRANT {', '.join(lacking)} ON ALL TABLES IN SCHEMA {schema} TO {role};)")
    return missing


def _missing_on_routines(conn: psycopg.Connection, schema: str, role: str) -> list[str]:
    """USAGE lacking on the schema's sequences and EXECUTE on its functions (the triggers of every
    write call them as the writing role)."""
    missing = []
    sequences = [row[0] for row in conn.execute(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,))]
    for sequence in sequences:
        if not _yes(conn, "SELECT has_sequence_privilege(%s, 'USAGE')", f'"{schema}"."{sequence}"'):
            missing.append(f"USAGE on sequence {schema}.{sequence} "
                           f"(GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role};)")
    functions = [row[0] for row in conn.execute(
        "SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = %s ORDER BY 1", (schema,))]
    for function in functions:
        if not _yes(conn, "SELECT bool_and(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p "
                    "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname = %s",
                    schema, function):
            missing.append(f"EXECUTE on function {schema}.{function} "
                           f"(GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role};)")
    return missing


def store_status(backend: Backend, root: Path | None) -> dict[str, Any]:
    """What `hermes store status` prints; `reachable` False (with `problem`) when the database
    does not answer."""
    url = backend.url
    listener = backend.listener
    info: dict[str, Any] = {
        "backend": "postgresql",
        "url": url.display,
        "schema": url.schema,
        "root": str(root) if root is not None else None,
        "grace_seconds": url.grace,
    }
    try:
        info.update(_probe(backend))
        info["reachable"] = True
    except StoreError as exc:
        info["reachable"] = False
        info["problem"] = str(exc)
    try:
        info["missing_privileges"] = missing_privileges(url)
        info["answers"] = True  # the server let this role in: a failure above is a refusal, not an outage
    except StoreRefused as exc:  # the server answered: an authentication it refused is no outage
        info["missing_privileges"] = None
        info["answers"] = True
        info["refused"] = str(exc)
    except StoreError:
        info["missing_privileges"] = None
        info["answers"] = False
    info["supported_schema_version"] = SCHEMA_VERSION
    _, problem = listener.view()
    offset = backend.clock.offset()
    info["listener"] = {
        "connected": listener.connected,
        "backend_pid": listener.backend_pid,
        "last_contact": format_instant(backend.clock.at(listener.last_contact)) if listener.last_contact else None,
        "problem": problem,
        "clock_offset_ms": round(offset.total_seconds() * 1000, 3) if offset is not None else None,
    }
    return info
