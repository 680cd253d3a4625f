"""An edit that moves a covering window to another scope moves coverage (docs/design.md §8a,
issue 45): the new scope is held at the next read, the old one stays held until the edit is
confirmed (the stability rule), then only the new one holds. On the fake clock, with the real
scheduler, ledger and sentinels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hermes_estop.windows.ledger import RELEASED

EPOCH = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the `clock` fixture's start
START = EPOCH + timedelta(hours=1)
CONFIRM = timedelta(seconds=5)  # the service's stability period (WEAKEN_AFTER)


def maint(scope: str) -> dict:
    return {"name": "maint", "at": START.isoformat(), "duration": "1h", "reason": "db", "scope": scope}


def poll(harness, after: timedelta):
    harness.run_until(START + timedelta(minutes=1) + after, poll=True)
    return harness.reports[-1]


def test_a_scope_edit_holds_the_new_scope_at_the_next_read_and_the_old_until_confirmed(harness):
    harness.write(maint("pa"))
    harness.start()
    harness.run_until(START)
    assert harness.engaged_at(harness.clock.now, "pa") and not harness.engaged_at(harness.clock.now, "pb")
    harness.write(maint("pb"))
    assert poll(harness, timedelta(0)).pending
    now = harness.clock.now
    assert harness.engaged_at(now, "pb"), "the new scope is free until the edit is confirmed"
    assert harness.engaged_at(now, "pa"), "the old scope was lifted before the edit was confirmed"
    assert poll(harness, CONFIRM - timedelta(seconds=1)).pending
    now = harness.clock.now
    assert harness.engaged_at(now, "pb") and harness.engaged_at(now, "pa")
    poll(harness, CONFIRM)
    now = harness.clock.now
    assert harness.engaged_at(now, "pb") and not harness.engaged_at(now, "pa")
    assert harness.reading("pb").hold.expires_at == START + timedelta(hours=1)
    assert [k for k, e in harness.entries().items() if e.state == RELEASED] == []


def test_a_scope_edit_back_before_confirmation_keeps_the_first_scope_and_frees_the_other_once_confirmed(harness):
    harness.write(maint("pa"))
    harness.start()
    harness.run_until(START)
    harness.write(maint("pb"))
    poll(harness, timedelta(0))
    harness.write(maint("pa"))
    poll(harness, timedelta(seconds=1))
    now = harness.clock.now
    assert harness.engaged_at(now, "pa") and harness.engaged_at(now, "pb")
    poll(harness, CONFIRM * 3)
    now = harness.clock.now
    assert harness.engaged_at(now, "pa") and not harness.engaged_at(now, "pb")
