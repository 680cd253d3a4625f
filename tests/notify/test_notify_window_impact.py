"""The notification of a window's arm carries what it holds back (issue 47 item 4): `serve`
hands the notifier `observe.impact_preview.arm_impact`; a real receiver gets the engage of the
window's hold with `impact` totals, and an operator's pause without them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from notify_helpers import webhook, write_config

from hermes_estop.consumers.crontable import CronTable
from hermes_estop.daemon.supervisor import serve_once
from hermes_estop.notify.config import load_targets
from hermes_estop.notify.cursors import FleetCursorStore
from hermes_estop.notify.source import FleetAuditSource
from hermes_estop.notify.target import TargetWorker
from hermes_estop.observe.impact_preview import arm_impact, arming_soon
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.skips import skip_occurrence
from hermes_estop.windows.windows_file import WindowsFile

#: inside the drain lead of the nightly window's 2026-06-02 occurrence (armed from 01:45)
IN_DRAIN = datetime(2026, 6, 2, 1, 50, tzinfo=UTC)


def worker_for(estop, receiver, enrich) -> TargetWorker:
    """The worker of one webhook target to `receiver`, its bodies enriched by `enrich`."""
    root = estop.layout.root
    write_config(root, webhook("hook", receiver.url))
    fleet = estop.fleet
    [target] = load_targets(root)
    return TargetWorker(target, FleetAuditSource(fleet), FleetCursorStore(fleet), root, enrich=enrich)


def test_a_window_arm_carries_its_totals_and_a_pause_does_not(estop, clock, receiver):
    root = estop.layout.root
    clock.set(IN_DRAIN)
    WindowsFile(root).save([Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "drain": "15m"})])
    CronTable(root).add("sync", "true", now=IN_DRAIN, schedule="*/30 * * * *", owner="9")
    serve_once(estop, 1.0, dry_run=False)  # the scheduler arms the occurrence's hold
    assert worker_for(estop, receiver, arm_impact(estop)).tick(clock()).caught_up
    [engage] = [e for e in receiver.events() if e["event"] == "engage"]
    impact = engage["impact"]
    assert (impact["window"], impact["occurrence"], impact["held_runs"]) == ("nightly", "2026-06-02T02:00:00+00:00", 4)
    assert impact["line"].startswith("holds back 4 cron runs in 1 home, 0 ready cards")


def test_an_operators_pause_carries_no_impact(estop, clock, receiver):
    estop.engage(reason="by hand")
    worker_for(estop, receiver, arm_impact(estop)).tick(clock())
    [engage] = receiver.events()
    assert engage["event"] == "engage" and "impact" not in engage


def test_an_enrich_that_fails_sends_the_event_as_it_is(estop, clock, receiver):
    estop.engage(reason="by hand")

    def broken(event):
        raise RuntimeError("boom")

    assert worker_for(estop, receiver, broken).tick(clock()).delivered and receiver.events()[0]["reason"] == "by hand"


#: 20 minutes before the nightly window (02:00 UTC, no drain) of 2026-06-02 arms
EARLY = datetime(2026, 6, 2, 1, 40, tzinfo=UTC)


@pytest.fixture
def nightly(estop):
    """The nightly window (02:00 UTC for 2h) and a half-hourly job it holds four runs of."""
    root = estop.layout.root
    WindowsFile(root).save([Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"})])
    CronTable(root).add("sync", "true", now=EARLY, schedule="*/30 * * * *", owner="9")
    return estop


def forewarned(estop, receiver, **fields) -> TargetWorker:
    """The worker of one webhook target (`fields`: `before`, ...) given the windows arming soon."""
    root = estop.layout.root
    write_config(root, webhook("hook", receiver.url, start="end", **fields))
    fleet = estop.fleet
    [target] = load_targets(root)
    return TargetWorker(target, FleetAuditSource(fleet), FleetCursorStore(fleet), root, upcoming=arming_soon(estop))


def test_before_sends_one_upcoming_notice_with_the_totals(nightly, clock, receiver):
    clock.set(EARLY)
    estop = nightly
    worker = forewarned(estop, receiver, before="15m")
    worker.tick(clock())
    assert receiver.events() == []  # 20 minutes ahead: not yet
    clock.advance(minutes=6)
    worker.tick(clock())
    [notice] = receiver.events()
    assert (notice["event"], notice["window"], notice["arms_at"]) == ("upcoming", "nightly", "2026-06-02T02:00:00+00:00")
    assert notice["impact"]["held_runs"] == 4 and notice["impact"]["line"].startswith("holds back 4 cron runs")
    clock.advance(minutes=1)
    worker.tick(clock())
    assert len(receiver.events()) == 1  # once
    # a new worker (a restart) reads what was sent from the target's state
    again = forewarned(estop, receiver, before="15m")
    again.tick(clock())
    assert len(receiver.events()) == 1


def test_no_notice_without_before_or_for_a_skipped_occurrence(nightly, clock, receiver):
    estop = nightly
    clock.set(EARLY + timedelta(minutes=10))
    forewarned(estop, receiver).tick(clock())
    assert receiver.events() == []
    window = Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"})
    skip_occurrence(estop.fleet, window, upcoming(window, clock(), 1)[0], clock())
    forewarned(estop, receiver, before="15m").tick(clock())
    assert [e["event"] for e in receiver.events()] == ["skip"]  # the skip itself, from the trail; no notice
