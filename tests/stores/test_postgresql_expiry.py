"""On PostgreSQL a read never waits on the database (issue 9 items 9 and 10) and never retires
(issue 32 item 8): an expired hold a check finds is left to the daemon's deadman, whose retire
the database may refuse without anything else failing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from hermes_estop import Estop
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql


@pytest.fixture
def store(pg_url, fleet_root):  # noqa: F811
    store = PostgresStore(pg_url, root=fleet_root, share=False)
    yield store
    store.close()


@pytest.fixture
def estop(store, root_layout, clock) -> Estop:
    return Estop(layout=root_layout, store=store, clock=clock, actor="test@host")


def finishes(work: Callable[[], Any], seconds: float) -> Any:
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("value", work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{work} waited on the database"
    return outcome["value"]


def present(pg_server, store) -> bool:  # noqa: F811
    with pg_server.admin() as conn:
        return conn.execute(f'SELECT count(*) FROM "{store.schema}".holds').fetchone()[0] > 0


def test_check_of_an_expired_hold_never_waits_for_a_locked_row(estop, store, clock, pg_server):  # noqa: F811
    """A row another session keeps locked (as a frozen or slow writer does) would make a
    synchronous retire wait the lock timeout (10 s): the check answers from memory at once."""
    estop.engage(reason="maintenance", ttl="10m")
    clock.advance(minutes=10)
    blocker = pg_server.admin()
    try:
        blocker.autocommit = False
        blocker.execute(f'SELECT * FROM "{store.schema}".holds FOR UPDATE')
        verdict = finishes(estop.gate, seconds=5)
        assert verdict.proceed
        assert present(pg_server, store), "the retire waits on the row lock, off the read path"
    finally:
        blocker.rollback()
        blocker.close()
    assert present(pg_server, store), "a read never retires"
    assert len(estop.fleet.retire_expired()) == 1
    assert not present(pg_server, store)
    assert [event.event for event in estop.history()] == ["engage", "expire"]


def test_an_expired_hold_the_database_refuses_to_remove_is_left_for_the_next_deadman_pass(
        estop, store, clock, pg_server):  # noqa: F811
    estop.engage(reason="maintenance", ttl="10m")
    with pg_server.admin() as conn:  # every removal fails, as a row the server cannot delete does
        conn.execute(f'CREATE FUNCTION "{store.schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
                     "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$")
        conn.execute(f'CREATE TRIGGER refuse BEFORE DELETE ON "{store.schema}".holds '
                     f'FOR EACH ROW EXECUTE FUNCTION "{store.schema}".refuse()')
    clock.advance(minutes=10)
    for _ in range(50):
        assert not estop.is_engaged()
    assert estop.fleet.retire_expired() == []
    assert present(pg_server, store)
    with pg_server.admin() as conn:
        conn.execute(f'DROP TRIGGER refuse ON "{store.schema}".holds')
    assert len(estop.fleet.retire_expired()) == 1
    assert not present(pg_server, store)
