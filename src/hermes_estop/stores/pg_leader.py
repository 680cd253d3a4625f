"""Leader election among the processes of a fleet: a PostgreSQL session-level advisory lock held
on a dedicated connection.

Whoever holds the lock is the leader; the database releases it the moment the holder's session
ends, which is immediately when the process dies (even by SIGKILL: the kernel closes its socket)
and, for a host that vanishes silently, after the server-side TCP keepalive/user timeout set on
the session (`DEAD_PEER_SECONDS`). A standby tries to take the lock every `poll` seconds, so it
takes over within `poll` of the lock being released.

While it leads, the process sends a heartbeat every `poll / 2` seconds, and `is_leader()` is
True only while the session answered within the last `poll` seconds. A leader cut off from the
database therefore stops acting (within `poll`) before the server hands the lock on to a
standby (after `DEAD_PEER_SECONDS`). When the server ends the session itself (a restart,
`pg_terminate_backend`) it frees the lock at once, and for up to `poll / 2` two processes may
both believe they lead: the election keeps the work on one host, it is not what keeps an
occurrence from being armed twice. That is the store's fencing: a window arms only over no hold
or its own generations (`only_if`), and a hold whose body names the occurrence is adopted, not
armed again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from hermes_estop.model.text import one_line
from hermes_estop.stores.pg_cache import close_quietly
from hermes_estop.stores.pg_schema import LOCK_CLASS

__all__ = ["Leadership", "DEFAULT_POLL", "DEAD_PEER_SECONDS"]

logger = logging.getLogger("hermes_estop")

#: seconds between a standby's attempts to take the lock (a leader's heartbeats: half that)
DEFAULT_POLL = 1.0
#: the server releases the lock of a silently vanished host after about this long
DEAD_PEER_SECONDS = 5


class Leadership:
    """One role's election (`role`, e.g. "windows") in one schema. `connect(name)` opens an
    autocommit psycopg connection. Start with `start()`; `is_leader()` never blocks."""

    def __init__(self, connect: Callable[[str], Any], schema: str, role: str, *, poll: float = DEFAULT_POLL,
                 connect_timeout: float = 5.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._connect = connect
        self._monotonic = monotonic
        self.key = f"{schema}/#leader/{role}"
        self.role = role
        self.poll = float(poll)
        self.connect_timeout = float(connect_timeout)
        self.fds: set[int] = set()
        self.backend_pid: int | None = None
        self.last_error: str | None = None
        self._held = False
        self._confirmed = 0.0
        self._stop = threading.Event()
        self._attempted = threading.Event()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> Leadership:
        """Start campaigning; waits for the first attempt (so a lone instance leads at once)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"hermes-estop leader {self.role}", daemon=True)
                self._thread.start()
        self._attempted.wait(self.connect_timeout + 1.0)
        return self

    def is_leader(self) -> bool:
        """True while this process holds the lock and its session answered within `poll`."""
        return self._held and self._monotonic() - self._confirmed <= self.poll

    def wait(self, leader: bool, timeout: float) -> bool:
        """Block until `is_leader()` is `leader` (or `timeout` seconds); returns whether it is."""
        deadline = self._monotonic() + timeout
        with self._changed:
            while self.is_leader() != leader:
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(min(remaining, self.poll))
        return self.is_leader() == leader

    def stop(self) -> None:
        """Step down: stop campaigning and end the session (the lock is released with it)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.connect_timeout + 2 * self.poll + 1.0)

    def _set(self, held: bool) -> None:
        if held != self._held:
            logger.info("hermes-estop: %s %s leadership (%s)", "took" if held else "lost", self.role, self.key)
        with self._changed:
            self._held = held
            if held:
                self._confirmed = self._monotonic()
            self._changed.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._connect("leader")
                self.fds.add(conn.fileno())
                for name, value in (("tcp_keepalives_idle", "2"), ("tcp_keepalives_interval", "1"),
                                    ("tcp_keepalives_count", "3"), ("tcp_user_timeout", f"{DEAD_PEER_SECONDS * 1000}")):
                    try:
                        conn.execute("SELECT set_config(%s, %s, false)", [name, value])
                    except psycopg.Error:
                        if conn.broken:
                            raise  # an older server without the setting is fine; a dead session is not
                self.backend_pid = conn.info.backend_pid
                self.last_error = None
                while not self._stop.is_set():
                    if self._held:
                        conn.execute("SELECT 1")
                        self._set(True)
                    else:
                        row = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", [LOCK_CLASS, self.key]).fetchone()
                        self._set(bool(row[0]))
                    self._attempted.set()
                    self._stop.wait(self.poll / 2 if self._held else self.poll)
                if self._held:
                    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [LOCK_CLASS, self.key])
            except (psycopg.Error, OSError) as exc:  # a lost session is a lost lock; campaign again
                self.last_error = one_line(exc)
            except Exception as exc:  # a bug: never lead silently-never; say so, step down, retry
                logger.exception("hermes-estop: %s leadership campaign failed unexpectedly", self.role)
                self.last_error = one_line(exc)
            finally:
                self._set(False)
                self._attempted.set()
                self.backend_pid = None
                if conn is not None:
                    close_quietly(conn, self.fds)
            self._stop.wait(self.poll)
