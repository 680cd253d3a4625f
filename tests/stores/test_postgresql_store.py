"""What only the PostgreSQL store has: its URL, the versioned schema, hand edits in psql, the
one-transaction engage under concurrency, a read path that never goes to the database, the
database's clock, and fork safety. The shared semantics are in `test_contract.py`."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from pg_waiter import wait_version

from hermes_estop import VACANT, Estop, HoldConflict, StoreError
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import EngageRequest, HoldState, parse_body
from hermes_estop.model.timeutil import format_instant, utc_now
from hermes_estop.stores import open_store
from hermes_estop.stores.pg_clock import DbClock
from hermes_estop.stores.pg_schema import SCHEMA_VERSION, ensure_schema
from hermes_estop.stores.postgresql import PostgresStore, parse_store_url
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql


@pytest.fixture
def make_store(pg_url, fleet_root):  # noqa: F811
    """Stores on this test's schema, each with its own connections (as another process has)."""
    made = []

    def make(url: str | None = None, **kwargs) -> PostgresStore:
        store = PostgresStore(url or pg_url, root=fleet_root, share=False, **kwargs)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store) -> PostgresStore:
    return make_store()


@pytest.fixture
def estop(store, root_layout, clock) -> Estop:
    return Estop(layout=root_layout, store=store, clock=clock, actor="test@host")


def admin_execute(pg_server, sql, params=()):  # noqa: F811
    with pg_server.admin() as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else None


def reading(estop):
    return estop.store.read((estop.layout.own,), estop.clock())[0]


# -- the URL ------------------------------------------------------------------------------------


def test_our_url_parameters_are_removed_before_libpq_and_the_password_is_redacted():
    url = parse_store_url("postgresql://estop:s3cret@db.internal:6432/fleet?schema=ops_estop&grace=2.5&sslmode=disable")
    assert url.schema == "ops_estop" and url.grace == 2.5
    params = psycopg.conninfo.conninfo_to_dict(url.conninfo)
    assert "schema" not in params and "grace" not in params
    assert params["sslmode"] == "disable" and params["connect_timeout"] == "5"
    assert "s3cret" not in url.display and "***" in url.display


@pytest.mark.parametrize(
    "query, named",
    [
        ("schema=Bad-Name", "'Bad-Name'"),
        ("schema=1abc", "'1abc'"),
        ("grace=0", "'0'"),
        ("grace=-3", "'-3'"),
        ("grace=soon", "'soon'"),
        ("grace=3601", "'3601'"),
        ("connect_timeout=x", "'x'"),
    ],
)
def test_bad_url_parameter_is_refused_naming_the_value(query, named):
    with pytest.raises(InvalidArgument) as err:
        parse_store_url(f"postgresql://estop@db/fleet?{query}")
    assert named in str(err.value)


def test_open_store_maps_a_postgresql_url_and_does_not_connect_until_used(fleet_root):
    store = open_store("postgresql://nobody@127.0.0.1:1/nowhere", fleet_root)
    try:
        assert isinstance(store, PostgresStore)
        assert store.listener._thread is None
    finally:
        store.close()


# -- the schema ---------------------------------------------------------------------------------


def test_schema_init_is_versioned_and_idempotent(pg_server, store):  # noqa: F811
    assert store.init_schema() == (SCHEMA_VERSION, list(range(1, SCHEMA_VERSION + 1)))
    assert store.init_schema() == (SCHEMA_VERSION, [])
    rows = admin_execute(pg_server, f'SELECT version FROM "{store.schema}".schema_version ORDER BY version')
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


def test_an_older_schema_gets_only_the_migrations_it_lacks(pg_server, store):  # noqa: F811
    store.init_schema()
    admin_execute(pg_server, f'DELETE FROM "{store.schema}".schema_version WHERE version > 1')
    assert store.init_schema() == (SCHEMA_VERSION, list(range(2, SCHEMA_VERSION + 1)))
    assert store.init_schema() == (SCHEMA_VERSION, [])


def test_schema_is_created_on_first_use(pg_server, estop):  # noqa: F811
    estop.engage(reason="first use")
    assert admin_execute(pg_server, "SELECT to_regclass(%s)", [f'"{estop.store.schema}".holds'])[0][0] is not None


def test_concurrent_schema_init_from_many_hosts_applies_it_once(pg_server, pg_url):  # noqa: F811
    schema = parse_store_url(pg_url).schema
    barrier = threading.Barrier(6)
    results, errors = [], []

    def init():
        try:
            with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
                barrier.wait(10)
                results.append(ensure_schema(conn, schema))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=init) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert sorted(len(applied) for _, applied in results) == [0] * 5 + [SCHEMA_VERSION]


def test_schema_newer_than_this_code_is_refused_and_reads_held(pg_server, pg_url, make_store, root_layout):  # noqa: F811
    schema = parse_store_url(pg_url).schema
    make_store().init_schema()
    admin_execute(pg_server, f'INSERT INTO "{schema}".schema_version (version, description) VALUES (99, %s)', ["future"])
    with pytest.raises(StoreError, match="newer"):
        make_store().init_schema()
    fresh = make_store()
    (reading_,) = fresh.read((root_layout.fleet,), utc_now())
    assert reading_.state is HoldState.UNREADABLE and "newer" in reading_.problem


# -- hand edits in psql, the trigger ------------------------------------------------------------


def test_hand_insert_of_an_empty_body_holds_like_touch_estop(pg_server, store, estop):  # noqa: F811
    store.init_schema()
    admin_execute(pg_server, f"INSERT INTO \"{store.schema}\".holds (scope, body) VALUES ('fleet', '')")
    assert store.sync()
    assert reading(estop).state is HoldState.UNREADABLE
    assert estop.is_engaged() and not estop.is_allowed("alice")


def test_hand_delete_releases_like_rm_estop(pg_server, store, estop):  # noqa: F811
    estop.engage(reason="maint")
    admin_execute(pg_server, f"DELETE FROM \"{store.schema}\".holds WHERE scope = 'fleet'")
    assert store.sync()
    assert not estop.is_engaged()


def test_hand_truncate_releases_every_scope(pg_server, store, estop):  # noqa: F811
    estop.engage(reason="fleet")
    estop.for_profile("ops").engage(reason="ops")
    version = store.listener.version
    admin_execute(pg_server, f'TRUNCATE "{store.schema}".holds')
    assert wait_version(store.listener, version, 10) > version
    assert not estop.for_profile("ops").is_engaged()


@pytest.mark.parametrize(
    "raw",
    [
        b'{"generation": "g1"}',
        b'\xef\xbb\xbf{"generation": "g1", "reason": "bom"}',
        b'{"generation": 7}',
        b'{"generation": ""}',
        b'{"generation": null}',
        b'{"reason": "hand-written"}',
        b'{"generation": "a", "generation": "b"}',
        b'["generation", "g1"]',
        b"{not json",
        b"\xff\xfe\x00garbage",
        b"",
    ],
    ids=["plain", "bom", "number", "empty", "null", "none", "duplicate-key", "array", "not-json", "binary", "empty-body"],
)
def test_generation_column_agrees_with_parse_body(pg_server, store, raw):  # noqa: F811
    store.init_schema()
    (row,) = admin_execute(
        pg_server, f"INSERT INTO \"{store.schema}\".holds (scope, body) VALUES ('fleet', %s) RETURNING generation", [raw]
    )
    try:
        expected = parse_body(raw).generation
    except ValueError:
        expected = None
    assert row[0] == expected


def test_hand_edit_of_a_hand_written_body_changes_its_fence(pg_server, store, estop, clock):  # noqa: F811
    store.init_schema()
    past = format_instant(clock.now - timedelta(minutes=1)).encode()
    raw = b'{"reason": "by hand", "expires_at": "' + past + b'"}'
    admin_execute(pg_server, f"INSERT INTO \"{store.schema}\".holds (scope, body) VALUES ('fleet', %s)", [raw])
    assert store.sync()
    decided = reading(estop)
    assert decided.state is HoldState.EXPIRED and decided.fence.generation is None
    admin_execute(pg_server, f"UPDATE \"{store.schema}\".holds SET body = body WHERE scope = 'fleet'")
    assert store.sync()
    assert not store.retire(estop.layout.own, decided.fence, clock.now, "test")
    assert store.retire(estop.layout.own, reading(estop).fence, clock.now, "test")


# -- engage is one transaction ------------------------------------------------------------------


def test_two_first_engages_on_a_scope_without_a_row_cannot_both_win(make_store, root_layout, pg_server):  # noqa: F811
    first, second = make_store(), make_store()
    location = root_layout.fleet
    outcome = {}

    def second_engage():
        try:
            outcome["hold"] = second.engage(location, EngageRequest(reason="second", only_if=VACANT), utc_now(), "b")
        except HoldConflict as exc:
            outcome["conflict"] = exc

    def interleave(step):
        if step == "engage:before-commit" and "thread" not in outcome:
            outcome["thread"] = thread = threading.Thread(target=second_engage)
            thread.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # until the second engage waits on our lock
                if admin_execute(pg_server, "SELECT count(*) FROM pg_locks WHERE NOT granted")[0][0]:
                    return
                time.sleep(0.01)
            raise AssertionError("the second engage never waited for the first")

    second.init_schema()
    first.interleave = interleave
    won = first.engage(location, EngageRequest(reason="first", only_if=VACANT), utc_now(), "a")
    outcome["thread"].join(10)
    assert "conflict" in outcome, outcome
    assert first.read((location,), utc_now())[0].hold.generation == won.generation
    assert [e.event for e in first.history()] == ["engage"]


def test_racing_vacant_engages_from_many_connections_admit_exactly_one(make_store, root_layout):
    stores = [make_store() for _ in range(6)]
    stores[0].init_schema()
    barrier = threading.Barrier(len(stores))
    won, lost = [], []

    def race(store):
        barrier.wait(10)
        try:
            won.append(store.engage(root_layout.fleet, EngageRequest(reason="race", only_if=VACANT), utc_now(), "r"))
        except HoldConflict:
            lost.append(store)

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(won) == 1 and len(lost) == len(stores) - 1
    assert [e.event for e in stores[0].history()] == ["engage"]


def test_a_failure_inside_the_engage_writes_nothing_and_audits_nothing(store, estop):
    standing = estop.engage(reason="standing")

    def boom(step):
        if step == "engage:before-commit":
            raise RuntimeError("crash between the upsert and the audit row")

    store.interleave = boom
    with pytest.raises(RuntimeError):
        estop.engage(reason="never")
    store.interleave = None
    assert store.sync()
    assert reading(estop).hold == standing
    assert [e.event for e in estop.history()] == ["engage"]


def test_a_dead_writer_connection_is_replaced_and_the_write_lands_once(pg_server, store, estop):  # noqa: F811
    estop.engage(reason="first")
    pid = store.backend._writer.info.backend_pid
    admin_execute(pg_server, "SELECT pg_terminate_backend(%s)", [pid])
    again = estop.engage(reason="after the kill")
    assert reading(estop).hold.generation == again.generation
    assert [e.event for e in estop.history()] == ["engage", "rearm"]


# -- the hot path -------------------------------------------------------------------------------


def test_checks_never_go_to_the_database(store, root_layout, monkeypatch):
    estop = Estop(layout=root_layout, store=store, actor="test@host")
    estop.engage(reason="maint", ttl="1h")
    calls = []
    original = psycopg.Connection.execute

    def spy(self, *args, **kwargs):
        calls.append(threading.current_thread().name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    for _ in range(500):
        assert not estop.gate("alice")
        assert estop.is_engaged()
    assert threading.current_thread().name not in calls


def test_expiry_is_judged_at_each_read_without_a_notification(store, estop, clock):
    estop.engage(reason="window", ttl="10m")
    version = store.listener.version
    clock.advance(minutes=10)
    assert reading(estop).state is HoldState.EXPIRED
    assert store.listener.version == version


# -- the database's clock -----------------------------------------------------------------------


def test_db_clock_is_monotonic_time_plus_the_measured_offset():
    ticks = iter([100.0, 130.0])
    clock = DbClock(monotonic=lambda: next(ticks))
    db = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    clock.measure(db, sent=10.0, received=12.0)
    assert clock.at(11.0) == db
    assert clock() == db + timedelta(seconds=89)
    assert clock() == db + timedelta(seconds=119)


def test_default_clock_follows_the_database_not_this_hosts_wall_clock(pg_server, store, monkeypatch):  # noqa: F811
    import hermes_estop.stores.pg_clock as pg_clock

    now = store.default_clock()
    now()  # measured at connect
    monkeypatch.setattr(pg_clock, "utc_now", lambda: datetime(1999, 1, 1, tzinfo=UTC))
    before = now()
    (row,) = admin_execute(pg_server, "SELECT clock_timestamp()")
    after = now()
    # the clock is measured once, at the midpoint of one round trip: on a loaded machine that round trip
    # can take a second; a clock that followed this host's wall clock is 27 years off
    slack = timedelta(seconds=5)
    assert before - slack <= row[0] <= after + slack


# -- fork safety --------------------------------------------------------------------------------


def test_a_forked_child_opens_its_own_connections_and_leaves_the_parents_alone(pg_url, root_layout):  # noqa: F811
    parent = PostgresStore(pg_url, root=root_layout.root)
    try:
        estop = Estop(layout=root_layout, store=parent, actor="parent")
        estop.engage(reason="before the fork")
        listener_pid = parent.listener.backend_pid
        version = parent.listener.version
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                forked = PostgresStore(pg_url, root=root_layout.root)
                Estop(layout=root_layout, store=forked, actor="child").engage(reason="from the child")
                forked.close()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        wait_version(parent.listener, version, 10)
        assert parent.listener.backend_pid == listener_pid
        assert estop.get_state()["reason"] == "from the child"
        estop.engage(reason="parent still writes")
        assert estop.get_state()["reason"] == "parent still writes"
    finally:
        parent.close()


def test_an_audit_table_the_server_refuses_never_refuses_the_stop(pg_server, store, estop):  # noqa: F811
    """Issue 20 item 4 on PostgreSQL: the audit rows ride in a savepoint of the engage's
    transaction; when the server refuses them the hold is committed all the same, and counted."""
    standing = estop.engage(reason="standing")
    admin_execute(pg_server, f'ALTER TABLE "{store.schema}".audit RENAME TO audit_gone')
    try:
        hold = estop.engage(reason="stop anyway")
    finally:
        admin_execute(pg_server, f'ALTER TABLE "{store.schema}".audit_gone RENAME TO audit')
    assert store.sync()
    assert reading(estop).hold == hold and hold.generation != standing.generation
    assert store.audit_failures == 1 and "audit" in (store.last_audit_failure or "")
    assert [e.event for e in estop.history()] == ["engage"]
