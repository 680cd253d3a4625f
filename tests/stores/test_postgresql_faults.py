"""Faults: the database unreachable from the start, the listening connection killed
(`pg_terminate_backend`), the server stopped and restarted. Consumers keep the last known state
for the grace, then hold everything (nobody admitted); they catch up on what changed while
they were cut off and recover by themselves. Never silently free.

A gate on the listener's reconnect (`Listener.interleave`) keeps a consumer cut off while the
test changes the holds behind its back, so "catch up" is deterministic."""

from __future__ import annotations

import threading
import time

import pytest

from hermes_estop import Estop, StoreUnavailable
from hermes_estop.model.hold import HoldState
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url, with_params  # noqa: F401

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

#: 3 s: after the listener's connection is cut, the test reads the last known state before the grace
#: runs out; on a loaded machine that read can come a second late (no grace at all still fails it)
GRACE = 3.0


class ReconnectGate:
    """Closed: the listener's next reconnect attempt waits until it is opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.opened.set()
        self.waiting = threading.Event()

    def close(self) -> None:
        self.waiting.clear()
        self.opened.clear()

    def __call__(self, step: str) -> None:
        if step == "listener:connect" and not self.opened.is_set():
            self.waiting.set()
            self.opened.wait(60)


def eventually(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout}s: {what}")
        time.sleep(0.02)


@pytest.fixture
def stores(pg_url, fleet_root):  # noqa: F811
    """A consumer and a writer, each with its own connections, as on two hosts."""
    url = with_params(pg_url, grace=GRACE)
    consumer = PostgresStore(url, root=fleet_root, share=False)
    writer = PostgresStore(url, root=fleet_root, share=False)
    gate = ReconnectGate()
    consumer.listener.interleave = gate
    yield consumer, writer, gate
    gate.opened.set()
    consumer.close()
    writer.close()


@pytest.fixture
def controllable(pg_server):  # noqa: F811
    if not pg_server.controllable:
        pytest.fail("the fault tests need HERMES_TEST_PG_CTL and HERMES_TEST_PG_DATA to stop and restart the server")
    yield pg_server
    try:
        with pg_server.admin():
            pass
    except Exception:
        pg_server.start()


def state(estop: Estop):
    return estop.store.read((estop.layout.fleet,), estop.clock())[0]


def estops(stores, root_layout):
    consumer, writer, _ = stores
    return (Estop(layout=root_layout, store=consumer, actor="consumer"),
            Estop(layout=root_layout, store=writer, actor="writer"))


def held_for_everyone(estop: Estop) -> bool:
    reading = state(estop)
    return (reading.state is HoldState.UNREADABLE and "unreachable" in reading.problem
            and estop.is_engaged() and not estop.gate("alice") and not estop.gate("bob"))


def test_unreachable_from_the_start_holds_everything_and_refuses_writes(fleet_root, root_layout):
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2", root=fleet_root, share=False)
    estop = Estop(layout=root_layout, store=store, actor="consumer")
    try:
        assert held_for_everyone(estop)
        assert not estop.is_allowed("alice")
        with pytest.raises(StoreUnavailable, match="cannot reach the PostgreSQL store") as err:
            estop.engage(reason="never lands")
        assert "\n" not in str(err.value)
        with pytest.raises(StoreUnavailable):
            estop.release()
    finally:
        store.close()


def test_listener_killed_holds_after_the_grace_catches_up_and_recovers(pg_server, stores, root_layout):  # noqa: F811
    consumer_estop, writer_estop = estops(stores, root_layout)
    consumer, _, gate = stores
    first = writer_estop.engage(reason="before", allow={"user_ids": ["alice"]})
    assert consumer.sync() and consumer_estop.is_allowed("alice")

    gate.close()
    with pg_server.admin() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [consumer.listener.backend_pid])
    assert gate.waiting.wait(10), "the listener never noticed its connection was gone"
    assert state(consumer_estop).hold.generation == first.generation  # the grace: last known state

    writer_estop.release()
    second = writer_estop.engage(reason="changed while the consumer was cut off", allow={"user_ids": ["bob"]})
    eventually(lambda: held_for_everyone(consumer_estop), "the consumer holds everything after the grace")
    assert "unreachable since" in state(consumer_estop).problem

    gate.opened.set()
    eventually(lambda: state(consumer_estop).state is HoldState.ACTIVE, "the consumer recovers")
    assert state(consumer_estop).hold.generation == second.generation
    assert consumer_estop.is_allowed("bob") and not consumer_estop.is_allowed("alice")


def test_server_down_holds_everything_refuses_writes_and_recovers_by_itself(controllable, stores, root_layout):
    consumer_estop, writer_estop = estops(stores, root_layout)
    standing = writer_estop.engage(reason="standing", allow={"user_ids": ["alice"]})
    assert stores[0].sync()

    controllable.stop()
    try:
        eventually(lambda: held_for_everyone(consumer_estop), "the consumer holds everything during the outage")
        with pytest.raises(StoreUnavailable):
            writer_estop.engage(reason="while down")
        with pytest.raises(StoreUnavailable):
            writer_estop.release()
    finally:
        controllable.start()
    eventually(lambda: state(consumer_estop).state is HoldState.ACTIVE, "the consumer recovers on its own")
    assert state(consumer_estop).hold.generation == standing.generation
    assert consumer_estop.is_allowed("alice")
    assert writer_estop.engage(reason="after").reason == "after"


def test_server_restart_consumers_catch_up_on_what_they_missed(controllable, stores, root_layout):
    consumer_estop, writer_estop = estops(stores, root_layout)
    consumer, _, gate = stores
    writer_estop.engage(reason="before the restart")
    assert consumer.sync()

    gate.close()
    controllable.restart()
    assert gate.waiting.wait(10), "the listener never noticed the restart"
    writer_estop.release()
    profile_hold = writer_estop.for_profile("ops").engage(reason="armed while the consumer was cut off")
    eventually(lambda: held_for_everyone(consumer_estop), "the consumer holds everything while cut off")

    gate.opened.set()
    eventually(lambda: state(consumer_estop).state is HoldState.ABSENT, "the consumer sees the release it missed")
    ops = consumer_estop.for_profile("ops")
    assert ops.get_state()["generation"] == profile_hold.generation
    assert consumer_estop.gate("anyone")
