"""A consumer's deregistration never races its report (issue 32 item 11): `deregister` takes the
lock `report()` writes under, so a report in flight on another thread either lands before the
removal or writes nothing. Real threads, real registry files and a real PostgreSQL table."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_estop.consumers.reporter import ConsumerReporter
from hermes_estop.model.homes import Layout
from hermes_estop.process.estop import Estop
from hermes_estop.stores import FileStore
from hermes_estop.stores.postgresql import PostgresStore
from hermes_estop.stores.registry import ConsumerEntry, ConsumerTable
from pg_helpers import pg_server, pg_url  # noqa: F401

#: a hang guard, never a timing assertion
GUARD = 60.0


class HeldPut(ConsumerTable):
    """The real table, with each `put` held at its start until the test lets it go: a report in
    flight, as a slow disk or database makes it."""

    def __init__(self, inner: ConsumerTable) -> None:
        self.inner = inner
        self.name = inner.name
        self.in_put = threading.Event()
        self.go = threading.Event()

    def put(self, entry: ConsumerEntry) -> None:
        self.in_put.set()
        assert self.go.wait(GUARD)
        self.inner.put(entry)

    def remove(self, key: str) -> None:
        self.inner.remove(key)

    def entries(self) -> list[ConsumerEntry]:
        return self.inner.entries()


@pytest.fixture(params=["file", "postgresql"])
def estop(request, fleet_root: Path, clock) -> Iterator[Estop]:
    if request.param == "postgresql":
        store: FileStore | PostgresStore = PostgresStore(request.getfixturevalue("pg_url"), root=fleet_root, share=False)
        store.init_schema()
    else:
        store = FileStore(fleet_root)
    yield Estop(layout=Layout(home=fleet_root, root=fleet_root), store=store, clock=clock, actor="test@host")
    store.close()


def test_a_report_in_flight_never_brings_back_a_deregistered_consumer(estop):
    reporter = ConsumerReporter(estop, "cron", interval=1)
    real = estop.fleet.consumers()
    reporter.register()
    assert [entry.key for entry in real.entries()] == [reporter.entry.key]
    held = reporter._table = HeldPut(real)
    reporting = threading.Thread(target=reporter.report, kwargs={"force": True})
    reporting.start()
    assert held.in_put.wait(GUARD), "the report never reached its write"
    leaving = threading.Thread(target=reporter.deregister)
    leaving.start()
    leaving.join(1.0)  # the old code removes at once here; the fixed one waits for the report's lock
    held.go.set()
    reporting.join(GUARD)
    leaving.join(GUARD)
    assert not reporting.is_alive() and not leaving.is_alive()
    assert real.entries() == [], "a report that was in flight re-created the removed entry"


def test_a_report_after_deregistration_writes_nothing(estop):
    reporter = ConsumerReporter(estop, "kanban", interval=1)
    reporter.register()
    reporter.deregister()
    assert reporter.report(force=True) is False
    assert estop.fleet.consumers().entries() == []
