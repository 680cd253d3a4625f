"""A crash between arming a window's hold and recording it in the ledger, then `hermes resume`,
then a restart, must not re-arm that occurrence (issue 9 item 2): the arm is remembered from
the audit trail (the scheduler's `window-arm` intent paired with the store's own `engage`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import StoreError
from hermes_estop.model.hold import HoldState
from hermes_estop.windows.ledger import ARMED, INTENT, RELEASED, intent_detail, recall


def crash_before_the_ledger_write(harness, monkeypatch, scope="fleet"):
    """`maint` (30 min, `scope`) is armed at its start, but its ledger write never happens."""
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "maint", "at": start.isoformat(), "duration": "30m", "scope": scope})
    harness.start()

    def die(*args, **kwargs):
        raise StoreError("the scheduler died here")

    monkeypatch.setattr(harness.service.ledger, "commit", die)
    harness.run_until(start)
    reading = harness.reading(scope)
    assert reading.state is HoldState.ACTIVE and harness.entries() == {}
    return start, reading.hold.generation


def test_a_hold_released_after_a_crash_before_the_ledger_write_is_not_rearmed_on_restart(harness, monkeypatch):
    start, generation = crash_before_the_ledger_write(harness, monkeypatch)
    harness.clock.set(start + timedelta(minutes=5))
    harness.estop.release(fleet=True)  # the operator's `hermes resume`
    harness.clock.set(start + timedelta(minutes=6))
    report = harness.restart()
    harness.run_until(start + timedelta(minutes=20), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("engage")] == [generation]
    assert [e.kind for e in report.events] == ["released"]
    entry = harness.entries()[f"fleet/maint@{start.isoformat()}"]
    assert entry.state == RELEASED and entry.generation == generation


def test_a_hold_still_standing_after_the_crash_is_adopted_and_retired_at_the_end(harness, monkeypatch):
    start, generation = crash_before_the_ledger_write(harness, monkeypatch, scope="ops")
    harness.clock.set(start + timedelta(minutes=5))
    harness.restart()
    assert harness.entries()[f"ops/maint@{start.isoformat()}"].state == ARMED
    harness.run_until(start + timedelta(minutes=30))
    assert [e.generation for e in harness.events("retire")] == [generation]


def test_a_crash_before_the_arm_itself_still_arms_on_restart(harness, monkeypatch):
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "maint", "at": start.isoformat(), "duration": "30m"})
    harness.start()

    def die(*args, **kwargs):
        raise StoreError("the scheduler died here")

    monkeypatch.setattr(harness.service.fleet, "engage", die)  # after the intent, before the write
    harness.run_until(start)
    assert harness.reading().state is HoldState.ABSENT and harness.events(INTENT)
    harness.clock.set(start + timedelta(minutes=1))
    harness.restart()
    hold = harness.reading().hold
    assert hold is not None and hold.armed_by == "window:maint"
    assert hold.expires_at == start + timedelta(minutes=30)


T = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
END = T + timedelta(hours=1)
KEY = f"fleet/maint@{T.isoformat()}"


def event(kind, minutes, generation=None, actor="sched@host", deadline=END, detail=None, location="fleet"):
    return AuditEvent(T + timedelta(minutes=minutes), kind, location, generation, actor, None, deadline, detail)


@pytest.mark.parametrize("events, expected", [
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g1")], {KEY: "g1"}),
    # the first write after the intent is ours; an operator's later re-arm (same deadline) is not
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g1"), event("rearm", 5, "g2")], {KEY: "g1"}),
    # an operator's pause written between the intent and our (failed) arm: another actor
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g0", actor="op@host")], {}),
    # another deadline, another scope: not ours
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g0", deadline=END + timedelta(1))], {}),
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g0", location="ops")], {}),
    # no intent at all (an operator's pause with the window's reason): nothing recalled
    ([event("engage", 0, "g0")], {}),
    # re-armed later by the scheduler (a chain grew): the latest arm wins
    ([event(INTENT, 0, detail=intent_detail([KEY])), event("engage", 0, "g1"),
      event(INTENT, 3, detail=intent_detail([KEY, "fleet/b@x"])), event("rearm", 3, "g2")], {KEY: "g2"}),
])
def test_recall_pairs_each_intent_with_the_first_write_after_it(events, expected):
    assert recall(events, "fleet", {KEY}) == expected
