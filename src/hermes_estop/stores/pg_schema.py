"""The PostgreSQL store's schema: versioned migrations, applied idempotently under a lock.

Everything lives in one schema (default `hermes_estop`; `?schema=` in the store URL picks
another, which is how tests isolate themselves):

- `holds`: one row per scope (`Location.key`: "fleet", a profile name, "home:<path>") whose
  `body` is the raw sentinel body (bytea), so docs/design.md §3's read rules apply to it byte for byte:
  an empty or corrupt body reads as UNREADABLE, which holds. `generation` and `revision` are
  stamped by a trigger on every insert and update, also for a hand edit in psql:
  `generation` is the body's generation (NULL when it has none or does not parse) and is what
  `retire(G)` deletes on; `revision` comes from one sequence, so it grows with every write of a
  scope and fences the removal of a body that has no generation (the file store's file identity).
  An insert, update, delete or truncate notifies `<schema>.holds` from the same transaction;
  since version 3 the notification carries the changed row when it fits (`pg_notice`).
- `audit`: the audit trail, one row per event, ordered by `id`.
- `occurrences`: the window scheduler's ledger (`pg_records.OCCURRENCES`, handed out by
  `PostgresStore.open_ledger()`), one row per occurrence.
- `consumers`: the consumer registry (`pg_registry`); `notify_cursors`: the notifier's cursors
  (`pg_state`). Every table a command uses is made here, by `hermes store init`, never on
  first use: a daemon role needs no CREATE.
- `schema_version`: one row per applied migration.

Hand operation, the database's `touch ESTOP` / `rm ESTOP`:
`INSERT INTO hermes_estop.holds (scope, body) VALUES ('fleet', '')` (held, admits nobody) and
`DELETE FROM hermes_estop.holds WHERE scope = 'fleet'`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hermes_estop.model.errors import InvalidArgument, StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "STATE_SERVICES",
    "TABLES",
    "LOCK_CLASS",
    "validate_schema_name",
    "quoted",
    "channel_name",
    "ensure_schema",
    "schema_version",
]

DEFAULT_SCHEMA = "hermes_estop"
#: first key of every advisory lock this package takes ("HERM"); the second is per purpose
LOCK_CLASS = 0x4845524D
_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,47}")

# (version, description, statements). `{s}` is the quoted schema name. Never edit a released
# migration: add the next version.
_MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "holds, audit, revision sequence, stamping and notifying triggers",
        [
            "CREATE SEQUENCE IF NOT EXISTS {s}.revisions",
            """CREATE TABLE IF NOT EXISTS {s}.holds (
                scope      text PRIMARY KEY,
                body       bytea NOT NULL,
                generation text,
                revision   bigint NOT NULL DEFAULT 0,
                updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
            )""",
            """CREATE TABLE IF NOT EXISTS {s}.audit (
                id          bigserial PRIMARY KEY,
                time        timestamptz NOT NULL,
                event       text NOT NULL,
                location    text NOT NULL,
                generation  text,
                actor       text,
                reason      text,
                deadline    timestamptz,
                detail      text,
                recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
            )""",
            # Mirrors hold.parse_body's notion of the generation; anything it cannot parse has
            # none. The store double-checks in Python before it commits a removal.
            """CREATE OR REPLACE FUNCTION {s}.body_generation(body bytea) RETURNS text
               LANGUAGE plpgsql IMMUTABLE AS $fn$
               DECLARE
                 doc jsonb;
               BEGIN
                 IF body IS NULL OR octet_length(body) > 1048576 THEN
                   RETURN NULL;
                 END IF;
                 doc := regexp_replace(convert_from(body, 'UTF8'), '^' || U&'\\FEFF', '')::jsonb;
                 IF jsonb_typeof(doc) = 'object' AND jsonb_typeof(doc -> 'generation') = 'string'
                    AND doc ->> 'generation' <> '' THEN
                   RETURN doc ->> 'generation';
                 END IF;
                 RETURN NULL;
               EXCEPTION WHEN OTHERS THEN
                 RETURN NULL;
               END
               $fn$""",
            """CREATE OR REPLACE FUNCTION {s}.holds_stamp() RETURNS trigger
               LANGUAGE plpgsql AS $fn$
               BEGIN
                 NEW.revision := nextval('{s}.revisions');
                 NEW.generation := {s}.body_generation(NEW.body);
                 NEW.updated_at := clock_timestamp();
                 RETURN NEW;
               END
               $fn$""",
            """CREATE OR REPLACE FUNCTION {s}.holds_notify() RETURNS trigger
               LANGUAGE plpgsql AS $fn$
               BEGIN
                 IF TG_OP = 'TRUNCATE' THEN
                   PERFORM pg_notify(TG_TABLE_SCHEMA || '.holds', '*');
                 ELSIF TG_OP = 'DELETE' THEN
                   PERFORM pg_notify(TG_TABLE_SCHEMA || '.holds', OLD.scope);
                 ELSE
                   PERFORM pg_notify(TG_TABLE_SCHEMA || '.holds', NEW.scope);
                 END IF;
                 RETURN NULL;
               END
               $fn$""",
            "DROP TRIGGER IF EXISTS holds_stamp ON {s}.holds",
            """CREATE TRIGGER holds_stamp BEFORE INSERT OR UPDATE ON {s}.holds
               FOR EACH ROW EXECUTE FUNCTION {s}.holds_stamp()""",
            "DROP TRIGGER IF EXISTS holds_notify ON {s}.holds",
            """CREATE TRIGGER holds_notify AFTER INSERT OR UPDATE OR DELETE ON {s}.holds
               FOR EACH ROW EXECUTE FUNCTION {s}.holds_notify()""",
            "DROP TRIGGER IF EXISTS holds_truncated ON {s}.holds",
            """CREATE TRIGGER holds_truncated AFTER TRUNCATE ON {s}.holds
               FOR EACH STATEMENT EXECUTE FUNCTION {s}.holds_notify()""",
        ],
    ),
    (
        2,
        "occurrences: the window scheduler's ledger",
        [
            """CREATE TABLE IF NOT EXISTS {s}.occurrences (
                key         text PRIMARY KEY,
                window_name text NOT NULL,
                occurrence  text NOT NULL,
                scope       text NOT NULL,
                ends_at     timestamptz NOT NULL,
                state       text NOT NULL,
                generation  text,
                updated_at  timestamptz,
                detail      text
            )""",
            "CREATE INDEX IF NOT EXISTS occurrences_ends_at ON {s}.occurrences (ends_at)",
        ],
    ),
    (
        3,
        "holds notifications carry the changed row (pg_notice)",
        [
            # The transaction's id, the scope, and the new body (hex) and revision, or that the
            # row was deleted: a listener applies a row that ARMS a scope without re-reading the
            # table and re-reads for anything else (`pg_notice`). '*' (TRUNCATE, a body too
            # large for a notification) asks for a re-read, as any payload it cannot parse does.
            """CREATE OR REPLACE FUNCTION {s}.holds_notify() RETURNS trigger
               LANGUAGE plpgsql AS $fn$
               DECLARE
                 payload text;
               BEGIN
                 IF TG_OP = 'DELETE' THEN
                   payload := json_build_object('x', txid_current(), 's', OLD.scope, 'd', true)::text;
                 ELSIF TG_OP <> 'TRUNCATE' AND octet_length(NEW.body) <= 3800 THEN
                   payload := json_build_object('x', txid_current(), 's', NEW.scope, 'r', NEW.revision,
                                                'b', encode(NEW.body, 'hex'))::text;
                 END IF;
                 IF payload IS NULL OR octet_length(payload) > 7900 THEN
                   payload := '*';
                 END IF;
                 PERFORM pg_notify(TG_TABLE_SCHEMA || '.holds', payload);
                 RETURN NULL;
               END
               $fn$""",
        ],
    ),
]

_MIGRATIONS.append((
    4,
    "consumers and notify_cursors: every table a command uses, made by `hermes store init`",
    [
        # Made lazily before version 4, by whichever process first used them: a daemon role
        # without CREATE then failed (issue 32 item 13).
        """CREATE TABLE IF NOT EXISTS {s}.consumers (
            key        text PRIMARY KEY,
            entry      jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
        """CREATE TABLE IF NOT EXISTS {s}.notify_cursors (
            target     text PRIMARY KEY,
            state      jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ],
))

_MIGRATIONS.append((
    5,
    "tokens_cursors: the write API's bearer tokens (their hashes), shared by every serve",
    [
        """CREATE TABLE IF NOT EXISTS {s}.tokens_cursors (
            target     text PRIMARY KEY,
            state      jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ],
))

_MIGRATIONS.append((
    6,
    "policy_cursors: the fleet's arming policy, one document every host enforces (issue 37)",
    [
        """CREATE TABLE IF NOT EXISTS {s}.policy_cursors (
            target     text PRIMARY KEY,
            state      jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ],
))

SCHEMA_VERSION = _MIGRATIONS[-1][0]
#: every table of the current schema: what `hermes store check` checks the role's privileges on
TABLES = ("audit", "consumers", "holds", "notify_cursors", "occurrences", "policy_cursors", "schema_version",
          "tokens_cursors")
#: the services whose state has a table (`PostgresStore.open_state`)
STATE_SERVICES = ("notify", "policy", "tokens")


def validate_schema_name(name: str) -> str:
    """A schema name is embedded in SQL, so it is held to a plain identifier."""
    if not isinstance(name, str) or not _SCHEMA_RE.fullmatch(name):
        raise InvalidArgument(
            f"invalid schema {name!r}: use lower-case letters, digits and '_' (at most 48, not starting with a digit)"
        )
    return name


def quoted(schema: str) -> str:
    return '"' + validate_schema_name(schema) + '"'


def channel_name(schema: str) -> str:
    """The LISTEN/NOTIFY channel the holds of `schema` change on."""
    return f"{validate_schema_name(schema)}.holds"


def schema_version(conn: psycopg.Connection, schema: str) -> int | None:
    """The applied version, or None when the schema has not been created."""
    row = conn.execute("SELECT to_regclass(%s)", [f"{quoted(schema)}.schema_version"]).fetchone()
    if row is None or row[0] is None:
        return None
    row = conn.execute(f"SELECT max(version) FROM {quoted(schema)}.schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def ensure_schema(conn: psycopg.Connection, schema: str) -> tuple[int, list[int]]:
    """Bring `schema` to `SCHEMA_VERSION`: (version now, versions applied by this call).

    Idempotent and safe to run from many processes at once: the migrations run in one
    transaction under an advisory lock, and a schema that is already current costs two
    catalog reads and no DDL (so a role without CREATE can still use it). Raises `StoreError`
    when the database carries a newer version than this code knows."""
    current = schema_version(conn, schema)
    if current == SCHEMA_VERSION:
        return current, []
    s = quoted(schema)
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LOCK_CLASS, f"{schema}/#schema"])
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {s}.schema_version (
                version     integer PRIMARY KEY,
                description text NOT NULL,
                applied_at  timestamptz NOT NULL DEFAULT clock_timestamp()
            )"""
        )
        row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {s}.schema_version").fetchone()
        current = int(row[0]) if row else 0  # an aggregate: always one row
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"schema {schema} is at version {current}, newer than this hermes-estop knows "
                f"({SCHEMA_VERSION}): upgrade hermes-estop"
            )
        for version, description, statements in _MIGRATIONS:
            if version <= current:
                continue
            for statement in statements:
                conn.execute(statement.replace("{s}", s))
            conn.execute(f"INSERT INTO {s}.schema_version (version, description) VALUES (%s, %s)",
                         [version, description])
            applied.append(version)
    return SCHEMA_VERSION, applied
