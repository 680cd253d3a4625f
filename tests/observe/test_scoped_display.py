"""Scoped holds (issue 26) on every surface that shows holds: /metrics labels, /api/status, the
page, and the status document."""

from __future__ import annotations

import html
import json

import pytest
from obs_helpers import fetch, scrape

from hermes_estop.observe.status import fleet_status


def test_metrics_label_each_scoped_hold_with_its_id_and_selector(estop, server):
    hold = estop.engage(reason="migrating", only=["kanban"], fleet=True)
    m = scrape(server)
    key = ("hermes_estop_scoped_hold_active", (("hold", hold.hold_id), ("scope", "fleet"), ("selector", "kanban")))
    assert m[key] == 1
    assert m[("hermes_estop_hold_active", (("scope", "fleet"),))] == 0  # no full hold stands


def test_the_page_and_api_show_the_selector_beside_the_full_hold(estop, server):
    estop.engage(reason="everything", fleet=True)
    hold = estop.engage(reason="nightly", only=["cron"], jobs=["nightly-*"], fleet=True)
    page = fetch(server.url)[2].decode()
    assert "only cron:nightly-*" in page and hold.hold_id in page and "everything" in page
    api = json.loads(fetch(server.url + "api/status")[2])
    selectors = [h["selector"] for h in api["fleet"]["holds"]]
    assert selectors == [None, {"components": ["cron"], "jobs": ["nightly-*"]}]


def test_status_lines_name_the_scoped_hold_and_how_to_lift_it(estop):
    hold = estop.engage(only=["kanban"], fleet=True)
    lines = "\n".join(fleet_status(estop.for_fleet(), sections=False).lines())
    assert "PARTLY HELD" in lines and f"hold {hold.hold_id}: only kanban" in lines
    assert f"--hold {hold.hold_id}" in lines


def test_a_notification_names_the_scoped_hold_and_its_selector(estop, fleet_root):
    from hermes_estop.notify.source import event_body

    hold = estop.engage(only=["kanban"], fleet=True)
    (event,) = [e for e in estop.history() if e.event == "engage"]
    body = event_body("1", event, fleet_root)
    assert body["hold"] == hold.hold_id and body["selector"] == {"components": ["kanban"], "jobs": []}
    estop.engage(fleet=True)
    assert "selector" not in event_body("2", estop.history()[-1], fleet_root)


@pytest.mark.parametrize(("selector", "covers"), [
    ({}, "all"),
    ({"only": ["kanban"]}, "kanban"),
    ({"only": ["cron"], "jobs": ["nightly-*"]}, "cron:nightly-*"),
])
def test_every_surface_that_shows_a_hold_shows_what_it_covers(estop, server, fleet_root, selector, covers):
    from hermes_estop.notify.source import event_body

    estop.engage(reason="maintenance", fleet=True, **selector)
    status = fleet_status(estop.for_fleet(), sections=False)
    text = "\n".join(status.lines())
    assert (f"covers     {covers}" if not selector else f": only {covers}") in text
    (hold,) = [h for h in status.to_json()["fleet"]["holds"]]
    assert hold["covers"] == covers
    api = json.loads(fetch(server.url + "api/status")[2])
    assert [h["covers"] for h in api["fleet"]["holds"]] == [covers]
    page = fetch(server.url)[2].decode()
    assert f'<dt>covers</dt><dd class="covers">{html.escape(covers)}</dd>' in page
    (event,) = [e for e in estop.history() if e.event == "engage"]
    assert event_body("1", event, fleet_root)["covers"] == covers
    if selector:
        m = scrape(server)
        assert any(name == "hermes_estop_scoped_hold_active" and ("selector", covers) in labels
                   for name, labels in m)


def test_history_shows_what_each_hold_covers(estop, capsys, monkeypatch, fleet_root):
    from hermes_estop.cli.history import run_history

    monkeypatch.setenv("HERMES_ROOT", str(fleet_root))
    monkeypatch.setenv("HERMES_HOME", str(fleet_root))
    estop.engage(fleet=True)
    estop.engage(only=["kanban"], fleet=True)
    run_history(10, None, False)
    lines = [line for line in capsys.readouterr().out.splitlines() if " engage " in line]
    assert [("covers=all" in lines[0]), ("covers=kanban" in lines[1])] == [True, True]
    run_history(10, None, True)
    events = json.loads(capsys.readouterr().out)
    assert [e["covers"] for e in events if e["event"] == "engage"] == ["all", "kanban"]
