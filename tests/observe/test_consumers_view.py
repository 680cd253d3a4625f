"""Issue 21: the status page has a consumers section and /metrics the consumer gauges, both from
the status document's roster (one read of the fleet with the holds it is judged against)."""

from __future__ import annotations

import os
import re
from dataclasses import replace

from obs_helpers import fetch, scrape

from hermes_estop.fleet.registry.entries import ALL_SCOPES, this_host
from hermes_estop.stores.registry import ConsumerEntry
from hermes_estop.system.processes import start_time


def _register(estop, component: str, *, observed=()) -> ConsumerEntry:
    now = estop.clock()
    entry = ConsumerEntry(component=component, host=this_host(), pid=os.getpid(), pid_start=start_time(os.getpid()),
                          home=str(estop.layout.home), profile=None, scopes=(ALL_SCOPES,), version="test",
                          interval=1.0, registered_at=now, reported_at=now, seq=1, observed=tuple(observed),
                          verdict="held" if observed else "proceed")
    estop.fleet.consumers().put(entry)
    return entry


def test_the_page_and_metrics_show_who_acknowledged_the_hold(estop, server):
    hold = estop.engage(reason="maintenance")
    _register(estop, "kanban", observed=(("fleet", hold.generation),))
    late = _register(estop, "cron")
    estop.fleet.consumers().put(replace(late, pid=os.getppid(), pid_start=start_time(os.getppid())))
    page = fetch(server.url)[2].decode()
    rows = dict(re.findall(r'data-component="(\w+)" data-state="\w+" data-acknowledged="(\w+)"', page))
    assert rows == {"kanban": "true", "cron": "false"}
    assert "acknowledged by 1 of" in page
    samples = scrape(server)
    acked = {dict(labels)["component"]: value for (name, labels), value in samples.items()
             if name == "hermes_estop_consumer_acknowledged"}
    assert acked["kanban"] == 1.0 and acked["cron"] == 0.0
    assert samples[("hermes_estop_consumers", (("component", "kanban"), ("state", "live")))] == 1.0


def test_a_fleet_without_consumers_says_so(estop, server):
    page = fetch(server.url)[2].decode()
    assert 'id="consumers-line">consumers: none registered' in page
    assert all(name != "hermes_estop_consumer_lag_seconds" for name, _ in scrape(server))


def test_api_status_carries_the_roster(estop, server):
    import json

    _register(estop, "gateway")
    document = json.loads(fetch(server.url + "api/status")[2])
    assert [row["component"] for row in document["consumers"]["consumers"]] == ["gateway"]
    assert document["consumers"]["counts"]["live"] == 1
