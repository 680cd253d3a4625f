"""The holds trigger (schema version 3) puts the changed row in its notification, and a
listener applies a row that ARMS a scope without re-reading the table (`pg_notice`); a re-arm,
a release, a body too large for a notification and a TRUNCATE still cost a re-read. Another
store on the same schema is the other host."""

from __future__ import annotations

import pytest
from pg_waiter import wait_version

from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql


@pytest.fixture
def pair(pg_url, fleet_root):  # noqa: F811
    """(writer Estop, reader store): two stores with their own connections; the reader never
    re-reads on a timer during the test."""
    writer = PostgresStore(pg_url, root=fleet_root, share=False)
    reader = PostgresStore(pg_url, root=fleet_root, share=False, refresh=3600)
    assert reader.sync(10)
    yield Estop(layout=Layout(home=fleet_root, root=fleet_root), store=writer, actor="writer"), reader
    reader.close()
    writer.close()


def rows(store: PostgresStore) -> dict[str, tuple[bytes, int]]:
    return {scope: (row.body, row.revision) for scope, row in store.listener.rows.items()}


def wait_change(store: PostgresStore, version: int) -> None:
    assert wait_version(store.listener, version, 10) > version, "the change never reached the listener"


def test_a_new_hold_reaches_another_listener_without_a_re_read_and_is_what_a_re_read_finds(pair):
    estop, reader = pair
    listener = reader.listener
    reads, version = listener.full_reads, listener.version
    hold = estop.engage(reason="first")
    wait_change(reader, version)
    version = listener.version
    estop.for_profile("ops").engage(reason="ops")
    wait_change(reader, version)
    applied = rows(reader)
    assert listener.full_reads == reads and set(applied) == {"fleet", "ops"}
    assert reader.read((estop.layout.fleet,), reader.default_clock()())[0].hold.generation == hold.generation
    assert reader.sync(10) and rows(reader) == applied  # what a re-read finds, body and revision alike


@pytest.mark.parametrize("weaken", ["release", "rearm", "release_profile"])
def test_a_change_of_a_standing_row_is_re_read_never_applied_from_the_notice(pair, weaken):
    estop, reader = pair
    estop.engage(reason="held")
    estop.for_profile("ops").engage(reason="ops")
    assert reader.sync(10)
    listener = reader.listener
    reads, version = listener.full_reads, listener.version
    if weaken == "release":
        estop.release()
    elif weaken == "rearm":
        estop.engage(reason="shorter", ttl="5m")
    else:
        estop.for_profile("ops").release()
    wait_change(reader, version)
    assert listener.full_reads > reads
    assert set(rows(reader)) == ({"ops"} if weaken == "release" else {"fleet"} if weaken == "release_profile"
                                 else {"fleet", "ops"})


def test_a_body_too_large_for_a_notification_is_re_read(pair):
    estop, reader = pair
    reads = reader.listener.full_reads
    version = reader.listener.version
    hold = estop.engage(reason="big", allow={"user_ids": [f"user-{i:05d}" for i in range(400)]})
    wait_change(reader, version)
    assert reader.listener.full_reads > reads
    assert reader.read((estop.layout.fleet,), reader.default_clock()())[0].hold.generation == hold.generation


def test_a_truncate_is_re_read(pair, pg_server):  # noqa: F811
    estop, reader = pair
    estop.engage(reason="held")
    assert reader.sync(10) and "fleet" in rows(reader)
    reads = reader.listener.full_reads
    version = reader.listener.version
    with pg_server.admin() as conn:
        conn.execute(f'TRUNCATE "{reader.schema}".holds')
    wait_change(reader, version)
    assert rows(reader) == {} and reader.listener.full_reads > reads


def test_a_hand_written_row_in_psql_arms_from_its_notice(pair, pg_server):  # noqa: F811
    """The database's `touch ESTOP`: an empty body is unreadable, so it holds and admits nobody."""
    estop, reader = pair
    reads, version = reader.listener.full_reads, reader.listener.version
    with pg_server.admin() as conn:
        conn.execute(f"INSERT INTO \"{reader.schema}\".holds (scope, body) VALUES ('fleet', '')")
    wait_change(reader, version)
    reading = reader.read((estop.layout.fleet,), reader.default_clock()())[0]
    assert reading.state.value == "unreadable" and reader.listener.full_reads == reads
