"""Issue 22 on the PostgreSQL store: every interleaving of two writers' statements and commits,
with a kill before any of them, checked on what is committed (`pg_checker`); and the checker
catching an audit written in a transaction of its own and a retire that ignores its fence."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from checker import ActorSpec, fenced_retire, plain_read, rearm, release, window
from pg_checker import explore_pg

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.hold import EngageRequest, Fence, Hold, Reading
from hermes_estop.model.homes import Location
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql

PAIRS = {
    "re-arm | re-arm": [ActorSpec("a", rearm), ActorSpec("b", rearm)],
    "re-arm | fenced retire": [ActorSpec("operator", rearm), ActorSpec("retirer", fenced_retire)],
    "re-arm | release": [ActorSpec("operator", rearm), ActorSpec("releaser", release)],
    "re-arm | read": [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)],
    "release | read": [ActorSpec("releaser", release), ActorSpec("reader", plain_read)],
    "window arm+retire | re-arm": [ActorSpec("window", window), ActorSpec("operator", rearm)],
}
#: the scenarios that start without a hold (a window arms over a free scope)
WITHOUT_A_HOLD = {"window arm+retire | re-arm"}


class AuditAfterCommit(PostgresStore):
    """The hold committed first, its audit row in a transaction of its own after."""

    def _audit_row(self, conn: psycopg.Connection, event: AuditEvent) -> None:
        if event.event in ("engage", "rearm") and event.actor != "setup":
            self._late.append(event)
            return
        super()._audit_row(conn, event)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._late: list[AuditEvent] = []
        real_engage = self.engage

        def engage(location: Location, request: EngageRequest, now: datetime, actor: str, judge: Any = None) -> Hold:
            hold = real_engage(location, request, now, actor, judge)
            for event in self._late:
                self.append_audit(event)
            self._late.clear()
            return hold

        self.engage = engage  # type: ignore[method-assign]


class RetireIgnoringItsFence(PostgresStore):
    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire",
               judge: Any = None, detail: str | None = None) -> bool:
        return self.release(location, None, now, actor) is not None


class ReadByAClockAhead(PostgresStore):
    """A read that judges deadlines by a clock three hours ahead of the reader's (issue 32 item 8's
    defect, in the store): it answers free while a two-hour re-arm is live."""

    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        return super().read(locations, now + timedelta(hours=3))


@pytest.fixture
def stores(pg_url, fleet_root):  # noqa: F811
    made: list[PostgresStore] = []

    def make(kind: type[PostgresStore] = PostgresStore) -> PostgresStore:
        store = kind(pg_url, root=fleet_root, share=False)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def run(name, specs, make, kind, pg_server, fleet_root, bound=2):  # noqa: F811
    with pg_server.admin() as admin:
        admin.autocommit = True
        return explore_pg(name, specs, [make(kind) for _ in specs], make(), admin, fleet_root, bound,
                          initial=name not in WITHOUT_A_HOLD)


@pytest.mark.parametrize("name", list(PAIRS))
def test_the_postgresql_protocol_keeps_every_invariant_in_every_interleaving(name, stores, pg_server, fleet_root,  # noqa: F811
                                                                              capsys):
    result = run(name, PAIRS[name], stores, PostgresStore, pg_server, fleet_root)
    with capsys.disabled():
        print(f"\n  postgresql {result.summary()}")
    assert result.violation is None, result.violation.describe()
    assert result.executions > 10 and result.crashed > 0


@pytest.mark.parametrize(("kind", "name", "invariant"), [
    (AuditAfterCommit, "re-arm | re-arm", 4),
    (RetireIgnoringItsFence, "re-arm | fenced retire", 2),
    (RetireIgnoringItsFence, "window arm+retire | re-arm", 2),
    (ReadByAClockAhead, "re-arm | read", 1),
], ids=["audit-after-commit", "retire-ignoring-its-fence", "window-retire-ignoring-its-fence", "read-by-a-clock-ahead"])
def test_a_mutation_of_the_postgresql_protocol_is_caught(kind, name, invariant, stores, pg_server, fleet_root):  # noqa: F811
    result = run(name, PAIRS[name], stores, kind, pg_server, fleet_root)
    assert result.violation is not None, result.summary()
    assert result.violation.invariant == invariant, result.violation.describe()
