"""`hermes_estop_store_reachable` and `hermes_estop_scheduler_leader` on each store: the file
store is reachable while its fleet root is a readable directory and always leads; PostgreSQL
reports its listener's contact and the window scheduler's election."""

from __future__ import annotations

import shutil

import pytest
from obs_helpers import scrape

from hermes_estop import Estop
from hermes_estop.observe.server import StatusServer, attach
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401


def test_a_vanished_fleet_root_is_an_unreachable_file_store(estop, fleet_root, server):
    assert scrape(server)[("hermes_estop_store_reachable", ())] == 1
    shutil.rmtree(fleet_root)
    assert scrape(server)[("hermes_estop_store_reachable", ())] == 0


@pytest.mark.postgresql
def test_postgresql_store_reports_reachable_holds_and_leadership(pg_url, fleet_root, clock):  # noqa: F811
    store = PostgresStore(pg_url, root=fleet_root, share=False)
    try:
        assert store.sync()
        estop = Estop(home=fleet_root, root=fleet_root, store=store, actor="test@host")
        estop.engage(reason="on the database", ttl="1h", fleet=True)
        assert store.sync()

        class Windows:
            name = "windows"
            is_leader = staticmethod(store.leader_gate("windows"))

        with StatusServer(estop) as server:
            attach(server, [Windows()])
            m = scrape(server)
        assert m[("hermes_estop_store_reachable", ())] == 1
        assert m[("hermes_estop_hold_active", (("scope", "fleet"),))] == 1
        assert 3500 < m[("hermes_estop_hold_seconds_remaining", (("scope", "fleet"),))] <= 3600
        assert m[("hermes_estop_scheduler_leader", ())] == 1  # the only campaigner leads
    finally:
        store.close()


def test_an_unwritable_audit_trail_is_a_metric_and_never_stops_a_stop(estop, fleet_root, server):
    """Issue 20 item 4: the hold arms; the audit trail's failure shows in the metrics."""
    import os

    from hermes_estop.stores.audit_log import AUDIT_FILE

    before = scrape(server)
    assert before[("hermes_estop_audit_writable", ())] == 1
    assert before[("hermes_estop_audit_failures_total", ())] == 0
    os.mkfifo(fleet_root / AUDIT_FILE)
    estop.engage(reason="stop anyway", fleet=True)
    after = scrape(server)
    assert after[("hermes_estop_hold_active", (("scope", "fleet"),))] == 1
    assert after[("hermes_estop_audit_writable", ())] == 0
    assert after[("hermes_estop_audit_failures_total", ())] == 1
