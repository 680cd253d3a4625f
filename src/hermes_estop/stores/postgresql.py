"""The fleet backend: holds in PostgreSQL (psycopg 3), shared by every host of a fleet.

Same contract as the sentinel store (`base.HoldStore`), another medium:

- A scope's hold is one row of `<schema>.holds` whose `body` is the sentinel body, raw, so the
  docs/design.md §3 read rules apply unchanged (`pg_schema` has the tables and triggers).
- engage / re-arm is ONE transaction: an advisory transaction lock on the scope (so two first
  engages of a scope without a row cannot both decide on "absent"), `SELECT ... FOR UPDATE` of
  the row, `precondition_met`, `merge_hold`, a new generation, the upsert, the audit row, and the
  notification (a trigger, same transaction). `retire(G)` and `release` take the same locks,
  decide in Python which hold of the row's body goes (`base.fence_matches`, the full hold or a
  scoped one: docs/design.md, scoped holds) and rewrite the row without it, or delete it when
  nothing stands any more; the database's idea of a body's generation can never make a removal
  that the file store would not make.
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
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from hermes_estop.model.audit_event import AuditEntry, AuditEvent
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import (
    Cause,
    EngageRequest,
    Fence,
    Hold,
    HoldState,
    Prepared,
    Reading,
    Sentinel,
    encode_sentinel,
    prepare,
)
from hermes_estop.model.homes import Location, profile_names, validate_profile_name
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, format_instant
from hermes_estop.stores.base import (
    Arming,
    HoldStore,
    RecordTable,
    SaidOnce,
    expiry_stamp,
    fence_matches,
    not_current,
    planned_engage,
    released_reading,
    scoped_detail,
    without,
)
from hermes_estop.stores.pg_admin import create_schema, store_status
from hermes_estop.stores.pg_audit import append_event, read_after, read_events, read_head
from hermes_estop.stores.pg_backend import Backend, acquire, release
from hermes_estop.stores.pg_cache import DEFAULT_REFRESH, Listener, ScopeRow, parse_row
from hermes_estop.stores.pg_leader import DEFAULT_POLL, Leadership
from hermes_estop.stores.pg_records import OCCURRENCES, PgRecordTable
from hermes_estop.stores.pg_registry import PgConsumerTable
from hermes_estop.stores.pg_schema import LOCK_CLASS
from hermes_estop.stores.pg_state import PgStateTable
from hermes_estop.stores.pg_url import StoreURL, parse_store_url
from hermes_estop.stores.registry import ConsumerTable
from hermes_estop.stores.state import StateTable

if TYPE_CHECKING:
    from hermes_estop.stores.base import Judge

__all__ = ["PostgresStore", "StoreURL", "parse_store_url", "SYNC_TIMEOUT"]

logger = logging.getLogger("hermes_estop")

#: seconds a write waits for this process's rows to include it
SYNC_TIMEOUT = 2.0


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
        self._backend = acquire(self.url, self.refresh, share)
        self._absent: dict[Location, Reading] = {}
        self._prepared: dict[Location, tuple[ScopeRow, Prepared]] = {}
        self._refusals = SaidOnce()
        self._closed = False

    @property
    def backend(self) -> Backend:
        """This process's backend (a fresh one after a fork)."""
        backend = self._backend
        if backend.pid != os.getpid():
            backend = self._backend = acquire(self.url, self.refresh, self.share)
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

    def reachable(self) -> bool:
        """False while reads are held for want of the database (the listener's grace ran out)."""
        try:
            return self.backend.listener.view()[1] is None
        except Exception:  # asked by metrics, which never raise: a bug there reads as unreachable, loudly
            logger.exception("hermes-estop: cannot tell whether the PostgreSQL store answers")
            return False

    def settle(self, timeout: float = SYNC_TIMEOUT) -> bool:
        return self.backend.listener.sync(timeout)

    def sync(self, timeout: float = SYNC_TIMEOUT) -> bool:
        """Wait until this process's rows include every commit made before the call (also one
        made by hand in psql); False when the database did not answer in time."""
        return self.backend.listener.sync(timeout)

    # -- reading -----------------------------------------------------------------------------

    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        try:
            rows, problem = self.backend.listener.view()
            if problem is not None:
                return tuple(Reading(loc, HoldState.UNREADABLE, None, Fence(), problem, Cause.STORE_DOWN)
                             for loc in locations)
            return tuple(self._classify(loc, rows.get(loc.key), now) for loc in locations)
        except Exception as exc:  # reading never raises into a consumer
            problem = f"PostgreSQL store: unexpected {type(exc).__name__}: {exc}"
            return tuple(Reading(loc, HoldState.UNREADABLE, None, Fence(), problem, Cause.STORE_DOWN) for loc in locations)

    def _classify(self, location: Location, row: ScopeRow | None, now: datetime, cached: bool = True) -> Reading:
        """docs/design.md §3 for a row; `cached` keeps both readings of a listener row, so a check costs
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
        append_event(conn, self.backend.s, event)

    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str,
               judge: Judge | None = None) -> Hold:
        """Every hold of a location (the full one and the scoped ones) lives in its one row's
        body, laid out as the file store lays out `ESTOP` (docs/design.md, scoped holds): one
        advisory lock and one row lock cover them all."""
        backend = self.backend

        def work(conn: psycopg.Connection) -> Hold:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LOCK_CLASS, f"{self.schema}/{location.key}"])
            standing = self._standing(conn, location, now, lock=True)
            arming = planned_engage(location, standing, request, now)
            if judge is not None:
                judge(standing, arming.sentinel, self._server_now(conn))
            conn.execute(
                f"INSERT INTO {backend.s}.holds (scope, body) VALUES (%s, %s) "
                "ON CONFLICT (scope) DO UPDATE SET body = EXCLUDED.body",
                [location.key, encode_sentinel(arming.sentinel, now)],
            )
            self.step("engage:before-commit")
            self._audit_arming(conn, location, arming, now, actor)
            return arming.hold

        hold = backend.run(work, what=f"engage {location.describe()}")
        backend.listener.sync(SYNC_TIMEOUT)
        return hold

    def _audit_arming(self, conn: psycopg.Connection, location: Location, arming: Arming, now: datetime,
                      actor: str) -> None:
        """The rows of one engage: the lift of each expired hold it drops (as the file store records
        it), then the engage. In a savepoint: an audit row the server refuses never refuses the stop."""
        hold = arming.hold
        try:
            with conn.transaction():
                server_now = self._server_now(conn) if arming.lifted else now
                for expired in arming.lifted:
                    if expired.hold is not None:
                        stamp = expiry_stamp(expired, now, server_now) or expired.hold.expires_at or now
                        self._audit_row(conn, AuditEvent(stamp, "expire", location.scope, expired.fence.describe()
                                                         if expired.fence else None, actor, expired.hold.reason,
                                                         expired.hold.expires_at, scoped_detail(expired.hold)))
                self._audit_row(conn, AuditEvent(now, arming.event, location.scope, hold.generation, actor, hold.reason,
                                                 hold.expires_at, scoped_detail(hold)))
        except psycopg.Error as exc:
            if conn.broken:
                raise
            self.note_audit_failure(f"cannot append to the audit table {self.schema}.audit: {one_line(exc)}")
            logger.warning("%s", self.last_audit_failure)

    def _rewrite(self, conn: psycopg.Connection, location: Location, sentinel: Sentinel, now: datetime) -> None:
        """The row of `location` holding `sentinel`: deleted when nothing stands any more."""
        body = encode_sentinel(sentinel, now)
        if body is None:
            conn.execute(f"DELETE FROM {self.backend.s}.holds WHERE scope = %s", [location.key])
        else:
            conn.execute(f"UPDATE {self.backend.s}.holds SET body = %s WHERE scope = %s", [body, location.key])

    @staticmethod
    def _server_now(conn: psycopg.Connection) -> datetime:
        """The database's clock, the one every host of the fleet agrees on: what an expiry is
        retired by (docs/design.md, "Which clock decides an expiry")."""
        row = conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        value: datetime = row[0]
        return value

    def _refused_expiry(self, location: Location, expired: Reading) -> None:
        """One line per hold whose retire the server's clock refused (the caller's clock runs ahead)."""
        key = (location.key, expired.fence or Fence())
        if not self._refusals.first(key):
            return
        hold = expired.hold
        logger.warning("not retiring the hold at %s (generation %s): its deadman %s has not passed by the "
                       "database's clock; retried when it has", location.describe(),
                       expired.fence.describe() if expired.fence else "?",
                       format_instant(hold.expires_at) if hold is not None else "?")

    def _removal(self, location: Location, what: str, decide: Callable[[Reading], Reading | None], now: datetime,
                 actor: str, event: str, generation: Callable[[Reading], str | None], judge: Judge | None = None,
                 why: str | None = None) -> Reading | None:
        """One fenced removal from the row of `location`: `decide` picks, under the locks, the
        hold to remove from what stands (None: nothing is removed); the row is rewritten without
        it and the removal audited as `event` in the same transaction."""
        backend = self.backend

        def work(conn: psycopg.Connection) -> Reading | None:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LOCK_CLASS, f"{self.schema}/{location.key}"])
            standing = self._standing(conn, location, now, lock=True)
            removed = decide(standing)
            if removed is None:
                return None
            stamp = now
            if event == "expire":
                confirmed = expiry_stamp(removed, now, self._server_now(conn))
                if confirmed is None:
                    self._refused_expiry(location, removed)
                    return None
                stamp = confirmed
            left = without(standing, removed)
            if judge is not None:
                judge(standing, left, self._server_now(conn))
            self.step("retire:before-unlink")  # the file store's name: removed, not yet committed
            self._rewrite(conn, location, left, now)
            hold = removed.hold
            detail = "; ".join(filter(None, (scoped_detail(hold), why))) or None
            self._audit_row(conn, AuditEvent(stamp, event, location.scope, generation(removed), actor,
                                             hold.reason if hold else None, hold.expires_at if hold else None,
                                             detail))
            return removed

        removed = backend.run(work, what=what)
        if removed is not None:
            backend.listener.sync(SYNC_TIMEOUT)
        return removed

    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire",
               judge: Judge | None = None, detail: str | None = None) -> bool:
        if fence.generation is None and (fence.file_id is None or len(fence.file_id) != 1):
            return False

        def decide(standing: Reading) -> Reading | None:
            return next((r for r in (standing, *standing.scoped) if fence_matches(r, fence)), None)

        removed = self._removal(location, f"retire a hold at {location.describe()}", decide, now, actor, event,
                                lambda _removed: fence.describe(), judge, detail)
        return removed is not None

    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Judge | None = None) -> Reading | None:
        """A plain release lifts the full hold and leaves the scoped holds standing; with
        `generation`, the full or scoped hold carrying it (`HoldConflict` when none does)."""

        def decide(standing: Reading) -> Reading | None:
            removed = released_reading(standing, generation)
            if removed is None and generation is not None:
                raise not_current(location, generation, None if standing.state is HoldState.ABSENT else standing)
            return removed

        return self._removal(location, f"release {location.describe()}", decide, now, actor, "release",
                             lambda removed: removed.fence.describe() if removed.fence else None, judge)

    # -- audit -------------------------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        self.backend.run(lambda conn: self._audit_row(conn, event), what="append to the audit trail")

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        return read_events(self.backend, limit)

    def history_counted(self, limit: int | None = None, since: datetime | None = None) -> tuple[list[AuditEvent], int]:
        return read_events(self.backend, limit, since), 0

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        return read_after(self.backend, self.schema, position, limit)

    def audit_head(self) -> int:
        return read_head(self.backend)

    # -- the rest ----------------------------------------------------------------------------

    def init_schema(self) -> tuple[int, list[int]]:
        """`hermes store init`: create or upgrade the schema; (version, versions applied)."""
        return create_schema(self.url)

    def scopes(self, root: Path) -> list[str]:
        """The profile homes under `root` and every profile scope with a row (a profile served
        on another host has a row here and no home on this one). Rows as the listener last saw
        them: never a round trip."""
        names = set(profile_names(root))
        try:
            rows = self.backend.listener.view()[0]
        except Exception:
            rows = {}
        for key in rows:
            try:
                names.add(validate_profile_name(key))
            except InvalidArgument:
                continue  # the fleet's row, or a stand-alone home's
        return sorted(names)

    def open_state(self, service: str, root: Path | None = None) -> StateTable:
        """A `<service>_cursors` table of this store's schema, shared by every host."""
        return PgStateTable(lambda: self.backend, self.schema, service)

    def open_consumers(self, root: Path | None = None) -> ConsumerTable:
        """The `consumers` table of this store's schema: every consumer of the fleet, on any host."""
        return PgConsumerTable(lambda: self.backend, self.schema)

    def open_ledger(self, root: Path | None = None) -> RecordTable:
        """The `occurrences` table of this store's schema: one ledger for every scheduler of
        the fleet, on any host."""
        return PgRecordTable(lambda: self.backend, self.url.display, self.schema, OCCURRENCES)

    def schema_info(self) -> dict[str, Any]:
        return {"backend": self.name, "url": self.url.display, "schema": self.schema}

    def describe(self) -> dict[str, Any]:
        """What `hermes store status` prints (`pg_admin.store_status`). Takes round trips:
        never on the hot path."""
        return store_status(self.backend, self.root)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        backend = self._backend
        if backend.pid == os.getpid():
            release(backend, self.share)
