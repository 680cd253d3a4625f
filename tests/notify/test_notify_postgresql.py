"""The notifier on the PostgreSQL store: events from the `audit` table by row id, the cursor in
the `notify_cursors` table (nothing in the fleet root), and delivery by the elected process only."""

from __future__ import annotations

import threading

import pytest
from notify_helpers import webhook, write_config

from hermes_estop import Estop
from hermes_estop.notify.config import load_targets
from hermes_estop.notify.cursors import STATE_FILE, FleetCursorStore
from hermes_estop.notify.notifier import build_workers, notify_services
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql


@pytest.fixture
def pg_estops(pg_url, fleet_root, clock):  # noqa: F811
    made: list[Estop] = []

    def make() -> Estop:
        made.append(Estop(home=fleet_root, root=fleet_root, clock=clock, actor="tester",
                          store=PostgresStore(pg_url, share=False)))
        return made[-1]

    yield make
    for estop in made:
        estop.close()


def test_events_come_from_the_audit_table_and_the_cursor_lives_in_the_database(pg_estops, receiver, clock,
                                                                               fleet_root):
    estop = pg_estops()
    estop.engage(reason="a")
    estop.release()
    write_config(fleet_root, webhook("hook", receiver.url))
    [worker] = build_workers(estop.fleet)
    assert worker.tick(clock()).caught_up
    events = receiver.events()
    assert [(e["event"], e["reason"]) for e in events] == [("engage", "a"), ("release", "a")]
    assert all(e["id"].startswith(f"audit-{estop.store.schema}-") for e in events)
    assert not (fleet_root / STATE_FILE).exists()
    estop.engage(reason="b")
    other = pg_estops()  # another process's view: resumes from the cursor in the table
    [again] = build_workers(other.fleet)
    assert FleetCursorStore(other.fleet).load()["hook"].delivered == 2
    again.tick(clock())
    assert [e["reason"] for e in receiver.events()] == ["a", "a", "b"]


def test_only_the_elected_notifier_delivers(pg_estops, receiver, fleet_root):
    write_config(fleet_root, webhook("hook", receiver.url))
    first, second = pg_estops(), pg_estops()
    services = [*notify_services(first.fleet, 0.2), *notify_services(second.fleet, 0.2)]
    assert len(services) == 2 and all(s.is_leader is not None for s in services)
    for service in services:
        service.poll = 0.05
    stop = threading.Event()
    threads = [threading.Thread(target=s.run, args=(stop,), daemon=True) for s in services]
    for thread in threads:
        thread.start()
    try:
        for index in range(4):
            first.engage(reason=f"r{index}")
            assert receiver.wait_for(index + 1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert [e["reason"] for e in receiver.events()] == ["r0", "r1", "r2", "r3"]
    assert len(set(receiver.ids())) == 4 == len(receiver.ids())
    assert load_targets(fleet_root)[0].name == "hook"
