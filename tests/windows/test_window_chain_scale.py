"""The work one reconciliation pass does at scale (issue 24), counted, never timed: the chain of a
held scope is walked once (each window asked for its next occurrence once, each chained
occurrence's successor once; from the compiled schedule, with no cron step at all), and a scope where nothing covers
now and nothing is armed is decided without reading its sentinel."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import rows, scope_plan

from hermes_estop.model.hold import Allow, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.windows.ledger import ARMED, ENDED, entry_for
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import covering, following, occurrences
from hermes_estop.windows.plan import chain_end, idle
from hermes_estop.windows.schedule import ScheduleTimeline, build
from hermes_estop.windows.scheduler import PassState, TickReport

# the module, not the function `hermes_estop.windows` re-exports under the same name
occurrences_module = importlib.import_module("hermes_estop.windows.occurrences")
T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
SCOPE = Location("fleet", Path("/nonexistent"))


@pytest.fixture
def cron_steps(monkeypatch):
    """How many cron starts the occurrences of cron windows computed."""
    steps = [0]
    original = occurrences_module.cron_starts

    def counted(*args, **kwargs):
        for start in original(*args, **kwargs):
            steps[0] += 1
            yield start

    monkeypatch.setattr(occurrences_module, "cron_starts", counted)
    return steps


def relay(count: int) -> list[Window]:
    """`count` daily windows back to back: window k holds [12:00 + k h, 12:00 + (k+1) h)."""
    return [Window.parse({"name": f"w{k:03d}", "cron": f"0 {(12 + k) % 24} * * *", "duration": "1h",
                          "timezone": "UTC"}) for k in range(count)]


def test_chain_end_asks_each_window_once_not_once_per_step_of_the_chain(cron_steps):
    windows = rows(relay(20), T0 + timedelta(days=30))  # T0 before its horizon: asked of the exact functions
    members = covering(windows[0], T0)
    cron_steps[0] = 0
    # the relay runs to 08:00 the next day, then w000 starts again at 12:00 (a gap)
    assert chain_end(members, windows, T0) == T0 + timedelta(hours=20)
    # asked once per window for its first start, once per chained occurrence for the next:
    # rounds over every window for each step of the chain would be about 20 x 20
    assert cron_steps[0] <= 3 * len(windows) + 5


def test_chain_end_from_the_schedule_does_no_cron_step(cron_steps):
    """What the chain memo saved across passes (issue 24), the compiled schedule answers by
    bisection: walking the chain on every pass computes no cron start."""
    windows = relay(20)
    members = covering(windows[0], T0)
    exact = chain_end(members, rows(windows, T0 + timedelta(days=30)), T0)  # before its horizon: exact
    timeline = ScheduleTimeline(build("digest", windows, T0 - timedelta(hours=1)))
    cron_steps[0] = 0
    assert chain_end(members, timeline.windows, T0) == exact
    assert cron_steps[0] == 0


def test_chain_end_stops_at_the_limit_in_arm_order():
    windows = relay(20)
    members = covering(windows[0], T0)
    assert chain_end(members, rows(windows, T0 - timedelta(hours=1)), T0, limit=3) == T0 + timedelta(hours=4)


def test_following_is_the_next_occurrence_and_the_schedule_agrees():
    window = relay(1)[0]
    first, second, third = [o for _, o in zip(range(3), occurrences(window, T0), strict=False)]
    assert following(window, first) == second and following(window, second) == third
    timeline = ScheduleTimeline(build("digest", [window], T0))
    assert timeline.after(window, first) == second and timeline.after(window, second) == third
    edited = window.model_copy(update={"name": "other"})  # not a row of the schedule: the exact answer
    assert timeline.after(edited, first).window == "other"


class _Event:
    def __init__(self, ident: str) -> None:
        self.start, self.end, self.ident, self.uid, self.reason = T0, T0 + timedelta(hours=1), ident, ident, None


class _TwoEventsAtOnce:
    refused = refusal = None  # as a `Feed` whose expansion was never refused

    def events(self, since):
        return iter([_Event("a"), _Event("b")]) if since <= T0 else iter([])


class _CalendarWindow(Window):
    """A calendar window (as `calendars.CalendarWindow`) whose feed has two events at T0."""

    @property
    def feed(self):
        return _TwoEventsAtOnce()


def test_following_keeps_two_calendar_events_at_the_same_instant():
    window = _CalendarWindow.parse({"name": "cal", "at": T0.isoformat(), "duration": "1h"})
    first, second = list(occurrences(window, T0))
    assert (first.event, second.event) == ("a", "b")
    assert following(window, first) == second
    assert following(window, second) is None


READINGS = [
    Reading(SCOPE, HoldState.ABSENT),
    Reading(SCOPE, HoldState.ACTIVE, Hold("manual", T0, "by hand", None, Allow())),
    Reading(SCOPE, HoldState.ACTIVE, Hold("g1", T0, "ours?", T0 + timedelta(hours=1), Allow(), "window:w000",
                                           {"name": "w000", "occurrence": T0.isoformat()})),
    Reading(SCOPE, HoldState.UNREADABLE, problem="not JSON"),
]


@pytest.mark.parametrize("reading", READINGS, ids=["absent", "manual", "window-armed", "unreadable"])
def test_an_idle_scope_has_an_empty_plan_whatever_its_sentinel_holds(reading):
    windows = relay(3)
    now = T0 - timedelta(hours=2)  # nothing covers now
    ended = entry_for(covering(windows[0], T0)[0], ENDED, T0, "g0")
    entries = {ended.key: ended}
    assert idle([], entries)
    plan = scope_plan("fleet", now, rows(windows), entries, reading)
    assert not plan.actions and not plan.notes


def test_a_scope_with_an_armed_entry_or_a_covering_occurrence_is_not_idle():
    [occurrence] = covering(relay(1)[0], T0)
    armed = entry_for(occurrence, ARMED, T0, "g1")
    assert not idle([], {armed.key: armed})
    assert not idle([occurrence], {})


def test_pass_state_of_a_scope_follows_what_the_pass_remembers():
    [occurrence] = covering(relay(1)[0], T0)
    state = PassState(TickReport(now=T0), {})
    assert state.of("fleet") == {}
    entry = entry_for(occurrence, ARMED, T0, "g1")
    state.remember(entry)
    assert state.of("fleet") == {entry.key: entry}
    assert state.of("other") == {}


def test_a_pass_reads_only_the_scopes_with_something_to_decide(harness):
    now = harness.clock.now
    for name in ("a", "b", "c", "d"):
        (harness.root / "profiles" / name).mkdir(parents=True)
    harness.write(*[{"name": f"far-{name}", "at": (now + timedelta(days=3)).isoformat(), "duration": "1h",
                     "scope": name} for name in ("a", "b", "c")],
                  {"name": "now-d", "at": (now - timedelta(minutes=5)).isoformat(), "duration": "1h", "scope": "d"})
    fleet = harness.service.fleet
    read = fleet.read
    scopes_read: list[str] = []

    def counting(locations, when=None):
        scopes_read.extend(location.scope for location in locations)
        return read(locations, when)

    fleet.read = counting  # type: ignore[method-assign]
    report = harness.start()
    assert [e.kind for e in report.events] == ["arm"]
    assert set(scopes_read) == {"d"}
