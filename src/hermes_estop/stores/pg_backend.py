"""What one process shares per PostgreSQL store URL: the listener (rows in memory, the
database's clock), the writer connection and the leader campaigns.

An `Estop()` per request must not open a connection each, so stores of one URL share one
`Backend` (`acquire` / `release` count references). A forked child never touches its parent's
connections: after a fork their sockets are pointed at /dev/null and the child opens its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from hermes_estop.model.errors import StoreError, StoreUnavailable
from hermes_estop.model.text import one_line
from hermes_estop.stores.pg_cache import Listener, close_quietly
from hermes_estop.stores.pg_clock import DbClock
from hermes_estop.stores.pg_leader import Leadership
from hermes_estop.stores.pg_schema import ensure_schema, quoted
from hermes_estop.stores.pg_url import StoreURL, connect_error
from hermes_estop.system.fsutil import LOCK_TIMEOUT

__all__ = ["Backend", "acquire", "release"]

T = TypeVar("T")

logger = logging.getLogger("hermes_estop")

# Detect a dead peer on a silent network within seconds, not the kernel's default two hours.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}


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
            raise connect_error(self.url, exc) from None
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
                        raise connect_error(self.url, exc) from None
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
                with contextlib.suppress(OSError):
                    os.dup2(null, fd)
        finally:
            os.close(null)
        self.listener.fds.clear()
        self.writer_fds.clear()


_live: weakref.WeakSet[Backend] = weakref.WeakSet()
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
