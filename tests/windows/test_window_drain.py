"""A window's drain lead (issue 11 §1, `drain = "15m"`), on the fake clock with a real APScheduler
(conftest.Harness): the hold arms exactly `drain` before the start with the reason "draining for
<window>" and the window's end as its deadline; at the start the reason becomes the window's own
(our hold re-armed, fenced on its generation); the expiry retires exactly that generation; a
restart inside the lead arms for the remainder; an operator's re-arm during the lead survives
the start and the end. Plus the model's validation of the field and the occurrence arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import rows, wakeups_for

from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import HoldState
from hermes_estop.windows.ledger import ARMED, ENDED, RELEASED
from hermes_estop.windows.model import MAX_REASON, InvalidWindow, Window, WindowsDocument, reason_of
from hermes_estop.windows.occurrences import covering, next_armed, upcoming
from hermes_estop.windows.plan import chain_end
from hermes_estop.windows.schedule import Part, Schedules
from hermes_estop.windows.scheduler import due_wakeups
from hermes_estop.windows.skips import pick
from hermes_estop.windows.windows_file import WindowsFile

US = timedelta(microseconds=1)
DRAIN = timedelta(minutes=15)
LENGTH = timedelta(minutes=30)


def drained(harness, name="maint", start_in=timedelta(hours=1), **extra):
    """A one-shot window `start_in` from now, 30 minutes long, with a 15-minute drain lead."""
    start = harness.clock.now + start_in
    window = {"name": name, "at": start.isoformat(), "duration": "30m", "drain": "15m", **extra}
    return window, start


def key(start, name="maint", scope="fleet"):
    return f"{scope}/{name}@{start.isoformat()}"


# -- the scheduler ------------------------------------------------------------------------------


def test_hold_arms_exactly_drain_before_start_with_the_draining_reason_and_the_end_as_deadline(harness):
    window, start = drained(harness, reason="db migration", allow={"user_ids": ["424242"]})
    harness.write(window)
    harness.start()
    assert harness.jobs() == {"windows:drain:maint": start - DRAIN}
    harness.run_until(start - DRAIN - US)
    assert harness.reading().state is HoldState.ABSENT
    assert not harness.engaged_at(start - DRAIN - US)
    fired = harness.run_until(start - DRAIN)
    assert fired == ["windows:drain:maint"]
    hold = harness.reading().hold
    assert harness.reading().state is HoldState.ACTIVE
    assert hold.reason == "draining for maint: db migration"
    assert hold.engaged_at == start - DRAIN
    assert hold.expires_at == start + LENGTH
    assert hold.armed_by == "window:maint"
    assert hold.window == {"name": "maint", "occurrence": start.isoformat()}
    assert hold.allow.admits("424242", None) and not hold.allow.admits("1", None)
    assert harness.jobs() == {"windows:start:maint": start, "windows:end:maint": start + LENGTH}
    assert harness.entries()[key(start)].state == ARMED
    assert harness.entries()[key(start)].generation == hold.generation


def test_draining_reason_without_a_window_reason_names_the_window(harness):
    window, start = drained(harness)
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    assert harness.reading().hold.reason == "draining for maint"
    harness.run_until(start)
    assert harness.reading().hold.reason == "maintenance window maint"


def test_at_the_start_the_reason_becomes_the_windows_own_keeping_allow_and_deadline(harness):
    window, start = drained(harness, reason="db migration", allow={"user_ids": ["424242"]})
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    draining = harness.reading().hold
    harness.run_until(start - US)
    assert harness.reading().hold.reason == "draining for maint: db migration"
    fired = harness.run_until(start)
    assert fired == ["windows:start:maint"]
    hold = harness.reading().hold
    assert hold.reason == "db migration"
    assert hold.expires_at == draining.expires_at == start + LENGTH
    assert hold.allow == draining.allow
    assert (hold.armed_by, hold.window) == (draining.armed_by, draining.window)
    assert hold.generation != draining.generation
    entry = harness.entries()[key(start)]
    assert (entry.state, entry.generation) == (ARMED, hold.generation)
    audited = [(e.event, e.generation) for e in harness.events() if e.event in ("engage", "rearm", "release", "retire")]
    assert audited == [("engage", draining.generation), ("rearm", hold.generation)]
    assert harness.jobs() == {"windows:end:maint": start + LENGTH}


def test_expiry_retires_the_generation_the_start_switch_armed(harness):
    window, start = drained(harness, reason="db migration")
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    draining = harness.reading().hold.generation
    harness.run_until(start)
    generation = harness.reading().hold.generation
    assert generation != draining
    harness.run_until(start + LENGTH - US)
    assert harness.reading().state is HoldState.ACTIVE
    fired = harness.run_until(start + LENGTH)
    assert fired[-1] == "windows:end:maint"
    assert harness.reading().state is HoldState.ABSENT
    [retire] = harness.events("retire")
    assert (retire.generation, retire.time) == (generation, start + LENGTH)
    assert harness.entries()[key(start)].state == ENDED
    assert harness.jobs() == {}


@pytest.mark.parametrize("late", [timedelta(0), timedelta(minutes=5), DRAIN - US])
def test_restart_inside_the_drain_lead_arms_for_the_remainder(harness, late):
    window, start = drained(harness, reason="db migration")
    harness.write(window)
    harness.clock.set(start - DRAIN + late)  # the scheduler was down when the lead began
    harness.start()
    hold = harness.reading().hold
    assert hold.reason == "draining for maint: db migration"
    assert hold.engaged_at == start - DRAIN + late
    assert hold.expires_at == start + LENGTH
    assert harness.jobs() == {"windows:start:maint": start, "windows:end:maint": start + LENGTH}
    harness.run_until(start)
    assert harness.reading().hold.reason == "db migration"


def test_restart_inside_the_lead_with_its_hold_standing_keeps_it(harness):
    window, start = drained(harness)
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    generation = harness.reading().hold.generation
    harness.clock.set(start - timedelta(minutes=5))
    harness.restart()
    assert harness.reading().hold.generation == generation
    assert [e.event for e in harness.events("engage")] == ["engage"]


def test_operator_rearm_during_the_lead_survives_the_start_switch_and_the_end(harness):
    window, start = drained(harness, reason="db migration")
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    ours = harness.reading().hold.generation
    harness.run_until(start - timedelta(minutes=5))
    theirs = harness.estop.engage(reason="by hand", ttl="2h", fleet=True)
    fired = harness.run_until(start, poll=True)
    assert "windows:start:maint" in fired
    hold = harness.reading().hold
    assert (hold.generation, hold.reason) == (theirs.generation, "by hand")
    harness.run_until(start + LENGTH, poll=True)
    hold = harness.reading().hold
    assert harness.reading().state is HoldState.ACTIVE
    assert (hold.generation, hold.reason) == (theirs.generation, "by hand") and theirs.generation != ours
    assert hold.expires_at == start - timedelta(minutes=5) + timedelta(hours=2)
    assert harness.events("retire") == []
    assert harness.entries()[key(start)].state == RELEASED


def test_operator_release_during_the_lead_is_not_rearmed_at_the_start(harness):
    window, start = drained(harness)
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    harness.run_until(start - timedelta(minutes=5))
    harness.estop.release(fleet=True)
    harness.run_until(start + timedelta(minutes=1), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    assert harness.entries()[key(start)].state == RELEASED


def test_a_manual_hold_standing_when_the_lead_begins_is_not_replaced(harness):
    window, start = drained(harness)
    harness.write(window)
    harness.start()
    manual = harness.estop.engage(reason="manual", fleet=True)
    harness.run_until(start - DRAIN - US)
    assert key(start) not in harness.entries()
    harness.run_until(start - DRAIN)
    assert harness.entries()[key(start)].state == "skipped"
    assert [e.detail for e in harness.events("skip")] == [
        f"window maint occurrence {start.isoformat()} skipped: fleet is held by generation {manual.generation} "
        "(armed by operator@test), which the window did not arm"]
    harness.run_until(start + timedelta(minutes=1), poll=True)
    hold = harness.reading().hold
    assert (hold.generation, hold.reason) == (manual.generation, "manual")
    assert harness.entries()[key(start)].state == "skipped"


def test_a_cron_window_drains_before_every_occurrence(harness):
    harness.clock.set(datetime(2026, 6, 1, tzinfo=UTC))
    harness.write({"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h",
                   "drain": "20m"})
    harness.start()
    first = datetime(2026, 6, 1, 0, 30, tzinfo=UTC)  # 02:30 CEST
    assert harness.jobs() == {"windows:drain:nightly": first - timedelta(minutes=20)}
    harness.run_until(first + timedelta(hours=1))
    assert harness.reading().state is HoldState.ABSENT
    assert harness.jobs() == {"windows:drain:nightly": first + timedelta(days=1, minutes=-20)}
    retired = harness.events("retire")
    assert len(retired) == 1


def test_the_chain_counts_a_drain_lead_so_the_scope_stays_held(harness):
    """A window whose drain lead begins before the previous window ends extends the first
    hold's deadline at once: the deadman never lifts the scope in between."""
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "first", "at": start.isoformat(), "duration": "1h"},
                  {"name": "second", "at": (start + timedelta(minutes=70)).isoformat(), "duration": "30m",
                   "drain": "15m"})
    harness.start()
    harness.run_until(start)
    assert harness.reading().hold.expires_at == start + timedelta(minutes=100)
    seen = []
    harness.run_until(start + timedelta(minutes=100), each=lambda now: seen.append(harness.engaged_at(now)))
    assert all(seen[:-1])
    assert harness.reading().state is HoldState.ABSENT


# -- occurrences and wake-ups ---------------------------------------------------------------------

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def window(**extra) -> Window:
    return Window.parse({"name": "w", "at": T0.isoformat(), "duration": "1h", "drain": "15m", **extra})


def test_an_occurrence_covers_its_drain_lead_half_open():
    [occurrence] = upcoming(window(), T0 - timedelta(hours=2), 1)
    assert occurrence.lead == DRAIN and occurrence.arm_at == T0 - DRAIN
    assert not occurrence.covers(T0 - DRAIN - US)
    assert occurrence.covers(T0 - DRAIN) and occurrence.draining(T0 - DRAIN)
    assert occurrence.covers(T0) and not occurrence.draining(T0)
    assert not occurrence.covers(T0 + timedelta(hours=1))
    assert covering(window(), T0 - DRAIN - US) == []
    assert [o.start for o in covering(window(), T0 - DRAIN)] == [T0]


def test_occurrence_json_shows_the_drain_start():
    [occurrence] = upcoming(window(), T0 - timedelta(hours=2), 1)
    data = occurrence.to_json(T0 - timedelta(minutes=5), UTC)
    assert data["drain_from"] == (T0 - DRAIN).isoformat()
    assert data["active"] is True and data["draining"] is True
    [plain] = upcoming(Window.parse({"name": "p", "at": T0.isoformat(), "duration": "1h"}), T0 - timedelta(hours=2), 1)
    assert plain.to_json(None, UTC)["drain_from"] is None


@pytest.mark.parametrize("now", [T0 - timedelta(hours=3), T0 - DRAIN - US])
def test_the_schedule_and_the_wakeups_wake_at_the_drain_start(now, tmp_path):
    w = window()
    listed = Schedules(tmp_path / "windows.toml").compose([Part.of(w)], now)
    timeline = listed.timeline
    assert timeline.covering_now(listed, now) == {}
    assert timeline.first_armed(w, now).arm_at == T0 - DRAIN
    assert next_armed(w, now).start == T0
    assert due_wakeups(timeline, listed, {}, now) == wakeups_for([w], now) == {"windows:drain:w": T0 - DRAIN}
    covered = timeline.covering_now(listed, T0 - DRAIN)
    assert [o.start for o in covered["w"]] == [T0]
    assert due_wakeups(timeline, listed, covered, T0 - DRAIN) == wakeups_for([w], T0 - DRAIN) == {
        "windows:start:w": T0, "windows:end:w": T0 + timedelta(hours=1)}


def test_chain_end_links_an_occurrence_whose_lead_begins_at_the_lift():
    a = Window.parse({"name": "a", "at": T0.isoformat(), "duration": "1h"})
    b = Window.parse({"name": "b", "at": (T0 + timedelta(hours=1, minutes=15)).isoformat(), "duration": "1h",
                      "drain": "15m"})
    [first] = covering(a, T0)
    assert chain_end([first], rows([a, b], T0), T0) == T0 + timedelta(hours=2, minutes=15)
    late = b.model_copy(update={"drain": timedelta(minutes=14)})
    assert chain_end([first], rows([a, late], T0), T0) == T0 + timedelta(hours=1)


def test_an_occurrence_in_its_drain_lead_cannot_be_skipped():
    with pytest.raises(EstopError, match="already started"):
        pick(window(), T0 - timedelta(minutes=5), start=T0)
    assert pick(window(), T0 - DRAIN - US, start=T0).start == T0


# -- the model ------------------------------------------------------------------------------------

GOOD = {"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h"}


@pytest.mark.parametrize(
    "drain, words",
    [
        pytest.param("0", "must be positive", id="zero"),
        pytest.param("0s", "must be positive", id="zero-unit"),
        pytest.param("-15m", "must be positive", id="negative"),
        pytest.param("soon", "'soon'", id="garbage"),
        pytest.param("24h1s", "24h bound", id="just-too-long"),
        pytest.param("2d", "24h bound", id="too-long"),
        pytest.param("367d", "366-day bound", id="way-too-long"),
        pytest.param(["15m"], "expected e.g. 45m", id="not-text"),
    ],
)
def test_a_bad_drain_is_refused_naming_the_file_window_and_field(tmp_path: Path, drain, words):
    with pytest.raises(InvalidWindow) as caught:
        Window.parse({**GOOD, "drain": drain})
    assert caught.value.field == "drain" and words in str(caught.value)
    (tmp_path / "windows.toml").write_text(
        '[[windows]]\nname = "nightly"\ncron = "30 2 * * *"\nduration = "1h"\n'
        f"drain = {drain!r}\n".replace("'", '"'))
    with pytest.raises(InvalidWindow) as caught:
        WindowsFile(tmp_path).load()
    message = str(caught.value)
    assert str(tmp_path / "windows.toml") in message and "window 'nightly'" in message
    assert "field 'drain'" in message and words in message


@pytest.mark.parametrize("drain, text", [("15m", "15m"), ("PT1H30M", "1h30m"), ("24h", "1d"), ("90s", "1m30s")])
def test_drain_round_trips_through_toml_and_json(tmp_path: Path, drain, text):
    window = Window.parse({**GOOD, "drain": drain})
    assert window.to_toml()["drain"] == text and window.to_json()["drain"] == text
    WindowsFile(tmp_path).save([window])
    [loaded] = WindowsFile(tmp_path).load()
    assert loaded == window and loaded.drain == window.drain
    assert Window.parse(window.to_json()) == window


def test_no_drain_is_left_out_of_the_file_and_the_json():
    window = Window.parse(GOOD)
    assert window.drain is None and "drain" not in window.to_toml() and "drain" not in window.to_json()


def test_the_schema_describes_drain():
    prop = WindowsDocument.model_json_schema()["$defs"]["Window"]["properties"]["drain"]
    assert prop["type"] == "string" and "drain" not in WindowsDocument.model_json_schema()["$defs"]["Window"].get("required", [])


def test_the_draining_reason_stays_within_max_reason():
    window = Window.parse({**GOOD, "drain": "15m", "reason": "x" * MAX_REASON})
    draining = reason_of(window.name, window.reason, draining=True)  # what the plan arms a lead with
    assert len(draining) <= MAX_REASON and draining.startswith("draining for nightly: x")


def test_a_lead_overlapping_the_previous_occurrence_keeps_the_scope_held_without_a_gap(harness):
    """Hourly, 50 minutes long, drained 15 minutes ahead: each lead begins while the previous
    occurrence holds, so the scope is held from the first arm until the last end."""
    harness.clock.set(datetime(2026, 6, 1, 9, 30, tzinfo=UTC))
    harness.write({"name": "hourly", "cron": "0 * * * *", "duration": "50m", "drain": "15m",
                   "not_after": "2026-06-01T12:30:00Z"})
    harness.start()
    first = datetime(2026, 6, 1, 10, tzinfo=UTC)
    seen = []
    harness.run_until(first - DRAIN)
    reasons = {harness.reading().hold.reason}
    harness.run_until(datetime(2026, 6, 1, 12, 50, tzinfo=UTC) - US,
                      each=lambda now: (seen.append(harness.engaged_at(now)),
                                        reasons.add(harness.reading().hold.reason)))
    assert seen and all(seen)
    assert harness.reading().hold.expires_at == datetime(2026, 6, 1, 12, 50, tzinfo=UTC)
    assert "draining for hourly" in reasons and "maintenance window hourly" in reasons
    harness.run_until(datetime(2026, 6, 1, 12, 50, tzinfo=UTC))
    assert harness.reading().state is HoldState.ABSENT


def test_a_start_switch_the_ledger_missed_is_adopted_and_still_retired_at_the_end(harness):
    """The scheduler dies after re-arming at the start and before committing the ledger: a
    restart recognises the re-armed hold by its body and the expiry retires exactly it."""
    window, start = drained(harness)
    harness.write(window)
    harness.start()
    harness.run_until(start - DRAIN)
    stale = harness.entries()[key(start)]
    harness.run_until(start)
    switched = harness.reading().hold.generation
    assert switched != stale.generation
    harness.ledger.commit([stale])  # what the ledger said before the switch
    harness.clock.set(start + timedelta(minutes=1))
    harness.restart()
    assert harness.reading().hold.generation == switched
    assert harness.entries()[key(start)].generation == switched
    harness.run_until(start + LENGTH)
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [switched]
