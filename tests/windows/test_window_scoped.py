"""Windows with `only` / `jobs` (issue 26): each arms a scoped hold at its start with its end as the
deadman, beside whatever else stands at the scope, and its expiry retires exactly that hold."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_estop.model.hold import HoldState
from hermes_estop.windows.model import InvalidWindow, Window


def at_window(harness, name, start_in, duration, **extra):
    start = harness.clock.now + start_in
    return {"name": name, "at": start.isoformat(), "duration": duration, **extra}, start


def scoped(harness):
    return {s.hold.hold_id: s for s in harness.reading().scoped}


def test_a_kanban_only_window_arms_a_scoped_hold_and_retires_it_alone(harness):
    kanban, start = at_window(harness, "kanban-migration", timedelta(hours=1), "30m", only=["kanban"],
                              reason="migrating kanban.db")
    harness.write(kanban)
    harness.start()
    harness.run_until(start)
    reading = harness.reading()
    assert reading.state is HoldState.ABSENT  # no full hold: only kanban work is held
    (hold,) = [s.hold for s in reading.scoped]
    assert hold.selector.components == {"kanban"} and hold.expires_at == start + timedelta(minutes=30)
    assert hold.armed_by == "window:kanban-migration"
    assert harness.estop.gate(None, None, "cron", "nightly") and not harness.estop.gate(None, None, "kanban")
    operator = harness.estop.engage(reason="everything", fleet=True)
    harness.run_until(start + timedelta(minutes=30), poll=True)
    reading = harness.reading()
    assert reading.scoped == () and reading.hold.generation == operator.generation


def test_a_full_window_and_a_scoped_window_on_one_scope_each_hold_their_own(harness):
    full, start = at_window(harness, "full", timedelta(hours=1), "20m")
    nightly, _ = at_window(harness, "nightly", timedelta(hours=1), "40m", only=["cron"], jobs=["nightly-*"])
    harness.write(full, nightly)
    harness.start()
    harness.run_until(start)
    reading = harness.reading()
    assert reading.state is HoldState.ACTIVE and len(reading.scoped) == 1
    harness.run_until(start + timedelta(minutes=20), poll=True)
    reading = harness.reading()
    assert reading.state is HoldState.ABSENT and len(reading.scoped) == 1
    assert not harness.estop.gate(None, None, "cron", "nightly-db") and harness.estop.gate(None, None, "cron", "x")
    harness.run_until(start + timedelta(minutes=40), poll=True)
    assert harness.reading().scoped == ()


def test_an_operator_scoped_hold_with_the_same_selector_is_never_replaced(harness):
    window, start = at_window(harness, "kanban", timedelta(hours=1), "30m", only=["kanban"])
    harness.write(window)
    theirs = harness.estop.engage(reason="mine", only=["kanban"], fleet=True)
    harness.start()
    harness.run_until(start)
    (standing,) = harness.reading().scoped
    assert standing.hold.generation == theirs.generation and standing.hold.reason == "mine"


@pytest.mark.parametrize("field, value", [("only", "kanban"), ("only", [""]), ("jobs", ["a\x07"]), ("only", [3])])
def test_a_bad_selector_in_windows_toml_is_named(field, value):
    with pytest.raises(InvalidWindow, match=field):
        Window.parse({"name": "w", "at": "2030-01-01T00:00:00Z", "duration": "1h", field: value})


def test_only_and_jobs_round_trip_through_toml_and_json():
    window = Window.parse({"name": "w", "at": "2030-01-01T00:00:00Z", "duration": "1h", "only": ["cron"],
                           "jobs": ["nightly-*"]})
    assert window.to_toml()["only"] == ["cron"] and window.to_json()["jobs"] == ["nightly-*"]
    assert "only" not in Window.parse({"name": "v", "at": "2030-01-01T00:00:00Z", "duration": "1h"}).to_toml()
