"""Forecast over a window chain (issue 11 section 3): `WindowSource` plans one hold per occurrence
over `[arm_at, end)`; `Estop.forecast` merges them with the standing holds. On a fake clock,
across the fall-back night of Europe/Berlin (2026-10-25, 02:00-03:00 happens twice), with
windows back to back and overlapping, a drain lead, an excluded date and a skipped occurrence;
and checked against the real scheduler, instant by instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop import Estop, in_interval
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import EstopError
from hermes_estop.windows.forecast import MAX_OCCURRENCES, WindowSource, planned_holds, window_ahead
from hermes_estop.windows.ledger import SKIPPED, entry_for, open_ledger
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import occurrences
from hermes_estop.windows.windows_file import WindowsFile

BERLIN = "Europe/Berlin"
START = datetime(2026, 10, 24, 0, 0, tzinfo=UTC)  # Saturday, CEST (UTC+2)
END = datetime(2026, 10, 27, 0, 0, tzinfo=UTC)  # Tuesday, CET (UTC+1)

#: 01:00-02:00 local, not on 2026-10-26
EARLY = {"name": "early", "cron": "0 1 * * *", "timezone": BERLIN, "duration": "1h", "exclude": ["2026-10-26"]}
#: 02:00-03:00 local: back to back with `early`; admits 42
MIDDLE = {"name": "middle", "cron": "0 2 * * *", "timezone": BERLIN, "duration": "1h",
          "allow": {"user_ids": ["42"]}}
#: 02:30-03:30 local with a 15 min drain lead: overlaps `middle`
LATE = {"name": "late", "cron": "30 2 * * *", "timezone": BERLIN, "duration": "1h", "drain": "15m"}


def utc(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 10, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def fleet(fleet_root, clock):
    """The chain in windows.toml, `late`'s fall-back-night occurrence skipped by the operator."""
    clock.set(START - timedelta(hours=12))
    windows = [Window.parse(w) for w in (EARLY, MIDDLE, LATE)]
    WindowsFile(fleet_root).save(windows)
    late = Window.parse(LATE)
    fall_back = next(o for o in occurrences(late, utc(24, 12)))
    assert fall_back.ident == "2026-10-25T00:30:00+00:00"  # 02:30 CEST, the first of the two
    open_ledger(Fleet.of_files(fleet_root)).commit([entry_for(fall_back, SKIPPED, clock.now, None, "skipped by the operator (op@test)")])
    return Estop(home=fleet_root, root=fleet_root, clock=clock, actor="op@test")


def spans(forecast):
    return [(i.start, i.end) for i in forecast.intervals]


def test_forecast_over_a_window_chain_across_fall_back(fleet):
    forecast = fleet.forecast(START, END)
    assert spans(forecast) == [
        # Sat: early 01:00 CEST ended at START (half-open); middle 00:00Z-01:00Z, late drains 00:15Z, ends 01:30Z
        (utc(24, 0), utc(24, 1, 30)),
        # Sun (fall back): early 01:00 CEST = 23:00Z, middle 02:00 CEST (first of two) 00:00Z-01:00Z; late skipped
        (utc(24, 23), utc(25, 1)),
        # Mon (CET): early excluded; middle 01:00Z-02:00Z, late drains 01:15Z, ends 02:30Z
        (utc(26, 1), utc(26, 2, 30)),
    ]
    assert [sorted({h.source for h in i.holds}) for i in forecast.intervals] == [
        ["window:late", "window:middle"], ["window:early", "window:middle"], ["window:late", "window:middle"]]
    late = next(h for h in forecast.intervals[0].holds if h.source == "window:late")
    assert (late.start, late.until, late.occurrence) == (utc(24, 0, 15), utc(24, 1, 30), "2026-10-24T00:30:00+00:00")


def test_deny_wins_across_windows_of_the_chain(fleet):
    """42 works through `middle` but not through the windows that do not admit it."""
    assert spans(fleet.forecast(START, END, user_id="42")) == [
        (utc(24, 0, 15), utc(24, 1, 30)),
        (utc(24, 23), utc(25, 0)),
        (utc(26, 1, 15), utc(26, 2, 30)),
    ]


@pytest.mark.parametrize(("at", "held"), [
    (utc(24, 1, 29), True), (utc(24, 1, 30), False),  # half-open end of the chain
    (utc(24, 22, 59), False), (utc(24, 23), True),  # start of early on the fall-back night
    (utc(25, 0, 45), True), (utc(25, 1), False),  # late skipped: free once middle ends
    (utc(26, 0, 30), False),  # early excluded on 2026-10-26
    (utc(26, 1, 14), True), (utc(26, 2, 29), True),
])
def test_check_at_one_instant_of_the_chain(fleet, at, held):
    assert fleet.forecast(at, at).held is held


def test_a_chain_occurrence_that_started_before_the_range_counts(fleet):
    forecast = fleet.forecast(utc(24, 1), utc(24, 1, 10))
    assert spans(forecast) == [(utc(24, 1), utc(24, 1, 10))]
    assert [h.source for h in forecast.intervals[0].holds] == ["window:late"]


def test_a_disabled_window_and_a_window_on_another_scope_are_not_counted(fleet, fleet_root):
    WindowsFile(fleet_root).save([
        Window.parse({**EARLY, "enabled": False}),
        Window.parse({**MIDDLE, "scope": "dev"}),
    ])
    assert not fleet.forecast(START, END).held
    assert spans(fleet.forecast(START, END, profile="dev")) == [
        (utc(24, 0), utc(24, 1)), (utc(25, 0), utc(25, 1)), (utc(26, 1), utc(26, 2))]


def test_a_standing_hold_and_the_chain_merge(fleet):
    fleet.engage(reason="early start", expires_at=utc(24, 0, 10).isoformat(), fleet=True)
    first = fleet.forecast(START, END).intervals[0]
    assert (first.start, first.end) == (START, utc(24, 1, 30))
    assert "hold" in {h.source for h in first.holds}


def test_a_windows_file_that_does_not_validate_is_an_error_naming_it(fleet, fleet_root):
    (fleet_root / "windows.toml").write_text('[[windows]]\nname = "x"\ncron = "bad"\nduration = "1h"\n')
    with pytest.raises(EstopError, match=r"windows\.toml"):
        fleet.forecast(START, END)


def test_an_unreadable_ledger_counts_skipped_occurrences_as_held_with_a_note(fleet, fleet_root):
    (fleet_root / "windows-state.json").write_text("{not json")
    forecast = fleet.forecast(START, END)
    assert (utc(24, 23), utc(25, 1, 30)) in spans(forecast)  # late's skipped occurrence counts
    assert any("ledger" in note for note in forecast.notes)


def test_a_long_range_over_a_minutely_window_is_capped_and_assumed_held():
    window = Window.parse({"name": "minutely", "cron": "* * * * *", "duration": "30s",
                           "allow": {"user_ids": ["42"]}})
    holds = planned_holds(window_ahead(window, START), START + timedelta(days=365), limit=100)
    assert len(holds) == 101
    last = holds[-1]
    assert (last.start, last.until) == (START + timedelta(minutes=100), START + timedelta(days=365))
    assert "stopped after 100 occurrences" in (last.note or "")
    assert last.allow == window.hold_allow  # the assumption holds whom the window holds, no more
    assert all(h.note is None for h in holds[:-1])


def test_the_source_honours_its_cap_end_to_end(fleet_root, clock):
    WindowsFile(fleet_root).save([Window.parse({"name": "minutely", "cron": "* * * * *", "duration": "30s"})])
    estop = Estop(home=fleet_root, root=fleet_root, clock=clock)
    forecast = estop.forecast(START, START + timedelta(days=30), sources=[WindowSource()])
    assert forecast.intervals[-1].end == START + timedelta(days=30)
    assert forecast.intervals[-1].start == START + timedelta(minutes=MAX_OCCURRENCES)
    assert any(f"stopped after {MAX_OCCURRENCES} occurrences" in note for note in forecast.notes)


@pytest.mark.parametrize("user", [None, "42"])
def test_the_forecast_agrees_with_the_scheduler_instant_by_instant(harness, user):
    """What the forecast says at each instant is what the real scheduler (APScheduler date jobs
    on the fake clock) and the shared predicate do when the instant comes."""
    harness.clock.set(START - timedelta(hours=1))
    harness.write(*(Window.parse(w) for w in (EARLY, MIDDLE, LATE)))
    late = Window.parse(LATE)
    fall_back = next(o for o in occurrences(late, utc(24, 12)))
    harness.ledger.commit([entry_for(fall_back, SKIPPED, harness.clock.now, None, "skipped by the operator (op@test)")])
    forecast = harness.estop.forecast(START, END, user_id=user)
    harness.start()
    disagreements = []
    instant = START
    while instant < END:
        harness.run_until(instant)
        live = not harness.estop.gate(user).proceed
        if live != any(in_interval(instant, i.start, i.end) for i in forecast.intervals):
            disagreements.append((instant.isoformat(), live))
        instant += timedelta(minutes=5)
    assert disagreements == []
    assert forecast.held
