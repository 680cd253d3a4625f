"""The registry's decisions as pure functions of (entry, now, is-alive), on a fake clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from hermes_estop.fleet.registry.acks import owes, survey
from hermes_estop.fleet.registry.entries import (
    ALL_SCOPES,
    Ack,
    ConsumerEntry,
    ConsumerState,
    acknowledges,
    consumer_state,
    prunable,
)
from hermes_estop.fleet.registry.roster import roster_of
from hermes_estop.model.hold import Fence, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.model.selector import Selector
from hermes_estop.process.check import Snapshot


def entry(clock, *, interval=5.0, scopes=("fleet",), observed=(), seq=1, pid=100, host="here",
          component="kanban") -> ConsumerEntry:
    return ConsumerEntry(component=component, host=host, pid=pid, pid_start=1, home="/f", profile=None,
                         scopes=scopes, version="t", interval=interval, registered_at=clock(),
                         reported_at=clock(), seq=seq, observed=observed)


@pytest.mark.parametrize(("late", "alive", "state"), [
    (timedelta(seconds=5), True, ConsumerState.LIVE),
    (timedelta(seconds=6), True, ConsumerState.LIVE),
    (timedelta(seconds=6, milliseconds=1), True, ConsumerState.STALLED),
    (timedelta(hours=5), True, ConsumerState.STALLED),  # known alive: stalled however long
    (timedelta(0), False, ConsumerState.LOST),  # known gone: lost at once
    (timedelta(seconds=6, milliseconds=1), None, ConsumerState.STALLED),  # another host, one report late
    (timedelta(seconds=16), None, ConsumerState.STALLED),
    (timedelta(seconds=16, milliseconds=1), None, ConsumerState.LOST),  # three reports missed
    (timedelta(seconds=-30), None, ConsumerState.LIVE),  # a report from a clock ahead of ours
])
def test_consumer_state_follows_report_age_and_liveness(clock, late, alive, state):
    reported = entry(clock)
    assert consumer_state(reported, clock() + late, alive) is state


def test_a_lost_entry_is_pruned_after_a_day_and_a_stalled_one_never(clock):
    reported = entry(clock)
    day = clock() + timedelta(days=1, seconds=1)
    assert prunable(reported, day, consumer_state(reported, day, False))
    assert not prunable(reported, clock() + timedelta(hours=23), ConsumerState.LOST)
    assert not prunable(reported, day, consumer_state(reported, day, True))


def test_an_engage_is_acknowledged_only_by_a_report_that_saw_its_generation(clock):
    ack = Ack("fleet", "g2", engaged=True)
    assert acknowledges(entry(clock, observed=(("fleet", "g2"),)), ack)
    assert not acknowledges(entry(clock, observed=(("fleet", "g1"),)), ack)  # the hold it replaced
    assert not acknowledges(entry(clock), ack)


def test_a_release_is_acknowledged_only_by_a_later_report_that_no_longer_sees_it(clock):
    before = entry(clock, seq=7)
    ack = Ack("fleet", "g2", engaged=False, after_seq={before.key: 7})
    assert not acknowledges(before, ack)  # a report from before the release proves nothing
    assert not acknowledges(before.reported(clock(), (("fleet", "g2"),), "held"), ack)
    assert acknowledges(before.reported(clock(), (), "proceed"), ack)
    assert acknowledges(before.reported(clock(), (("fleet", "g3"),), "held"), ack)


def test_survey_waits_for_covered_live_and_stalled_consumers_and_lists_lost_ones(clock):
    seen = entry(clock, pid=1, observed=(("fleet", "g"),))
    behind = entry(clock, pid=2)
    stalled = entry(clock, pid=3, interval=1)
    gone = entry(clock, pid=4)
    elsewhere = entry(clock, pid=5, scopes=("alpha",))
    everywhere = entry(clock, pid=6, scopes=(ALL_SCOPES,), observed=(("fleet", "g"),))
    now = clock() + timedelta(seconds=3)
    found = survey([seen, behind, stalled, gone, elsewhere, everywhere], Ack("fleet", "g", engaged=True), now,
                   lambda e: e.pid != 4)
    assert [e.pid for e in found.acknowledged] == [1, 6]
    assert [(a.entry.pid, a.state) for a in found.awaited] == [(2, ConsumerState.LIVE), (3, ConsumerState.STALLED)]
    assert [e.pid for e in found.lost] == [4]
    assert not found.done


def test_roster_acknowledged_means_it_saw_exactly_the_holds_covering_it(clock):
    fleet = Location("fleet", Path("/f"))
    alpha = Location("alpha", Path("/f/profiles/alpha"))
    snapshot = Snapshot((Reading(fleet, HoldState.ABSENT, None, None),
                         Reading(alpha, HoldState.UNREADABLE, None, Fence(), "damaged")), clock())
    rows = roster_of([entry(clock, pid=1, scopes=("fleet",)),
                      entry(clock, pid=2, scopes=(ALL_SCOPES,)),
                      entry(clock, pid=3, scopes=(ALL_SCOPES,), observed=(("alpha", "?"),)),
                      entry(clock, pid=4, scopes=("fleet",), observed=(("fleet", "old"),))],
                     snapshot, lambda e: True).rows
    assert [(r.entry.pid, r.acknowledged) for r in rows] == [(1, True), (2, False), (3, True), (4, False)]


def test_entry_round_trips_and_damaged_documents_read_as_none(clock):
    original = entry(clock, observed=(("fleet", "g"),)).reported(clock() + timedelta(seconds=1), (("fleet", "g"),), "held")
    assert ConsumerEntry.decode(original.encode()) == original
    assert ConsumerEntry.decode(b"not json") is None
    assert ConsumerEntry.from_json({"pid": "7"}) is None


@pytest.mark.parametrize(("selector", "scope", "component", "scopes", "owed"), [
    (None, "fleet", "gateway", ("fleet",), True),  # a full hold: every consumer of its scope
    (None, "alpha", "cron", ("fleet",), False),  # another scope's hold
    (Selector.of(["kanban"]), "fleet", "kanban", ("fleet",), True),
    (Selector.of(["kanban"]), "fleet", "gateway", ("fleet",), False),
    (Selector.of(["kanban"]), "alpha", "kanban", (ALL_SCOPES,), True),
    (Selector.of(["kanban"]), "alpha", "kanban", ("fleet",), False),
    (Selector.of(["cron"], ["nightly-*"]), "fleet", "cron", ("fleet",), True),  # its jobs cannot be known
    (Selector.of(["cron"], ["nightly-*"]), "fleet", "apscheduler", ("fleet",), False),
    (Selector.of((), ["nightly-*"]), "fleet", "apscheduler", ("fleet",), True),  # jobs of every component
    (Selector(problem="unreadable"), "fleet", "gateway", ("fleet",), True),  # fail safe: covers all
])
def test_an_acknowledgement_is_owed_by_the_consumers_the_hold_covers_and_no_other(
        clock, selector, scope, component, scopes, owed):
    consumer = entry(clock, component=component, scopes=scopes)
    assert owes(consumer, Ack(scope, "g", engaged=True, selector=selector)) is owed
    found = survey([consumer], Ack(scope, "g", engaged=True, selector=selector), clock(), lambda e: True)
    assert (found.owed, found.not_owed) == (((consumer,), ()) if owed else ((), (consumer,)))
