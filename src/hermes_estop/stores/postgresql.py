"""The fleet backend: holds in PostgreSQL (psycopg 3), shared by every host of a fleet.

Same contract as the sentinel store (`base.HoldStore`), another medium:

- A scope's hold is one row of `<schema>.holds` whose `body` is the sentinel body, raw, so the
  DESIGN 3 read rules apply unchanged (`pg_schema` has the tables and triggers).
- engage / re-arm is ONE transaction: an advisory transaction lock on the scope (so two first
  engages of a scope without a row cannot both decide on "absent"), `SELECT ... FOR UPDATE` of
  the row, `precondition_met`, `merge_hold`, a new generation, the upsert, the audit row, and the
  notification (a trigger, same transaction). `retire(G)` is a single conditional
  `DELETE ... WHERE scope AND generation`; `release` likewise. The removed body is re-parsed in
  Python before the commit, so the database's idea of a body's generation can never make a
  removal that the file store would not make.
- Reads never go to the database: `pg_cache.Listener` keeps the rows in memory, fed by
  LISTEN/NOTIFY, and reads every location as UNREADABLE (held) once it has had no contact with
  the database for `grace` seconds (default 5). After its own write a store waits (up to 2 s)
  until its rows include that write, so a process reads what it just wrote.
- Deadlines are judged by the database's clock (`default_clock()`: `pg_cache.DbClock`).

The store URL is a libpq URL plus two parameters of ours, removed before it reaches libpq:
`schema` (default `hermes_estop`) and `grace` (seconds, default 5), e.g.
`postgresql://estop@db.internal/fleet?schema=hermes_estop&grace=5`.

One process shares one listener and one writer connection per URL among all its stores (an
`Estop()` per request must not open a connection each); a forked child never touches its
parent's connections and opens its own.

Bounds (loopback, 2 shared cores, `python bench/run.py --only postgres`, over 200 samples): a new
hold, a release and an expiry reach another process in 2-3 ms at p50 and under 10 ms at p99
(target: under 100 ms); a check costs what it costs on the file store (no round trip). After the
database stops answering, every check keeps the last known state for at most `grace` seconds
from the last contact (heartbeats every min(1, grace/4) seconds), then holds the fleet; it
recovers by itself within about a second of the database being back (reconnect backoff up to
1 s, then a full re-read). A first check in a fresh process waits for the first connection
attempt (at most `connect_timeout`, default 5 s). `leadership()` elects one process per role
(`pg_leader`): a standby takes over within its poll (1 s) of the leader's death, even by SIGKILL.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from ..audit import AuditEvent
from ..errors import EstopError, HoldConflict, InvalidArgument, StoreError, StoreUnavailable
from ..fsutil import LOCK_TIMEOUT
from ..hold import (
    EngageRequest,
    Fence,
    Hold,
    HoldState,
    Prepared,
    Reading,
    encode_body,
    merge_hold,
    new_generation,
    precondition_met,
    prepare,
)
from ..homes import Location
from ..text import one_line
from ..timeutil import Clock, format_instant, to_utc
from .base import HoldStore, not_current, refused_write
from .pg_cache import DEFAULT_GRACE, DEFAULT_REFRESH, DbClock, Listener, Row, close_quietly, parse_row
from .pg_leader import DEFAULT_POLL, Leadership
from .pg_schema import DEFAULT_SCHEMA, LOCK_CLASS, SCHEMA_VERSION, ensure_schema, quoted, schema_version, validate_schema_name

__all__ = ["PostgresStore", "StoreURL", "parse_store_url", "SYNC_TIMEOUT"]

T = TypeVar("T")

logger = logging.getLogger("hermes_estop")

#: seconds a write waits for this process's rows to include it
SYNC_TIMEOUT = 2.0
_OUR_PARAMS = ("schema", "grace")
_MAX_GRACE = 300.0
_DEFAULT_CONNECT_TIMEOUT = 5
# Detect a dead peer on a silent network within seconds, not the kernel's default two hours.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


class StoreURL:
    """A parsed store URL: the conninfo for libpq, our parameters, and a printable form."""

    def __init__(self, conninfo: str, schema: str, grace: float, display: str, connect_timeout: float) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self.grace = grace
        self.display = display
        self.connect_timeout = connect_timeout


def _redact(parts: Any) -> str:
    netloc = parts.netloc
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            netloc = f"{creds.split(':', 1)[0]}:***@{host}"
    query = "&".join(
        f"{key}=***" if key == "password" else f"{key}={value}" for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def parse_store_url(url: str) -> StoreURL:
    """Split our parameters off a `postgresql://` URL; `InvalidArgument` names a bad value."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidArgument(f"invalid store URL {url!r}: {exc}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(f"invalid store URL {url!r}: expected postgresql://")
    params = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in params if key in _OUR_PARAMS}
    rest = [(key, value) for key, value in params if key not in _OUR_PARAMS]
    schema = validate_schema_name(ours.get("schema", DEFAULT_SCHEMA))
    raw_grace = ours.get("grace")
    grace = DEFAULT_GRACE
    if raw_grace is not None:
        try:
            grace = float(raw_grace)
        except ValueError:
            grace = -1.0
        if not 0 < grace <= _MAX_GRACE:
            raise InvalidArgument(f"invalid grace {raw_grace!r} in the store URL: expected seconds, above 0 and at most {_MAX_GRACE:g}")
    connect_timeout: float = _DEFAULT_CONNECT_TIMEOUT
    if not any(key == "connect_timeout" for key, _ in rest):
        rest.append(("connect_timeout", str(_DEFAULT_CONNECT_TIMEOUT)))
    else:
        try:
            connect_timeout = float(dict(rest)["connect_timeout"])
        except ValueError:
            raise InvalidArgument(f"invalid connect_timeout {dict(rest)['connect_timeout']!r} in the store URL") from None
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), ""))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"invalid store URL {_redact(parts)!r}: {' '.join(str(exc).split())}") from None
    return StoreURL(conninfo, schema, grace, _redact(parts), connect_timeout)


def _one_line(exc: BaseException) -> str:
    return one_line(exc)


class _Expirer:
    """Runs the retires that reads ask for on one daemon thread, so a check never waits on the
    database: with the server frozen (SIGSTOP) or the writer connection busy, a `gate()` still
    answers from memory at once. At most one pending retire per (scope, fence); at most
    `_MAX_PENDING` pending in all (a dropped one is asked for again by the next read after
    `EXPIRE_RETRY`)."""

    _MAX_PENDING = 64

    def __init__(self) -> None:
        self._pending: dict[tuple[str, Fence], Callable[[], object]] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, key: tuple[str, Fence], work: Callable[[], object]) -> None:
        with self._wake:
            if self._stopped or key in self._pending or len(self._pending) >= self._MAX_PENDING:
                return
            self._pending[key] = work
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hermes-estop-expirer", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                key = next(iter(self._pending))
                work = self._pending[key]
            try:
                work()
            except (EstopError, psycopg.Error, OSError) as exc:
                logger.info("retiring an expired hold was left for later: %s", one_line(exc))
            except Exception:  # a bug: say so with its traceback, keep serving
                logger.exception("unexpected error while retiring an expired hold")
            finally:
                with self._wake:
                    self._pending.pop(key, None)
                    self._wake.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no retire is pending or running; False when `timeout` ran out first."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._pending or self._stopped, timeout)

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._pending.clear()
            self._wake.notify_all()


class _Backend:
    """What one process shares per store URL: the listener (rows, clock) and the writer
    connection."""

    def __init__(self, url: StoreURL, refresh: float) -> None:
        self.url = url
        self.schema = url.schema
        self.s = quoted(url.schema)
        self.pid = os.getpid()
        self.clock = DbClock()
        self.listener = Listener(self.connect, url.schema, self.clock, grace=url.grace, refresh=refresh,
                                 connect_timeout=url.connect_timeout)
        self.refs = 0
        self._writer: psycopg.Connection | None = None
        self._writer_lock = threading.Lock()
        self._schema_ready = False
        self.writer_fds: set[int] = set()
        self.leaderships: dict[tuple[str, float], Leadership] = {}
        self.expirer = _Expirer()
        _live.add(self)

    def connect(self, role: str) -> psycopg.Connection:
        """An autocommit connection with the schema ensured; raises psycopg errors."""
        conn = psycopg.connect(self.url.conninfo, autocommit=True, application_name=f"hermes-estop {role} {os.getpid()}",
                               **_KEEPALIVES)
        try:
            if not self._schema_ready:
                ensure_schema(conn, self.schema)
                self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _writer_conn(self) -> psycopg.Connection:
        conn = self._writer
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._drop_writer()
        try:
            conn = self.connect("writer")
        except StoreError:
            raise
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach the PostgreSQL store {self.url.display}: {_one_line(exc)}") from None
        conn.execute("SELECT set_config(%s, %s, false)", ["lock_timeout", f"{int(LOCK_TIMEOUT * 1000)}ms"])
        self.writer_fds.add(conn.fileno())
        self._writer = conn
        return conn

    def _drop_writer(self) -> None:
        conn, self._writer = self._writer, None
        if conn is not None:
            close_quietly(conn, self.writer_fds)

    def run(self, work: Callable[[psycopg.Connection], T], *, what: str) -> T:
        """`work(conn)` in one transaction on the writer connection. A connection found dead
        before the commit was sent is replaced and the work retried once (nothing of it was
        committed); one lost during the commit raises `StoreUnavailable` saying the outcome is
        unknown. Exceptions of `work` (HoldConflict) roll back and propagate."""
        if not self._writer_lock.acquire(timeout=LOCK_TIMEOUT):
            raise StoreError(f"PostgreSQL store busy: could not {what} within {LOCK_TIMEOUT:g}s")
        try:
            for attempt in (1, 2):
                conn = self._writer_conn()
                committing = False
                try:
                    with conn.transaction():
                        result = work(conn)
                        committing = True
                    return result
                except psycopg.Error as exc:
                    if not conn.broken:
                        raise StoreError(f"PostgreSQL store could not {what}: {_one_line(exc)}") from None
                    self._drop_writer()
                    if committing:
                        raise StoreUnavailable(
                            f"PostgreSQL store connection lost while committing ({what}); the outcome is unknown, "
                            f"see `hermes status`: {_one_line(exc)}"
                        ) from None
                    if attempt == 2:
                        raise StoreUnavailable(f"cannot reach the PostgreSQL store {self.url.display}: {_one_line(exc)}") from None
            raise AssertionError("unreachable")
        finally:
            self._writer_lock.release()

    def leadership(self, role: str, poll: float) -> Leadership:
        with _shared_lock:
            leadership = self.leaderships.get((role, poll))
            if leadership is None:
                leadership = self.leaderships[(role, poll)] = Leadership(
                    self.connect, self.schema, role, poll=poll, connect_timeout=self.url.connect_timeout)
        return leadership.start()

    def close(self) -> None:
        self.expirer.stop()
        for leadership in list(self.leaderships.values()):
            leadership.stop()
        self.listener.stop()
        with self._writer_lock:
            self._drop_writer()
        _live.discard(self)

    def forget_after_fork(self) -> None:
        """In a forked child: point this backend's sockets at /dev/null, so that whatever
        happens to the inherited connection objects can never talk on the parent's sessions."""
        fds = set(self.listener.fds) | set(self.writer_fds)
        for leadership in self.leaderships.values():
            fds |= leadership.fds
            leadership.fds.clear()
        if not fds:
            return
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for fd in fds:
                try:
                    os.dup2(null, fd)
                except OSError:
                    pass
        finally:
            os.close(null)
        self.listener.fds.clear()
        self.writer_fds.clear()


_live: "weakref.WeakSet[_Backend]" = weakref.WeakSet()
_shared: dict[tuple[Any, ...], _Backend] = {}
_shared_lock = threading.Lock()
_inherited: list[_Backend] = []


def _after_fork_in_child() -> None:
    global _shared_lock
    for backend in list(_live):
        backend.forget_after_fork()
        _inherited.append(backend)  # never collected: its objects must not finish the parent's sessions
    _shared.clear()
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _acquire(url: StoreURL, refresh: float, share: bool) -> _Backend:
    if not share:
        backend = _Backend(url, refresh)
        backend.refs = 1
        return backend
    key = (url.conninfo, url.schema, url.grace, refresh)
    with _shared_lock:
        backend = _shared.get(key)
        if backend is None or backend.pid != os.getpid():
            backend = _shared[key] = _Backend(url, refresh)
        backend.refs += 1
        return backend


def _release(backend: _Backend, shared: bool) -> None:
    with _shared_lock:
        backend.refs -= 1
        if backend.refs > 0:
            return
        if shared:
            for key, value in list(_shared.items()):
                if value is backend:
                    del _shared[key]
    backend.close()


class _Mismatch(Exception):
    """Raised inside a removal's transaction to roll it back: the row the DELETE matched is not
    the hold the caller was fenced on once its body is parsed."""


class PostgresStore(HoldStore):
    """Holds in PostgreSQL. `url` is a `postgresql://` URL (see the module docstring); `root` is
    the fleet root, shown by `describe()` only (rows are keyed on `Location.key`)."""

    name = "postgresql"

    def __init__(self, url: str, *, root: Path | None = None, refresh: float = DEFAULT_REFRESH, share: bool = True,
                 interleave: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.url = parse_store_url(url)
        self.root = Path(root) if root is not None else None
        self.refresh = float(refresh)
        self.share = share
        self.interleave = interleave
        self._backend = _acquire(self.url, self.refresh, share)
        self._absent: dict[Location, Reading] = {}
        self._prepared: dict[Location, tuple[Row, Prepared]] = {}
        self._closed = False

    @property
    def backend(self) -> _Backend:
        """This process's backend (a fresh one after a fork)."""
        backend = self._backend
        if backend.pid != os.getpid():
            backend = self._backend = _acquire(self.url, self.refresh, self.share)
        return backend

    @property
    def listener(self) -> Listener:
        return self.backend.listener

    @property
    def schema(self) -> str:
        return self.url.schema

    def default_clock(self) -> Clock:
        return self._now

    def _now(self) -> datetime:
        backend = self.backend
        if not backend.clock.measured:
            backend.listener.ensure_started()
        return backend.clock()

    def leadership(self, role: str = "windows", poll: float = DEFAULT_POLL) -> Leadership:
        """This process's campaign for `role` among every process on this database and schema
        (`pg_leader`): started on first call, shared by the process, ended by `close()`. Pass
        its `is_leader` to a service that must run on one host only (the window scheduler)."""
        return self.backend.leadership(role, float(poll))

    def where(self, location: Location) -> str:
        return f"{self.url.display} {self.schema}.holds scope {location.key!r}"

    def leader_gate(self, role: str, poll: float | None = None) -> Callable[[], bool]:
        return self.leadership(role, DEFAULT_POLL if poll is None else poll).is_leader

    def settle(self, timeout: float = SYNC_TIMEOUT) -> bool:
        return self.backend.expirer.wait_idle(timeout)

    def sync(self, timeout: float = SYNC_TIMEOUT) -> bool:
        """Wait until this process's rows include every commit made before the call (also one
        made by hand in psql), and every expiry retire a read has asked for; False when the
        database did not answer in time."""
        backend = self.backend
        return backend.expirer.wait_idle(timeout) and backend.listener.sync(timeout)

    # -- reading -----------------------------------------------------------------------------

    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        try:
            rows, problem = self.backend.listener.view()
            if problem is not None:
                return tuple(Reading(loc, HoldState.UNREADABLE, None, Fence(), problem) for loc in locations)
            return tuple(self._classify(loc, rows.get(loc.key), now) for loc in locations)
        except Exception as exc:  # reading never raises into a consumer
            problem = f"PostgreSQL store: unexpected {type(exc).__name__}: {exc}"
            return tuple(Reading(loc, HoldState.UNREADABLE, None, Fence(), problem) for loc in locations)

    def _classify(self, location: Location, row: Row | None, now: datetime, cached: bool = True) -> Reading:
        """DESIGN 3 for a row; `cached` keeps both readings of a listener row, so a check costs
        a comparison (rows read inside a write transaction are classified afresh)."""
        if row is None:
            absent = self._absent.get(location)
            if absent is None:
                absent = self._absent[location] = Reading(location, HoldState.ABSENT)
            return absent
        if not cached:
            return prepare(location, row.parsed, (row.revision,)).at(now)
        entry = self._prepared.get(location)
        if entry is None or entry[0] is not row:
            entry = self._prepared[location] = (row, prepare(location, row.parsed, (row.revision,)))
        return entry[1].at(now)

    def _standing(self, conn: psycopg.Connection, location: Location, now: datetime, lock: bool) -> Reading:
        found = conn.execute(
            f"SELECT body, revision FROM {self.backend.s}.holds WHERE scope = %s" + (" FOR UPDATE" if lock else ""),
            [location.key],
        ).fetchone()
        return self._classify(location, parse_row(*found) if found else None, now, cached=False)

    # -- writing -----------------------------------------------------------------------------

    def _audit_row(self, conn: psycopg.Connection, event: AuditEvent) -> None:
        conn.execute(
            f"INSERT INTO {self.backend.s}.audit (time, event, location, generation, actor, reason, deadline, detail) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [event.time, event.event, event.location, event.generation, event.actor, event.reason, event.deadline,
             event.detail],
        )

    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str) -> Hold:
        backend = self.backend

        def work(conn: psycopg.Connection) -> Hold:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LOCK_CLASS, f"{self.schema}/{location.key}"])
            standing = self._standing(conn, location, now, lock=True)
            if not precondition_met(request.only_if, standing):
                raise refused_write(location, standing)
            hold = merge_hold(standing.hold if standing.active else None, request, now, new_generation())
            conn.execute(
                f"INSERT INTO {backend.s}.holds (scope, body) VALUES (%s, %s) "
                "ON CONFLICT (scope) DO UPDATE SET body = EXCLUDED.body",
                [location.key, encode_body(hold)],
            )
            self.step("engage:before-commit")
            if standing.state is HoldState.EXPIRED and standing.hold is not None:
                # the lift of the expired hold this write replaces, as the file store records it
                self._audit_row(conn, AuditEvent(now, "expire", location.scope, standing.fence.describe()
                                                 if standing.fence else None, actor, standing.hold.reason,
                                                 standing.hold.expires_at))
            event = "rearm" if standing.active else "engage"
            self._audit_row(conn, AuditEvent(now, event, location.scope, hold.generation, actor, hold.reason, hold.expires_at))
            return hold

        hold = backend.run(work, what=f"engage {location.describe()}")
        backend.listener.sync(SYNC_TIMEOUT)
        return hold

    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire") -> bool:
        if fence.generation is not None:
            condition, value = "generation = %s", fence.generation
        elif fence.file_id is not None and len(fence.file_id) == 1:
            condition, value = "generation IS NULL AND revision = %s", fence.file_id[0]
        else:
            return False
        backend = self.backend

        def work(conn: psycopg.Connection) -> bool:
            found = conn.execute(
                f"DELETE FROM {backend.s}.holds WHERE scope = %s AND {condition} RETURNING body, revision",
                [location.key, value],
            ).fetchone()
            if found is None:
                return False
            self.step("retire:before-unlink")  # the file store's name: deleted, not yet committed
            standing = self._classify(location, parse_row(*found), now, cached=False)
            hold = standing.hold
            if hold is None or hold.generation != fence.generation:
                raise _Mismatch()
            self._audit_row(conn, AuditEvent(now, event, location.scope, fence.describe(), actor, hold.reason, hold.expires_at))
            return True

        try:
            removed = backend.run(work, what=f"retire a hold at {location.describe()}")
        except _Mismatch:
            return False
        if removed:
            backend.listener.sync(SYNC_TIMEOUT)
        return removed

    def try_retire_expired(self, location: Location, fence: Fence, now: datetime, actor: str) -> bool | None:
        """Handed to the backend's expirer thread: a read never waits on the database."""
        self.backend.expirer.submit((location.key, fence),
                                    lambda: self.retire(location, fence, now, actor, event="expire"))
        return None

    def release(self, location: Location, generation: str | None, now: datetime, actor: str) -> Reading | None:
        backend = self.backend

        def conflict(conn: psycopg.Connection) -> HoldConflict:
            standing = self._standing(conn, location, now, lock=False)
            return not_current(location, generation, None if standing.state is HoldState.ABSENT else standing)

        def work(conn: psycopg.Connection) -> Reading | None:
            if generation is None:
                found = conn.execute(
                    f"DELETE FROM {backend.s}.holds WHERE scope = %s RETURNING body, revision", [location.key]
                ).fetchone()
                if found is None:
                    return None
            else:
                found = conn.execute(
                    f"DELETE FROM {backend.s}.holds WHERE scope = %s AND generation = %s RETURNING body, revision",
                    [location.key, generation],
                ).fetchone()
                if found is None:
                    raise conflict(conn)
            standing = self._classify(location, parse_row(*found), now, cached=False)
            if generation is not None and (standing.hold is None or standing.hold.generation != generation):
                raise _Mismatch()
            hold = standing.hold
            self._audit_row(conn, AuditEvent(now, "release", location.scope,
                                             standing.fence.describe() if standing.fence else None, actor,
                                             hold.reason if hold else None, hold.expires_at if hold else None))
            return standing

        try:
            removed = backend.run(work, what=f"release {location.describe()}")
        except _Mismatch:
            removed = None
            raise backend.run(conflict, what=f"read {location.describe()}") from None
        if removed is not None:
            backend.listener.sync(SYNC_TIMEOUT)
        return removed

    # -- audit -------------------------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        self.backend.run(lambda conn: self._audit_row(conn, event), what="append to the audit trail")

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        backend = self.backend
        sql = (f"SELECT time, event, location, generation, actor, reason, deadline, detail FROM {backend.s}.audit "
               "ORDER BY id DESC")
        params: list[Any] = []
        if limit:
            sql += " LIMIT %s"
            params.append(int(limit))
        rows = backend.run(lambda conn: conn.execute(sql, params).fetchall(), what="read the audit trail")
        return [
            AuditEvent(to_utc(time), event, location, generation, actor, reason, to_utc(deadline) if deadline else None, detail)
            for time, event, location, generation, actor, reason, deadline, detail in reversed(rows)
        ]

    # -- the rest ----------------------------------------------------------------------------

    def init_schema(self) -> tuple[int, list[int]]:
        """`hermes store init`: create or upgrade the schema; (version, versions applied)."""
        backend = self.backend
        try:
            conn = psycopg.connect(backend.url.conninfo, autocommit=True, application_name=f"hermes-estop init {os.getpid()}")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach the PostgreSQL store {self.url.display}: {_one_line(exc)}") from None
        try:
            with conn:
                return ensure_schema(conn, self.schema)
        except psycopg.Error as exc:
            raise StoreError(f"cannot create the schema {self.schema} in {self.url.display}: {_one_line(exc)}") from None

    def describe(self) -> dict[str, Any]:
        """What `hermes store status` prints; `reachable` False (with `problem`) when the
        database does not answer. Takes round trips: never on the hot path."""
        backend = self.backend
        listener = backend.listener
        info: dict[str, Any] = {
            "backend": self.name,
            "url": self.url.display,
            "schema": self.schema,
            "root": str(self.root) if self.root is not None else None,
            "grace_seconds": self.url.grace,
        }

        def probe(conn: psycopg.Connection) -> dict[str, Any]:
            s = backend.s
            row = conn.execute(
                f"SELECT clock_timestamp(), current_setting('server_version'), current_database(), "
                f"(SELECT count(*) FROM {s}.holds), (SELECT count(*) FROM {s}.audit)"
            ).fetchone()
            return {"server_time": format_instant(row[0]), "server_version": row[1], "database": row[2],
                    "holds": int(row[3]), "audit_events": int(row[4]), "schema_version": schema_version(conn, self.schema)}

        try:
            info.update(backend.run(probe, what="describe the store"))
            info["reachable"] = True
        except StoreError as exc:
            info["reachable"] = False
            info["problem"] = str(exc)
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

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        backend = self._backend
        if backend.pid == os.getpid():
            _release(backend, self.share)
