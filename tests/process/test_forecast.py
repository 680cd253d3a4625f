"""`hermes_estop.process.forecast`: the pure forecast over planned holds (issue 11 section 3) and the shell
`Estop.forecast` runs (standing holds from the store, planned holds from sources)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop import Estop
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.hold import Allow
from hermes_estop.model.homes import Layout
from hermes_estop.process.forecast import (
    INSTANT,
    HoldSource,
    PlannedHold,
    discover_sources,
    forecast_holds,
)

T0 = datetime(2026, 12, 3, 0, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def hold(scope: str, start: float | None, until: float | None, users: tuple[str, ...] = (),
         profiles: tuple[str, ...] = (), *, readable: bool = True, source: str = "hold") -> PlannedHold:
    return PlannedHold(scope, None if start is None else at(start), None if until is None else at(until),
                       Allow(frozenset(users), frozenset(profiles)), f"{scope} {start}-{until}", source,
                       readable=readable, problem=None if readable else "not JSON")


@pytest.fixture
def ops_locations(fleet_root):
    """The candidates of a process serving profile `ops`: its home, then the fleet root."""
    return Layout(home=fleet_root, root=fleet_root).for_profile("ops").candidates


def spans(forecast) -> list[tuple[float, float]]:
    return [((i.start - T0).total_seconds() / 60, (i.end - T0).total_seconds() / 60) for i in forecast.intervals]


@pytest.mark.parametrize(
    ("planned", "user", "profile", "expected"),
    [
        pytest.param([hold("fleet", 10, 20, ("42",)), hold("ops", 15, 30)], "42", "ops", [(15, 30)],
                     id="deny-wins-profile-hold-refuses-what-the-fleet-hold-admits"),
        pytest.param([hold("fleet", 10, 20), hold("ops", 5, 30, ("42",))], "42", "ops", [(10, 20)],
                     id="deny-wins-permissive-profile-hold-cannot-weaken-the-fleet-hold"),
        pytest.param([hold("fleet", 10, 20, ("42",))], "42", None, [], id="allowlisted-principal-admitted"),
        pytest.param([hold("fleet", 10, 20, ("42",))], "43", None, [(10, 20)], id="other-principal-held"),
        pytest.param([hold("fleet", 10, 20, ("42",))], None, "ops", [(10, 20)], id="profile-alone-admits-nobody"),
        pytest.param([hold("fleet", 10, 20, ("42",), ("ops",))], "42", "ops", [], id="profile-narrows-listed"),
        pytest.param([hold("fleet", 10, 20, ("42",), ("dev",))], "42", "ops", [(10, 20)], id="profile-narrows-unlisted"),
        pytest.param([hold("fleet", None, 25)], None, None, [(0, 25)], id="deadman-ends-a-standing-hold"),
        pytest.param([hold("fleet", None, None)], None, None, [(0, 60)], id="open-ended-hold-holds-to-the-end"),
        pytest.param([hold("fleet", 10, 20), hold("fleet", 20, 30)], None, None, [(10, 30)],
                     id="back-to-back-holds-leave-no-free-instant"),
        pytest.param([hold("fleet", 10, 20), hold("fleet", 21, 30)], None, None, [(10, 20), (21, 30)],
                     id="a-gap-is-free"),
        pytest.param([hold("fleet", 10, 40), hold("fleet", 20, 30, ("42",))], "42", None, [(10, 40)],
                     id="overlap-with-a-permissive-hold-stays-held"),
        pytest.param([hold("fleet", 10, 20, ("42",), readable=False)], "42", None, [(10, 20)],
                     id="unreadable-hold-admits-nobody"),
        pytest.param([hold("dev", 10, 20)], None, None, [], id="a-scope-the-principal-does-not-see-is-ignored"),
        pytest.param([hold("fleet", -30, 0)], None, None, [], id="a-hold-ending-at-start-is-over-half-open"),
        pytest.param([hold("fleet", 60, 90)], None, None, [], id="a-hold-starting-at-end-is-outside-half-open"),
    ],
)
def test_forecast_holds_gives_the_held_intervals(ops_locations, planned, user, profile, expected):
    forecast = forecast_holds(planned, at(0), at(60), ops_locations, user, profile)
    assert spans(forecast) == expected
    assert forecast.held is bool(expected)


def test_forecast_names_the_holds_that_refuse_with_their_times(ops_locations):
    strict = hold("fleet", 10, 20)
    lenient = hold("ops", 5, 30, ("42",))
    forecast = forecast_holds([strict, lenient], at(0), at(60), ops_locations, "42", "ops")
    assert [i.holds for i in forecast.intervals] == [(strict,)]
    data = forecast.to_json()
    assert data["held"] is True
    assert data["intervals"] == [{"start": at(10).isoformat(), "end": at(20).isoformat(),
                                  "holds": [strict.to_json()]}]
    assert data["intervals"][0]["holds"][0]["from"] == at(10).isoformat()
    assert data["intervals"][0]["holds"][0]["until"] == at(20).isoformat()


def test_merged_interval_lists_every_refusing_hold_once(ops_locations):
    first, second = hold("fleet", 10, 20, source="window:a"), hold("fleet", 15, 30, source="window:b")
    forecast = forecast_holds([second, first, first], at(0), at(60), ops_locations)
    assert spans(forecast) == [(10, 30)]
    assert forecast.intervals[0].holds == (first, second)


def test_an_instant_is_held_exactly_where_the_half_open_interval_says(ops_locations):
    planned = [hold("fleet", 10, 20)]
    assert forecast_holds(planned, at(10), at(10) + INSTANT, ops_locations).held
    assert not forecast_holds(planned, at(20), at(20) + INSTANT, ops_locations).held
    assert forecast_holds(planned, at(20) - INSTANT, at(20), ops_locations).held


def test_a_range_ending_before_it_starts_is_refused(ops_locations):
    with pytest.raises(InvalidArgument, match="before start"):
        forecast_holds([], at(10), at(0), ops_locations)


# -- Estop.forecast: standing holds from the store, planned holds from sources ------------------


class Planned:
    """A HoldSource that plans fixed holds."""

    def __init__(self, *planned: PlannedHold) -> None:
        self.planned_holds = planned
        self.calls: list[tuple[datetime, datetime]] = []

    def planned(self, estop, start, end):
        self.calls.append((start, end))
        return self.planned_holds


class Broken:
    def planned(self, estop, start, end):
        raise EstopError("windows.toml: does not validate")


@pytest.fixture
def estop(fleet_root, clock):
    clock.set(T0)
    return Estop(home=fleet_root, root=fleet_root, clock=clock, actor="op@test")


@pytest.mark.parametrize(("ttl", "expected"), [("25m", [(0, 25)]), (None, [(0, 60)])],
                         ids=["deadman-ends-it", "open-ended"])
def test_estop_forecast_counts_the_standing_hold_until_its_deadman(estop, ttl, expected):
    estop.engage(reason="upgrade", ttl=ttl, fleet=True)
    forecast = estop.forecast(at(0), at(60), sources=[])
    assert spans(forecast) == expected
    (standing,) = forecast.intervals[0].holds
    assert standing.source == "hold" and standing.reason == "upgrade" and standing.generation


def test_estop_forecast_admits_the_allowlisted_user_through_a_standing_hold(estop):
    estop.engage(allow={"user_ids": ["42"]}, ttl="25m", fleet=True)
    assert not estop.forecast(at(0), at(60), user_id="42", sources=[]).held
    assert estop.forecast(at(0), at(60), user_id="43", sources=[]).held


def test_estop_forecast_adds_what_the_sources_plan(estop):
    source = Planned(hold("fleet", 30, 45, source="window:nightly"))
    forecast = estop.forecast(at(0), at(60), sources=[source])
    assert spans(forecast) == [(30, 45)]
    assert source.calls == [(at(0), at(60))]


def test_estop_forecast_of_a_profile_sees_that_profile_and_the_fleet(estop):
    source = Planned(hold("ops", 10, 20), hold("dev", 30, 40), hold("fleet", 50, 55))
    assert spans(estop.forecast(at(0), at(60), profile="ops", sources=[source])) == [(10, 20), (50, 55)]
    assert spans(estop.forecast(at(0), at(60), sources=[source])) == [(50, 55)]


def test_estop_forecast_of_one_instant(estop):
    source = Planned(hold("fleet", 10, 20))
    assert estop.forecast(at(10), at(10), sources=[source]).held
    assert not estop.forecast(at(20), at(20), sources=[source]).held


def test_a_source_that_cannot_tell_is_an_error_never_free(estop):
    with pytest.raises(EstopError, match="does not validate"):
        estop.forecast(at(0), at(60), sources=[Broken()])


@pytest.mark.parametrize(("start", "end", "user", "profile", "match"), [
    ("tomorrow", at(60), None, None, "forecast start"),
    (at(60), at(0), None, None, "before start"),
    (at(0), at(60), "4\x1b2", None, "user id"),
    (at(0), at(60), None, "fleet", "fleet"),
])
def test_estop_forecast_refuses_bad_input_in_one_line(estop, start, end, user, profile, match):
    with pytest.raises(EstopError, match=match):
        estop.forecast(start, end, user, profile, sources=[])


def test_the_windows_source_is_registered_as_an_entry_point():
    from hermes_estop.windows.forecast import WindowSource

    sources = discover_sources()
    assert [type(s) for s in sources] == [WindowSource]
    assert all(isinstance(s, HoldSource) for s in sources)


def test_a_forecast_reads_as_the_sequence_of_its_held_intervals(ops_locations):
    forecast = forecast_holds([hold("fleet", 10, 20), hold("fleet", 30, 40)], at(0), at(60), ops_locations)
    assert len(forecast) == 2 and list(forecast) == list(forecast.intervals) and forecast[1].start == at(30)
    assert forecast
    assert not forecast_holds([], at(0), at(60), ops_locations)
