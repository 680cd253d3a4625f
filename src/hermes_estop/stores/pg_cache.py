"""The PostgreSQL store's hot path: every process keeps the holds rows in memory, so a consumer's
check costs no round trip.

One background thread per process (per store URL) owns a dedicated connection that LISTENs on
the holds channel. The trigger on `holds` notifies from the very transaction that changed a row,
with the changed row in the notification when it fits (`pg_notice`). A notification that only
ARMS a scope (creates the row of a scope the thread has none of, in a transaction its last
re-read did not see) is applied as it stands, without a query; on any other notification, on
every (re)connect and every `refresh` seconds the thread re-reads the whole table (a handful of
rows). Either way it installs the rows as an immutable mapping that `view()` hands out without a
lock, so a hold is only ever weakened or lifted by a row the thread read itself. Between
notifications it sends a heartbeat every `heartbeat` seconds, which also re-measures the
database's clock.

Fail safe: the rows are trusted only while the last successful contact with the database (a
read, a heartbeat, a notification) is at most `grace` seconds old. Past that, `view()` reports a
problem and the store reads every location as UNREADABLE: the fleet is held and nobody is
admitted, until the thread reconnects and has re-read everything, which it keeps trying on its
own (backoff up to 1 s). The grace is measured on this process's monotonic clock, so a frozen
listener thread or a suspended process fails safe too.

Expiry needs no timer here: a hold's state is computed from `now` at every read, so a cached
hold is never "active" past its `expires_at`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from hermes_estop.model.hold import Sentinel, parse_sentinel
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.stores.pg_clock import CLOCK_REFRESH, DbClock
from hermes_estop.stores.pg_notice import TxSnapshot, apply_arming, parse_snapshot
from hermes_estop.stores.pg_schema import channel_name, quoted

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_REFRESH",
    "PASSWORD_HINT",
    "ScopeRow",
    "authentication_failed",
    "Listener",
    "parse_row",
    "close_quietly",
]

logger = logging.getLogger("hermes_estop")

#: seconds the last known state is trusted without contact with the database
DEFAULT_GRACE = 5.0
#: seconds between full re-reads when no notification arrives (belt and braces)
DEFAULT_REFRESH = 30.0
_MAX_BACKOFF = 1.0
#: a body with a full and a scoped hold, parsed once when the thread starts (`_warm_up`)
_WARM_BODY = (b'\xef\xbb\xbf{"full_hold": {"generation": "warm", "engaged_at": "2000-01-01T00:00:00Z", '
              b'"reason": "warm", "expires_at": "2000-01-01T01:00:00Z", "allow": {"user_ids": ["a"], "profiles": []}}, '
              b'"scoped_holds": [{"id": "warm", "generation": "warm2", "engaged_at": "2000-01-01T00:00:00Z", '
              b'"selector": {"components": ["cron"], "jobs": []}}]}')


@dataclass(frozen=True)
class ScopeRow:
    """One scope's row as last read: the raw body, its revision, and the body parsed once
    (`parse_sentinel`'s Sentinel, or the reason it is unreadable)."""

    body: bytes
    revision: int
    parsed: Sentinel | str


def close_quietly(conn: psycopg.Connection, fds: set[int]) -> None:
    """Close a connection that may already be dead, forgetting its socket in `fds` (the
    sockets a forked child must neutralize)."""
    with contextlib.suppress(Exception):
        fds.discard(conn.fileno())
    with contextlib.suppress(Exception):
        conn.close()


def parse_row(body: bytes, revision: int) -> ScopeRow:
    try:
        parsed: Sentinel | str = parse_sentinel(bytes(body))
    except ValueError as exc:
        parsed = str(exc)
    return ScopeRow(bytes(body), int(revision), parsed)


#: where libpq takes a password from, for the line that says an authentication failed
PASSWORD_HINT = ("give the password in the store URL (postgresql://USER:PASSWORD@HOST/DB), in a password file "
                 "(PGPASSFILE, default ~/.pgpass) or in PGPASSWORD")


def authentication_failed(exc: BaseException) -> bool:
    """Whether a connection failed because the server refused the role's password (or none
    was given): the server answered, so it is a refusal, never an outage."""
    if getattr(exc, "sqlstate", None) == "28P01":
        return True
    text = str(exc).lower()
    return "password authentication failed" in text or "no password supplied" in text


class Listener:
    """The background thread feeding the in-memory rows. `connect(role)` opens an autocommit
    psycopg connection (schema ensured). Thread-safe; `view()` never blocks."""

    def __init__(
        self,
        connect: Callable[[str], Any],
        schema: str,
        clock: DbClock,
        *,
        grace: float = DEFAULT_GRACE,
        refresh: float = DEFAULT_REFRESH,
        heartbeat: float | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self._connect = connect
        self.schema = schema
        self.clock = clock
        self._monotonic = clock.monotonic
        self.grace = float(grace)
        self.refresh = float(refresh)
        self.heartbeat = float(heartbeat) if heartbeat is not None else min(1.0, self.grace / 4)
        self.connect_timeout = float(connect_timeout)
        #: test seam: called in the listener thread with "listener:connect" before each attempt
        self.interleave: Callable[[str], None] | None = None
        self.rows: Mapping[str, ScopeRow] = {}
        self.version = 0
        #: full re-reads of the table so far (a hold a notification armed costs none)
        self.full_reads = 0
        self._snapshot: TxSnapshot | None = None  # the last full re-read's, on this connection
        self.synced = False
        self.connected = False
        self.backend_pid: int | None = None
        self.last_contact: float | None = None
        self.last_error: str | None = None
        #: the last connection failed because the server refused the role's password (not an outage)
        self.refused = False
        self.fds: set[int] = set()
        self._select_sql = (
            f"SELECT clock_timestamp(), txid_current_snapshot()::text, h.scope, h.body, h.revision "
            f"FROM (SELECT 1) AS one LEFT JOIN {quoted(schema)}.holds AS h ON true"
        )
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._attempted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # -- the consumer side -------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start the thread once; the first call waits (up to the connect timeout) for the
        first connection attempt, so a fresh process reads real state, not 'unreachable'."""
        if self._thread is None:
            with self._start_lock:
                if self._thread is None and not self._stopping:
                    thread = threading.Thread(target=self._run, name=f"hermes-estop listener {self.schema}", daemon=True)
                    thread.start()
                    self._thread = thread
        if not self._attempted.is_set():
            self._attempted.wait(self.connect_timeout + 1.0)

    def view(self) -> tuple[Mapping[str, ScopeRow], str | None]:
        """(rows, None) while the rows are trustworthy, else (rows, why not)."""
        self.ensure_started()
        last = self.last_contact
        rows = self.rows
        if last is None or not self.synced:
            if self.refused:
                return rows, f"PostgreSQL store refused this role: {self.last_error}"
            return rows, f"PostgreSQL store unreachable: {self.last_error or 'not connected yet'}"
        if self._monotonic() - last > self.grace:
            since = format_instant(self.clock.at(last))
            cause = self.last_error or "no answer"
            return rows, f"PostgreSQL store unreachable since {since} ({cause}): held until it answers again"
        return rows, None

    def sync(self, timeout: float = 2.0) -> bool:
        """Wait until the rows reflect every commit that returned before this call (a full read
        has started after it). True when they do; False on timeout (the listener is down)."""
        self.ensure_started()
        with self._cond:
            self._requested += 1
            ticket = self._requested
        self._wake()
        deadline = self._monotonic() + timeout
        with self._cond:
            while self._served < ticket:
                remaining = deadline - self._monotonic()
                if remaining <= 0 or self._stopping:
                    return False
                self._cond.wait(remaining)
        return True

    def stop(self) -> None:
        self._stopping = True
        self._wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.connect_timeout + 2.0)
        with self._cond:
            self._cond.notify_all()
        if thread is None or not thread.is_alive():  # else leave the pipe: its numbers must not be reused under it
            wake_r, wake_w, self._wake_r, self._wake_w = self._wake_r, self._wake_w, -1, -1
            for fd in (wake_r, wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _wake(self) -> None:
        if self._wake_w < 0:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _drain_wake(self) -> None:
        if self._wake_r < 0:
            return
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    # -- the thread --------------------------------------------------------------------------

    def _warm_up(self) -> None:
        """Parse one body before the first notification can arrive. The first hold a process
        sees is the stop that matters, and parsing the first body costs ten times any later
        one (the UTF-8-with-BOM codec and the selector module are imported on first use):
        with a hundred hosts on two cores that is paid by every host at the same instant."""
        try:
            parse_row(_WARM_BODY, 0)
        except Exception:  # a bug in parsing shows at the first real body; never stop the thread here
            logger.debug("hermes-estop: the listener's warm-up parse failed", exc_info=True)

    def _run(self) -> None:
        self._warm_up()
        backoff = 0.05
        while not self._stopping:
            conn = None
            try:
                if self.interleave is not None:
                    self.interleave("listener:connect")
                conn = self._connect("listener")
                self.fds.add(conn.fileno())
                conn.execute(f'LISTEN "{channel_name(self.schema)}"')
                self.backend_pid = conn.info.backend_pid
                self._full_read(conn, measure=True)
                self._attempted.set()
                if self.last_error is not None:
                    logger.info("hermes-estop: PostgreSQL store listener reconnected (schema %s)", self.schema)
                self.connected = True
                self.refused = False
                self.last_error = None
                backoff = 0.05
                self._serve(conn)
            except (psycopg.Error, OSError) as exc:  # an outage: the loop reconnects
                self._disconnected(exc)
            except Exception as exc:  # a bug, not an outage: say so loudly, stay held, retry
                logger.exception("hermes-estop: PostgreSQL store listener failed unexpectedly; reads are held")
                self._disconnected(exc)
            finally:
                self._attempted.set()
                if conn is not None:
                    close_quietly(conn, self.fds)
            if self._stopping:
                break
            select.select([self._wake_r], [], [], backoff)
            self._drain_wake()
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def _disconnected(self, exc: BaseException) -> None:
        self.refused = authentication_failed(exc)
        message = f"authentication failed ({one_line(exc)}); {PASSWORD_HINT}" if self.refused else one_line(exc)
        if self.connected:
            logger.warning("hermes-estop: PostgreSQL store listener lost its connection (held after %gs): %s",
                           self.grace, message)
        elif self.last_error != message:
            logger.info("hermes-estop: PostgreSQL store listener cannot connect: %s", message)
        self.last_error = message
        self.connected = False
        self.backend_pid = None
        self._snapshot = None  # a notice is applied only over a re-read of the current session

    def _serve(self, conn: psycopg.Connection) -> None:
        sock = conn.fileno()
        now = self._monotonic()
        next_beat = now + self.heartbeat
        next_refresh = now + self.refresh
        next_clock = now + CLOCK_REFRESH
        while not self._stopping:
            timeout = max(0.0, min(next_beat, next_refresh) - self._monotonic())
            ready, _, _ = select.select([sock, self._wake_r], [], [], timeout)
            want = False
            if self._wake_r in ready:
                self._drain_wake()
                with self._cond:
                    want = self._requested > self._served
            if sock in ready and not self._apply(self._drain_notifies(conn)):
                want = True
            now = self._monotonic()
            if want or now >= next_refresh:
                self._full_read(conn, measure=now >= next_clock)
                self._catch_up(conn)
                now = self._monotonic()
                next_refresh = now + self.refresh
                next_beat = now + self.heartbeat
                if now >= next_clock:
                    next_clock = now + CLOCK_REFRESH
            elif now >= next_beat:
                self._beat(conn, measure=now >= next_clock)
                self._catch_up(conn)
                now = self._monotonic()
                next_beat = now + self.heartbeat
                if now >= next_clock:
                    next_clock = now + CLOCK_REFRESH

    def _drain_notifies(self, conn: psycopg.Connection) -> list[str]:
        """Consume what the server sent: the payloads of its notifications. Raises when the
        connection is gone, which is how a terminated backend or a restart is noticed."""
        payloads = [notify.payload for notify in conn.notifies(timeout=0)]
        if payloads:
            self.last_contact = self._monotonic()
        return payloads

    def _apply(self, payloads: list[str]) -> bool:
        """Install the holds `payloads` arm (`pg_notice.apply_arming`); False when one of them
        does anything else and the table must be re-read instead (nothing installed then)."""
        if not payloads:
            return True
        rows = apply_arming(self.rows, payloads, self._snapshot, parse_row)
        if rows is None:
            return False
        if rows is not self.rows:
            with self._cond:
                self.rows = rows
                self.version += 1
                self._cond.notify_all()
        return True

    def _catch_up(self, conn: psycopg.Connection) -> None:
        """Apply, or re-read for, what was notified while the last query ran."""
        while True:
            payloads = self._drain_notifies(conn)
            if not payloads:
                return
            if not self._apply(payloads):
                self._full_read(conn, measure=False)

    def _beat(self, conn: psycopg.Connection, measure: bool) -> None:
        sent = self._monotonic()
        row = conn.execute("SELECT clock_timestamp()").fetchone()
        received = self._monotonic()
        if measure and row is not None:  # `SELECT clock_timestamp()`: always one row
            self.clock.measure(row[0], sent, received)
        self.last_contact = received

    def _full_read(self, conn: psycopg.Connection, measure: bool) -> None:
        with self._cond:
            ticket = self._requested
        sent = self._monotonic()
        result = conn.execute(self._select_sql).fetchall()
        received = self._monotonic()
        self.full_reads += 1
        if measure or not self.clock.measured:
            self.clock.measure(result[0][0], sent, received)
        old = self.rows
        rows: dict[str, ScopeRow] = {}
        for _, _, scope, body, revision in result:
            if scope is None:
                continue
            previous = old.get(scope)
            if previous is not None and previous.revision == revision and previous.body == body:
                rows[scope] = previous
            else:
                rows[scope] = parse_row(body, revision)
        changed = rows != old
        snapshot = parse_snapshot(result[0][1])
        with self._cond:
            self._snapshot = snapshot
            if changed:
                self.rows = rows
                self.version += 1
            self.last_contact = received
            self.synced = True
            self._served = max(self._served, ticket)
            self._cond.notify_all()
