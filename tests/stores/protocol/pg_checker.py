"""The hold protocol's systematic check on the PostgreSQL store (issue 22): the real
`PostgresStore` code against the real test server, one thread per actor, each with its own store
(its own writer connection, as another process has). Every statement of a write transaction and
its commit is a scheduling point (the writer connection is wrapped); a statement that waits in the
server for a lock another actor holds ends its step (seen in `pg_stat_activity`), and the actor is
enabled again once it got the lock. A crash kills an actor parked before a statement or its commit:
its transaction is rolled back, as the server does when a process dies.

Checked after every step, on what is committed (read on an admin connection):
1. a reader (its own store and listener; a read is one step: `sync()`, then `read()`) never
   answers free while a hold whose deadman had not passed for that reader is committed;
2. a fenced retire's commit never removes a generation other than the one it names (a window's
   retire at its end never removes an operator's re-arm);
3. the scope's row is never absent unless a remover committed;
4. the committed generation is in the committed audit trail;
5. no actor that died holds a lock, and not every live actor waits in the server.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from checker import FENCED, REMOVERS, T0, ActorKilled, ActorSpec, Choice, Ctx, Result, Step, Violation, explore_runs

from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import EngageRequest, parse_body
from hermes_estop.model.homes import Layout, Location
from hermes_estop.stores.postgresql import PostgresStore

_scopes = itertools.count()


class _Scheduled:
    """The writer connection as an actor's transaction sees it: each `execute` is a point."""

    def __init__(self, conn: psycopg.Connection, point: Callable[[str], None]) -> None:
        self._conn = conn
        self._point = point

    def execute(self, query: Any, params: Any = None) -> Any:
        self._point("sql " + " ".join(str(query).split())[:60])
        return self._conn.execute(query, params)

    def transaction(self) -> Any:
        return self._conn.transaction()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class PgActor:
    def __init__(self, index: int, spec: ActorSpec, store: PostgresStore) -> None:
        self.index = index
        self.spec = spec
        self.name = spec.name
        self.store = store
        self.go = threading.Semaphore(0)
        self.arrived = threading.Event()
        self.pending: str | None = "start"
        self.done = False
        self.killed = False
        self.waiting = False  # its statement waits in the server for a lock
        self.error: BaseException | None = None
        self.fence: str | None = None
        self.pid: int | None = None
        self.acknowledged: list[str] = []
        self.execution: PgExecution | None = None

    def acknowledge(self, generation: str | None) -> None:
        if generation is not None:
            self.acknowledged.append(generation)

    def read(self, store: PostgresStore, location: Location, now: datetime) -> Any:
        """A consumer's check through its own listener: one step (invariant 1)."""
        execution = self.execution
        assert execution is not None
        execution.point("read (sync, then read)")
        live = execution.live_hold(now)
        store.sync()
        (reading,) = store.read((location,), now)
        if live is not None and not reading.active:
            execution.fail(1, f"{self.name} read {reading.state.value} at {now.isoformat()} while generation {live}, "
                              "live for it, was committed")
        return reading


class PgExecution:
    """One run of `specs` over fresh rows (a scope of its own) under one schedule."""

    def __init__(self, specs: Sequence[ActorSpec], stores: Sequence[PostgresStore], setup: PostgresStore,
                 admin: psycopg.Connection, layout: Layout, prefix: Sequence[Choice], initial: bool,
                 crashes: int = 1) -> None:
        self.prefix = list(prefix)
        self.admin = admin
        self.setup = setup
        self.crash_budget = crashes
        self.location = layout.location(f"pc{next(_scopes)}")
        self.schema = setup.schema
        self.initial_hold = initial
        self.actors = [PgActor(i, spec, store) for i, (spec, store) in enumerate(zip(specs, stores, strict=False))]
        for actor in self.actors:
            actor.execution = self
        self.trace: list[Step] = []
        self.violation: Violation | None = None
        self.local = threading.local()
        self.committed: str | None = None
        self.initial: str | None = None

    # -- hooks ---------------------------------------------------------------------------------

    def point(self, description: str) -> None:
        actor: PgActor | None = getattr(self.local, "actor", None)
        if actor is None:
            return
        if actor.killed:
            raise ActorKilled()
        actor.pending = description
        actor.arrived.set()
        actor.go.acquire()
        if actor.killed:
            raise ActorKilled()

    def fail(self, invariant: int, message: str) -> None:
        if self.violation is None:
            self.violation = Violation(invariant, message)

    def _wrap(self, actor: PgActor) -> None:
        backend = actor.store.backend
        real = type(backend).run.__get__(backend)

        def run(work: Callable[[psycopg.Connection], Any], *, what: str) -> Any:
            def scheduled(conn: psycopg.Connection) -> Any:
                actor.pid = conn.info.backend_pid
                result = work(_Scheduled(conn, self.point))  # type: ignore[arg-type]
                self.point("commit")
                return result

            return real(scheduled, what=what)

        backend.run = run  # type: ignore[method-assign]

    # -- the committed state -------------------------------------------------------------------

    def _committed(self) -> tuple[str | None, set[str]]:
        row = self.admin.execute(f'SELECT body FROM "{self.schema}".holds WHERE scope = %s',
                                 [self.location.key]).fetchone()
        generation = parse_body(row[0]).generation if row else None
        audited = {g for (g,) in self.admin.execute(
            f"""SELECT generation FROM "{self.schema}".audit WHERE location = %s AND event IN ('engage', 'rearm')""",
            [self.location.scope]).fetchall()}
        return generation, audited

    def live_hold(self, now: datetime) -> str | None:
        """The committed generation when it holds at `now` (its deadman not passed), else None."""
        row = self.admin.execute(f'SELECT body FROM "{self.schema}".holds WHERE scope = %s',
                                 [self.location.key]).fetchone()
        if row is None:
            return None
        hold = parse_body(row[0])
        live = hold.expires_at is None or now < hold.expires_at
        return (hold.generation or "?") if live else None

    def check_state(self, committer: PgActor | None) -> None:
        generation, audited = self._committed()
        if generation is not None and generation not in audited:
            self.fail(4, f"generation {generation} is committed but not in the committed audit trail")
        if generation is None and self.committed is not None:
            if committer is None or committer.spec.work not in REMOVERS:
                self.fail(3, f"the row of generation {self.committed} vanished without a removal")
            elif committer.spec.work in FENCED and committer.fence != self.committed:
                self.fail(2, f"{committer.name}'s retire fenced on {committer.fence} removed generation {self.committed}")
        self.committed = generation
        for actor in self.actors:
            if actor.killed and actor.pid is not None:
                held = self.admin.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND granted AND locktype <> "
                                          "'virtualxid' AND locktype <> 'transactionid'", [actor.pid]).fetchone()
                if held and held[0]:
                    self.fail(5, f"{actor.name} died but its backend still holds {held[0]} lock(s)")

    def _blocked(self, actor: PgActor) -> bool:
        """Waiting in the server for a lock that an open transaction holds (a lock just handed
        on shows as a wait for a moment, with nobody blocking: not blocked)."""
        if actor.pid is None:
            return False
        row = self.admin.execute("SELECT wait_event_type, cardinality(pg_blocking_pids(pid)) FROM pg_stat_activity "
                                 "WHERE pid = %s", [actor.pid]).fetchone()
        return bool(row) and row[0] == "Lock" and row[1] > 0

    def _settle(self, actor: PgActor) -> None:
        """Until `actor` is parked at its next point, finished, or waiting in the server."""
        deadline = time.monotonic() + 30
        while not actor.arrived.wait(0.002):
            if self._blocked(actor):
                actor.waiting = True
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{actor.name} neither returned nor waits for a lock ({actor.pending})")
        actor.waiting = False

    # -- running -------------------------------------------------------------------------------

    def _body(self, actor: PgActor) -> None:
        self.local.actor = actor
        try:
            actor.go.acquire()
            if actor.killed:
                raise ActorKilled()
            if actor.spec.work in FENCED:
                actor.fence = self.initial
            actor.spec.work(Ctx(actor.store, self.location, T0 + actor.spec.offset, self.initial, actor))  # type: ignore[arg-type]
        except ActorKilled:
            pass
        except BaseException as exc:
            actor.error = exc
        finally:
            actor.done = True
            actor.pending = None
            actor.arrived.set()

    def enabled(self, actor: PgActor) -> bool:
        return not actor.done and (not actor.waiting or actor.arrived.is_set())

    def run(self) -> PgExecution:
        if self.initial_hold:
            hold = self.setup.engage(self.location, EngageRequest(reason="initial", expires_at=T0 + timedelta(minutes=10)),
                                     T0, "setup")
            self.initial = hold.generation
        self.committed = self.initial
        for actor in self.actors:
            self._wrap(actor)
        threads = [threading.Thread(target=self._body, args=(a,), daemon=True) for a in self.actors]
        for thread in threads:
            thread.start()
        try:
            self._schedule()
        finally:
            for actor in self.actors:
                if not actor.done:
                    actor.killed = True
                    actor.go.release()
            for thread in threads:
                thread.join(30)
            for actor in self.actors:
                del actor.store.backend.run  # type: ignore[attr-defined]
        if self.violation is None:
            for actor in self.actors:
                if actor.error is not None and not isinstance(actor.error, EstopError):
                    self.fail(0, f"{actor.name} raised {type(actor.error).__name__}: {actor.error}")
        if self.violation is not None:
            self.violation.schedule = self.trace
        return self

    def _schedule(self) -> None:
        last: PgActor | None = None
        for actor in self.actors:
            actor.arrived.set()  # parked at "start"
        while self.violation is None:
            alive = [a for a in self.actors if not a.done]
            if not alive:
                return
            enabled = [a for a in alive if self.enabled(a)]
            if not enabled:
                self.fail(5, "every live actor waits in the server for a lock: "
                             + ", ".join(f"{a.name} ({a.pending})" for a in alive))
                return
            choices: list[Choice] = [("run", a.index) for a in enabled]
            if self.crash_budget > 0:
                choices += [("kill", a.index) for a in enabled]
            default: Choice = ("run", last.index) if last is not None and self.enabled(last) else ("run", enabled[0].index)
            depth = len(self.trace)
            taken = self.prefix[depth] if depth < len(self.prefix) else default
            if taken not in choices:
                raise AssertionError(f"replay diverged at step {depth + 1}: {taken} not among {choices}")
            cost = 1 if taken[0] == "kill" or (taken != default and last is not None and self.enabled(last)) else 0
            actor = self.actors[taken[1]]
            what = f"{taken[0]} {actor.name}: {actor.pending}"
            committing = actor.pending == "commit"
            if taken[0] == "kill":
                self.crash_budget -= 1
                actor.killed = True
                committing = False
            actor.arrived.clear()
            actor.waiting = False
            actor.go.release()
            self._settle(actor)
            for other in self.actors:  # a commit may have handed a lock on: let its waiter reach its next point
                if other is not actor and other.waiting and not other.arrived.is_set():
                    self._settle(other)
            if actor.waiting:
                what += " (waits for a lock)"
            self.trace.append(Step(choices, taken, default, cost, what))
            if taken[0] == "run":
                last = actor
            self.check_state(actor if committing else None)


def explore_pg(name: str, specs: Sequence[ActorSpec], stores: Sequence[PostgresStore], setup: PostgresStore,
               admin: psycopg.Connection, root: Path, bound: int, initial: bool = True) -> Result:
    layout = Layout(home=root, root=root)
    return explore_runs(name, lambda prefix: PgExecution(specs, stores, setup, admin, layout, prefix, initial).run(),
                        bound)
