"""What one process shares per PostgreSQL store URL: the listener (rows in memory, the
database's clock), the writer connection, the leader campaigns, and the expirer thread.

An `Estop()` per request must not open a connection each, so stores of one URL share one
`Backend` (`acquire` / `release` count references). A forked child never touches its parent's
connections: after a fork their sockets are pointed at /dev/null and the child opens its own.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any, Callable, TypeVar

import psycopg

from ..errors import EstopError, StoreError, StoreUnavailable
from ..fsutil import LOCK_TIMEOUT
from ..hold import Fence
from ..text import one_line
from .pg_cache import Listener, close_quietly
from .pg_clock import DbClock
from .pg_leader import Leadership
from .pg_schema import ensure_schema, quoted
from .pg_url import StoreURL

__all__ = ["Backend", "acquire", "release"]

T = TypeVar("T")

logger = logging.getLogger("hermes_estop")

# Detect a dead peer on a silent network within seconds, not the kernel's default two hours.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


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


class Backend:
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
                               **_KEEPALIVES)  # type: ignore[arg-type]  # libpq keywords ride in **kwargs
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
            raise StoreUnavailable(f"cannot reach the PostgreSQL store {self.url.display}: {one_line(exc)}") from None
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
                        raise StoreError(f"PostgreSQL store could not {what}: {one_line(exc)}") from None
                    self._drop_writer()
                    if committing:
                        raise StoreUnavailable(
                            f"PostgreSQL store connection lost while committing ({what}); the outcome is unknown, "
                            f"see `hermes status`: {one_line(exc)}"
                        ) from None
                    if attempt == 2:
                        raise StoreUnavailable(f"cannot reach the PostgreSQL store {self.url.display}: {one_line(exc)}") from None
            raise AssertionError("unreachable")
        finally:
            self._writer_lock.release()

    def leadership(self, role: str, poll: float) -> Leadership:
        with _shared_lock:
            leadership = self.leaderships.get((role, poll))
            if leadership is None:
                leadership = self.leaderships[(role, poll)] = Leadership(
                    self.connect, self.schema, role, poll=poll, connect_timeout=self.url.connect_timeout,
                    monotonic=self.clock.monotonic)
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


_live: "weakref.WeakSet[Backend]" = weakref.WeakSet()
_shared: dict[tuple[Any, ...], Backend] = {}
_shared_lock = threading.Lock()
_inherited: list[Backend] = []


def _after_fork_in_child() -> None:
    global _shared_lock
    for backend in list(_live):
        backend.forget_after_fork()
        _inherited.append(backend)  # never collected: its objects must not finish the parent's sessions
    _shared.clear()
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def acquire(url: StoreURL, refresh: float, share: bool) -> Backend:
    if not share:
        backend = Backend(url, refresh)
        backend.refs = 1
        return backend
    key = (url.conninfo, url.schema, url.grace, refresh)
    with _shared_lock:
        found = _shared.get(key)
        if found is None or found.pid != os.getpid():
            found = _shared[key] = Backend(url, refresh)
        found.refs += 1
        return found


def release(backend: Backend, shared: bool) -> None:
    with _shared_lock:
        backend.refs -= 1
        if backend.refs > 0:
            return
        if shared:
            for key, value in list(_shared.items()):
                if value is backend:
                    del _shared[key]
    backend.close()
